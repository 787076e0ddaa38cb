package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// billReport is a report with one bill result of two runs, priced.
func billReport(label string, sqsBilled int64) *Report {
	b := BillResult{Label: label, Costs: map[string]map[string]BillCost{}, CPUPerMsg: map[string]float64{}, CPUSource: map[string]string{}, WRUPerSH: 60}
	b.Runs = []BillRun{
		{Workload: "exchange feed", Sink: TPSQSBatched, Sessions: 100, Held: 100, WindowSec: 10, Counts: SinkCounts{Requests: sqsBilled, Messages: 1000, Bytes: 420_000, SQSBilled: sqsBilled}},
		{Workload: "exchange feed", Sink: TPKinesis, Sessions: 100, Held: 100, WindowSec: 10, Counts: SinkCounts{Requests: 200, Messages: 1000, Bytes: 430_000, PutUnits: 1000, OnDemandKB: 1000}},
		{Workload: "market depth", Sink: TPStdout, Error: "held 3 of 10 sessions in the window"},
	}
	b.price()
	return &Report{Mode: Full, Bill: []BillResult{b}}
}

// The section shows every priced sink of a workload with its total, a
// failed run as failed, and the chart is well-formed SVG with one bar per
// priced line and label.
func TestBillSectionAndChartComeFromTheFigures(t *testing.T) {
	r := billReport("before packing", 283)
	after := billReport("after packing", 20).Bill[0]
	r.Bill = append(r.Bill, after)
	md := Render(r)
	for _, want := range []string{"## 9. The all-in bill", "| exchange feed, 1 msg/s of ~300 B | before packing | **", "| exchange feed, 1 msg/s of ~300 B | after packing | **",
		"failed: held 3 of 10 sessions in the window", BillChart} {
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
	// 3 priced lines (sqs, kinesis on-demand, provisioned) × 2 labels, and
	// 2 legend swatches.
	if rects != 3*2+2 {
		t.Errorf("chart has %d rects, want %d", rects, 3*2+2)
	}
	// The exchange feed's goals are judged on the figures after packing;
	// market depth has no priced line here, so no ratio goal.
	var figs []string
	for _, g := range billGoals(r) {
		figs = append(figs, g.Figure+" = "+g.Measured)
		if strings.Contains(g.Figure, "Market depth") {
			t.Errorf("a market depth goal without its figures: %s", g.Figure)
		}
	}
	if len(figs) != 2 || !strings.Contains(figs[1], "sqs (after packing) = "+dollars(aft.Total)) {
		t.Errorf("bill goals %q, want the exchange feed's kinesis provisioned and sqs after packing", figs)
	}
	if BillChartSVG(&Report{}) != nil {
		t.Error("a report without a bill drew a chart")
	}
}
