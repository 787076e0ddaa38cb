package bench

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

func close9(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// figures: held sessions, msg/s, CPU %, RSS, heap and stacks (MiB) above
// an idle process of 10 / 2 / 0.25 MiB and 5 goroutines.
func figures(held int, msgRate, cpu, rssMB, heapMB, stackMB float64, goroutines int) ClientFigures {
	return ClientFigures{Held: held, MsgRate: msgRate, CPUPct: cpu, RSSMeanMB: rssMB, HeapInuseMB: heapMB, StackInuseMB: stackMB, Goroutines: goroutines,
		Idle: IdleFigures{RSSMB: 10, HeapInuseMB: 2, StackInuseMB: 0.25, Goroutines: 5}}
}

func TestPerSessionFiguresAndTheirRatios(t *testing.T) {
	// 1,024 sessions: a MiB above idle is 1 KiB per session.
	w := figures(1024, 1000, 3, 10+30, 2+20, 0.25+4, 5+1024)
	b := figures(1024, 1000, 2, 10+25, 2+16, 0.25+5, 5+1024)
	x := NewCapCompare(CapRun{Sessions: 1024, Rate: 1}, "wss", w, b)
	if !close9(x.Worker.RSSAboveIdleKB, 30) || !close9(x.Worker.HeapPerSessKB, 20) || !close9(x.Worker.StackPerSessKB, 4) || !close9(x.Worker.GoroutinesPerSess, 1) {
		t.Fatalf("worker per session: %+v", x.Worker)
	}
	if !close9(x.Worker.RSSPerSessKB, 40) || !close9(x.Bare.RSSPerSessKB, 35) {
		t.Fatalf("RSS ÷ N: %v %v", x.Worker.RSSPerSessKB, x.Bare.RSSPerSessKB)
	}
	// 3 % of a core for 1,000 msg/s: 3 % per 1,000 msg/s, 33,333 msg/s per core.
	if !close9(x.Worker.CPUPer1k, 3) || !close9(x.Bare.CPUPer1k, 2) || !close9(x.Worker.MsgPerCore, 100000.0/3) {
		t.Fatalf("cpu: %+v %+v", x.Worker, x.Bare)
	}
	if !close9(x.Diff.RSSAboveIdleKB, 5) || !close9(x.Diff.HeapKB, 4) || !close9(x.Diff.StackKB, -1) || !close9(x.Diff.CPUPer1k, 1) || !close9(x.Diff.RSSKB, 5) {
		t.Fatalf("diff: %+v", x.Diff)
	}
	if !close9(x.Ratio.CPUPer1k, 1.5) || !close9(x.Ratio.RSSAboveIdleKB, 1.2) || !close9(x.Ratio.StackKB, 0.8) || !close9(x.Ratio.MsgPerCore, 2.0/3) {
		t.Fatalf("ratio: %+v", x.Ratio)
	}
	if x.MessageBytes != FeedMessageBytes(0, 5) || x.Label() != "1,024 × 1 msg/s" {
		t.Fatalf("%d %q", x.MessageBytes, x.Label())
	}
	// The worker's seeded table (the stand-in for DynamoDB's) is not the
	// worker's: 2 MiB of it over 1,024 sessions is 2 KiB a session off its
	// RSS and heap above idle, not off RSS ÷ N; the bare client has none.
	w.StoreMB = 2
	xs := NewCapCompare(CapRun{Sessions: 1024, Rate: 1}, "wss", w, b)
	if !close9(xs.Worker.RSSAboveIdleKB, 28) || !close9(xs.Worker.HeapPerSessKB, 18) || !close9(xs.Worker.RSSPerSessKB, 40) || !close9(xs.Diff.RSSAboveIdleKB, 3) {
		t.Fatalf("without the table: %+v %+v", xs.Worker, xs.Diff)
	}
	// Nothing measured: no division by zero, ratios undefined (0).
	z := NewCapCompare(CapRun{Sessions: 1, Rate: 1}, "ws", ClientFigures{}, ClientFigures{})
	if z.Ratio != (Delta{}) || z.Worker.CPUPer1k != 0 || math.IsNaN(z.Diff.CPUPer1k) {
		t.Fatalf("%+v", z)
	}
}

func goalReport(cmps ...CapCompare) *Report {
	return &Report{Mode: Full, Machine: Machine{Cores: 2}, Capacity: &CapacityResult{Transport: "wss", Compare: cmps}}
}

func TestGoalsAgainstTheBareClient(t *testing.T) {
	// Met: +1.5 KiB, ×1.15; missed: +3 KiB, ×1.5.
	ok := NewCapCompare(CapRun{Sessions: 1024, Rate: 1}, "wss", figures(1024, 1000, 2.3, 10+21.5, 0, 0, 0), figures(1024, 1000, 2, 10+20, 0, 0, 0))
	bad := NewCapCompare(CapRun{Sessions: 1024, Rate: 50, PayloadBytes: AudioPayloadBytes}, "wss", figures(1024, 50000, 75, 10+23, 0, 0, 0), figures(1024, 50000, 50, 10+20, 0, 0, 0))
	wsRun := bad
	wsRun.Transport = "ws" // comparison only: no goal
	one := NewCapCompare(CapRun{Sessions: 1, Rate: MaxFeedRate}, "wss", figures(1, 90000, 100, 20, 0, 0, 0), figures(1, 150000, 100, 15, 0, 0, 0))
	gs := compareGoals(goalReport(ok, bad, wsRun, one))
	if len(gs) != 4 {
		t.Fatalf("%d goals: %+v", len(gs), gs)
	}
	want := []struct {
		met     bool
		figure  string
		measure string
		miss    string
	}{
		{true, "memory per session against the bare client, 1,024 × 1 msg/s, wss", "21.5 vs 20.0 KiB (+1.5)", ""},
		{true, "CPU per 1,000 msg/s against the bare client, 1,024 × 1 msg/s, wss", "×1.15 (2.30 vs 2.00 %)", ""},
		{false, "memory per session against the bare client, 1,024 × 50 msg/s of ~640 B, wss", "23.0 vs 20.0 KiB (+3.0)", "+1.0 KiB"},
		{false, "CPU per 1,000 msg/s against the bare client, 1,024 × 50 msg/s of ~640 B, wss", "×1.50 (1.50 vs 1.00 %)", "×1.25 over (+0.30 points)"},
	}
	for i, w := range want {
		g := gs[i]
		if g.Met != w.met || g.Figure != w.figure || g.Miss != w.miss || !g.Known {
			t.Errorf("goal %d: %+v, want %+v", i, g, w)
		}
		if g.Measured != w.measure {
			t.Errorf("goal %d measured %q, want %q", i, g.Measured, w.measure)
		}
	}
	// The ratio is the measured one: 2.3 / (1,000/1,000) over 2 / 1 is 1.15.
	if !close9(ok.Ratio.CPUPer1k, 1.15) {
		t.Fatalf("%v", ok.Ratio.CPUPer1k)
	}
	// The goals follow the figures: a bare client as costly as the worker meets both.
	same := NewCapCompare(CapRun{Sessions: 1024, Rate: 50}, "wss", figures(1024, 50000, 75, 33, 0, 0, 0), figures(1024, 50000, 75, 33, 0, 0, 0))
	for _, g := range compareGoals(goalReport(same)) {
		if !g.Met {
			t.Errorf("%+v", g)
		}
	}
	// With -plain-ws the goals are judged on ws.
	r := goalReport(wsRun)
	r.Capacity.Transport = "ws"
	if gs := compareGoals(r); len(gs) != 2 || !strings.HasSuffix(gs[0].Figure, ", ws") {
		t.Fatalf("%+v", gs)
	}
	// A failed bare run has no verdict.
	failed := ok
	failed.Bare = ClientFigures{Error: "boom"}
	if gs := compareGoals(goalReport(failed)); len(gs) != 0 {
		t.Fatalf("%+v", gs)
	}
}

// svgBars parses an SVG and returns the titles of its bars; it fails the
// test when the SVG is not well-formed.
func svgBars(t *testing.T, b []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var bars []string
	inBar, root := false, ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, b)
		}
		switch se := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "rect" {
				for _, a := range se.Attr {
					if a.Name.Local == "class" && a.Value == "bar" {
						inBar = true
					}
				}
			}
		case xml.CharData:
			if inBar {
				bars = append(bars, string(se))
			}
		case xml.EndElement:
			if se.Name.Local == "rect" {
				inBar = false
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q", root)
	}
	return bars
}

