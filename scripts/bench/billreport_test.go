package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// billReport is a report with one bill result of three runs, priced: the
// exchange feed's sqs and kinesis runs delivered at p99 sqsP99 and kinP99
// ms.
func billReport(label string, sqsBilled int64, sqsP99, kinP99 float64) *Report {
	b := BillResult{Label: label, Costs: map[string]map[string]BillCost{}, CPUPerMsg: map[string]float64{}, CPUSource: map[string]string{}, WRUPerSH: 60}
	b.Runs = []BillRun{
		{Workload: "exchange feed", Sink: TPSQSBatched, Sessions: 100, Held: 100, WindowSec: 10, Counts: SinkCounts{Requests: sqsBilled, Messages: 1000, Bytes: 420_000, SQSBilled: sqsBilled},
			Delivery: &BillLatency{Dist: Dist{N: 1000, P50: 20, P99: sqsP99}, PerRecord: 283 / float64(sqsBilled)}},
		{Workload: "exchange feed", Sink: TPKinesis, Sessions: 100, Held: 100, WindowSec: 10, Counts: SinkCounts{Requests: 200, Messages: 1000, Bytes: 430_000, PutUnits: 1000, OnDemandKB: 1000},
			Delivery: &BillLatency{Dist: Dist{N: 1000, P50: 20, P99: kinP99}, PerRecord: 1}},
		{Workload: "market depth", Sink: TPStdout, Error: "held 3 of 10 sessions in the window"},
	}
	b.price()
	return &Report{Mode: Full, Bill: []BillResult{b}}
}

// The section shows every priced sink of a workload with its total, a
// failed run as failed, the delivery latency unpacked beside packed, and
// the chart is well-formed SVG with one bar per priced line and label.
func TestBillSectionAndChartComeFromTheFigures(t *testing.T) {
	r := billReport(BillUnpacked, 283, 100, 100)
	after := billReport(BillPacked, 20, 130, 160).Bill[0]
	r.Bill = append(r.Bill, after)
	md := Render(r)
	for _, want := range []string{"## 9. The all-in bill", "| exchange feed, 1 msg/s of ~300 B | unpacked | prod defaults | **", "| exchange feed, 1 msg/s of ~300 B | packed | packed as measured | **",
		"failed: held 3 of 10 sessions in the window", BillChart,
		"| exchange feed, 1 msg/s | " + TPSQSBatched + " | 20 ms | 20 ms | 100 ms | 130 ms | +30 ms | 1.00 | 14.15 |",
		"| market depth | " + TPKinesis + " | not measured (a run failed) |"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	before, aft := r.Bill[0].Costs["exchange feed"][BillSQS], r.Bill[1].Costs["exchange feed"][BillSQS]
	if !(aft.Sink < before.Sink && aft.Total < before.Total) {
		t.Errorf("fewer billed requests did not lower the sqs bill: before %+v, after %+v", before, aft)
	}
	svg := BillChartSVG(r)
	d := xml.NewDecoder(bytes.NewReader(svg))
	rects := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "rect" {
			rects++
		}
	}
	// 3 priced lines (sqs, kinesis on-demand, provisioned) × 2 labels × 2
	// deployments, and 4 legend swatches.
	if rects != 3*2*2+4 {
		t.Errorf("chart has %d rects, want %d", rects, 3*2*2+4)
	}
	// The exchange feed's goals are judged on the packed figures at the
	// measured deployment; market
	// depth has no priced line here, so no ratio goal, and its latency
	// goals are not measured; the exchange feed's latency goals are the
	// packed p99 minus the unpacked one against 50 ms.
	var figs []string
	var lat []Goal
	for _, g := range billGoals(r) {
		figs = append(figs, g.Figure+" = "+g.Measured)
		if strings.Contains(g.Figure, "Market depth") {
			t.Errorf("a market depth goal without its figures: %s", g.Figure)
		}
		if strings.HasPrefix(g.Figure, "p99 delivery latency") {
			lat = append(lat, g)
		}
	}
	atMeasured := r.Bill[1].Measured["exchange feed"][BillSQS]
	if len(figs) != 6 || !strings.Contains(figs[1], "sqs (packed, packed as measured: "+atMeasured.Task.Size()) || !strings.HasSuffix(figs[1], " = "+dollars(atMeasured.Total)) {
		t.Errorf("bill goals %q, want the exchange feed's kinesis provisioned and sqs packed, and four latency goals", figs)
	}
	if len(lat) == 4 {
		if g := lat[0]; !g.Known || !g.Met || g.Measured != "130 − 100 = +30 ms" || g.Goal != "≤ 50 ms" {
			t.Errorf("exchange feed sqs latency goal %+v, want met at +30 ms", g)
		}
		if g := lat[1]; !g.Known || g.Met || g.Miss != "+10 ms" {
			t.Errorf("exchange feed kinesis latency goal %+v, want missed by 10 ms", g)
		}
		if lat[2].Known || lat[3].Known || lat[2].Goal != "≤ 10 ms" {
			t.Errorf("market depth latency goals %+v, want not measured against 10 ms", lat[2:])
		}
	}
	if BillChartSVG(&Report{}) != nil {
		t.Error("a report without a bill drew a chart")
	}
}