func TestChartsDrawEveryBar(t *testing.T) {
	paced := NewCapCompare(CapRun{Sessions: 1024, Rate: 1}, "wss", figures(1024, 1000, 3, 10+30, 2+20, 0.25+4, 1029), figures(1024, 1000, 2, 10+25, 2+16, 0.25+5, 1029))
	ws := paced
	ws.Transport = "ws"
	one := NewCapCompare(CapRun{Sessions: 1, Rate: MaxFeedRate}, "wss", figures(1, 90000, 100, 20, 3, 0.3, 6), figures(1, 150000, 100, 15, 2.5, 0.3, 6))
	charts := CapacityCharts(&CapacityResult{Compare: []CapCompare{paced, ws, one}})
	if got := chartNames(charts); strings.Join(got, " ") != ChartMemory+" "+ChartCPU+" "+ChartOneSession {
		t.Fatalf("%v", got)
	}
	mem := svgBars(t, charts[ChartMemory])
	// 2 sizes × 2 clients × 3 parts (heap, stacks, the rest of the RSS).
	if len(mem) != 12 {
		t.Fatalf("%d memory bars: %q", len(mem), mem)
	}
	for _, want := range []string{"1,024 × 1 msg/s, wsfleet: heap in use 20", "wsfleet: goroutine stacks 4", "wsfleet: rest of the RSS 6", "bare: heap in use 16", "bare: goroutine stacks 5", "bare: rest of the RSS 4"} {
		if !strings.Contains(strings.Join(mem, "\n"), want) {
			t.Errorf("memory chart lacks %q: %q", want, mem)
		}
	}
	if s := string(charts[ChartMemory]); !strings.Contains(s, "+5.0 KiB") || !strings.Contains(s, ">wss<") || !strings.Contains(s, ">ws<") || !strings.Contains(s, ">1,024 × 1 msg/s<") {
		t.Errorf("memory chart lacks the difference or the transports")
	}
	cpu := svgBars(t, charts[ChartCPU])
	if len(cpu) != 4 || !strings.Contains(cpu[0], "wsfleet: CPU per 1,000 msg/s 3") || !strings.Contains(cpu[1], "bare: CPU per 1,000 msg/s 2") {
		t.Fatalf("cpu bars: %q", cpu)
	}
	if !strings.Contains(string(charts[ChartCPU]), "×1.50") {
		t.Error("cpu chart lacks the ratio")
	}
	single := svgBars(t, charts[ChartOneSession])
	if len(single) != 2 || !strings.Contains(single[0], "wsfleet: msg/s per core 90,000") || !strings.Contains(single[1], "bare: msg/s per core 150,000") {
		t.Fatalf("one-session bars: %q", single)
	}
	// Without side-by-side runs: no chart.
	if len(CapacityCharts(&CapacityResult{})) != 0 || len(CapacityCharts(nil)) != 0 {
		t.Fatal("charts without runs")
	}
}

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct{ max, want float64 }{{10, 2}, {33, 10}, {3.2, 1}, {0.9, 0.2}, {120000, 50000}, {0, 1}} {
		if got := niceStep(tc.max, 5); !close9(got, tc.want) {
			t.Errorf("niceStep(%v) = %v, want %v", tc.max, got, tc.want)
		}
	}
}

func TestTheReportShowsTheSideBySideTable(t *testing.T) {
	wf := figures(1024, 1000, 2.3, 10+21.5+0.5, 2+15, 0.25+4, 1029)
	wf.StoreMB = 0.5
	ok := NewCapCompare(CapRun{Sessions: 1024, Rate: 1}, "wss", wf, figures(1024, 1000, 2, 10+20, 2+14, 0.25+4.5, 1029))
	r := goalReport(ok)
	r.Capacity.Idle = []IdleFigures{{Kind: KindWorker, Transport: "wss", RSSMB: 12}, {Kind: KindBare, Transport: "wss", RSSMB: 5}}
	dir := t.TempDir()
	md := filepath.Join(dir, "BENCHMARKS.md")
	if err := writeMarkdown(r, md); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"### Worker against a bare client", "| 1,024 × 1 msg/s | wss | wsfleet | 1,024 |", "| 1,024 × 1 msg/s | wss | bare client |", "wsfleet − bare", "wsfleet ÷ bare", "×1.15",
		"](" + ChartMemory + ")", "](" + ChartCPU + ")", "memory per session against the bare client, 1,024 × 1 msg/s, wss: 21.5 vs 20.0 KiB (+1.5), goal ≤ bare + 2 KiB: **met**", "| bare client | wss | 5.0 MiB |",
		"taken out of its per-session figures above: 1,024 × 1 msg/s on wss 0.5 MiB (512 B a session)"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, f := range []string{ChartMemory, ChartCPU} {
		svg, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		svgBars(t, svg)
	}
	if _, err := os.Stat(filepath.Join(dir, ChartOneSession)); err == nil {
		t.Error("a one-session chart without a one-session run")
	}
}

// The seeded tables listed are the paced runs': one session's is noise
// beside its process (its per-session figures are not shown either).
func TestTheSeededTablesOfThePacedRuns(t *testing.T) {
	paced := figures(1024, 1000, 2.3, 32, 17, 4.25, 1029)
	paced.StoreMB = 0.5
	one := figures(1, 90000, 100, 20, 3, 0.3, 6)
	one.StoreMB = 0.03
	var b strings.Builder
	renderStores(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, []CapCompare{
		NewCapCompare(CapRun{Sessions: 1024, Rate: 1}, "wss", paced, ClientFigures{}),
		NewCapCompare(CapRun{Sessions: 1, Rate: MaxFeedRate}, "wss", one, ClientFigures{}),
	})
	if s := b.String(); !strings.Contains(s, "1,024 × 1 msg/s on wss 0.5 MiB (512 B a session).") || strings.Contains(s, "as fast as") {
		t.Fatalf("%q", s)
	}
	var none strings.Builder
	renderStores(func(f string, a ...any) { fmt.Fprintf(&none, f, a...) }, []CapCompare{NewCapCompare(CapRun{Sessions: 1, Rate: MaxFeedRate}, "wss", one, ClientFigures{})})
	if none.Len() != 0 {
		t.Fatalf("a line with no paced run: %q", none.String())
	}
}

// The size the report states is the size the feed sends.
func TestFeedMessageBytesIsTheFeedsSize(t *testing.T) {
	if got := FeedMessageBytes(AudioPayloadBytes, 5); got != 640 {
		t.Fatalf("%d, want 640", got)
	}
	for _, pad := range []int{0, AudioPayloadBytes} {
		srv, err := feed.New(feed.Config{Rate: 1000, PayloadBytes: pad})
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		c, _, err := websocket.Dial(ctx, srv.URL("cap-000042"), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, msg, err := c.Read(ctx)
		_ = c.CloseNow()
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		seq := strings.TrimPrefix(string(msg), `{"seq":`)
		seq = seq[:strings.IndexByte(seq, ',')]
		if _, err := strconv.Atoi(seq); err != nil {
			t.Fatalf("%s", msg)
		}
		if got := FeedMessageBytes(pad, len(seq)); got != len(msg) {
			t.Errorf("pad %d: FeedMessageBytes %d, the feed sent %d B: %s", pad, got, len(msg), msg)
		}
	}
}

func TestTheSizesThatMatchRealUse(t *testing.T) {
	d := SizesFor(Full).Describe()
	for _, want := range []string{"19,000 × 1 msg/s beside the bare client", "1,000 × 50 msg/s of ~640 B beside the bare client", "1 × as fast as the feed pushes beside the bare client", "19,000 × 1 msg/s (GOGC=100)"} {
		if !strings.Contains(d, want) {
			t.Errorf("full sizes lack %q: %s", want, d)
		}
	}
	r := &runner{cfg: DefaultConfig(Full)}
	bare, lever := CapRun{Sessions: 1, Rate: 1, Bare: true}, CapRun{Sessions: 1, Rate: 1}
	if got := r.capTransports(bare); strings.Join(got, ",") != "wss,ws" || r.capTransport() != "wss" {
		t.Fatalf("%v %s", got, r.capTransport())
	}
	if got := r.capTransports(lever); strings.Join(got, ",") != "wss" {
		t.Fatalf("%v", got)
	}
	r.cfg.PlainWS = true
	if got := r.capTransports(bare); strings.Join(got, ",") != "ws" || r.capTransport() != "ws" {
		t.Fatalf("-plain-ws: %v", got)
	}
	c := DefaultConfig(Quick)
	c.Sizes.CapRuns = []CapRun{{Sessions: 1, Rate: MaxFeedRate * 2}, {Sessions: 1, Rate: 1, PayloadBytes: -1}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "rate in (0, 100000]") || !strings.Contains(err.Error(), "payload -1 B") {
		t.Fatalf("%v", err)
	}
}
