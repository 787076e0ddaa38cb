package bench

import (
	"strings"
	"testing"
	"time"
)

func TestThroughputGoals(t *testing.T) {
	tp := &ThroughputResult{LatencyMs: 15, SerialCeilings: map[string]float64{TPKinesis: 10000}, Runs: []ThroughputRun{
		{Name: TPSQSBatched, Sessions: 1, FeedRate: MaxFeedRate, MsgPerSec: 4000, Requests: 400, ReqPerMsg: 0.1},
		{Name: TPSQSBatched, Sessions: 1, FeedRate: PacedRate, MsgPerSec: 1000, Requests: 500, ReqPerMsg: 0.5}, // not the saturation run
		{Name: TPKinesis, Sessions: 1, FeedRate: MaxFeedRate, MsgPerSec: 7500, Requests: 15, ReqPerMsg: 0.002,
			EngineMs: Dist{N: 15, Mean: 30, P50: 29, P99: 40}, ClientGapMs: Dist{N: 14, Mean: 1.5, P50: 1.2, P99: 4}},
	}}
	// 500 records take 50 ms alone + 15 ms: 7,692 msg/s for one ordered session.
	if c := tp.orderedCeiling(TPKinesis, 500); c < 7690 || c > 7700 {
		t.Fatalf("ordered ceiling %v", c)
	}
	gs := throughputGoals(tp)
	if len(gs) != 4 {
		t.Fatalf("%d goals", len(gs))
	}
	for _, g := range gs {
		if !g.Met {
			t.Errorf("%s: %s against %s not met", g.Figure, g.Measured, g.Goal)
		}
	}
	tp.Runs[2].MsgPerSec = 5000 // below 90 % of the ceiling
	if gs := throughputGoals(tp); gs[2].Met {
		t.Errorf("kinesis at 5,000 msg/s met %s", gs[2].Goal)
	}
	// Measured through the proxy, one ordered session's ceiling is judged
	// instead of the formula's.
	tp.OrderedCeilings, tp.Ceilings = map[string]float64{TPKinesis: 6000}, map[string]float64{TPKinesis: 17000}
	if c := tp.orderedBound(TPKinesis, 500); c != 6000 {
		t.Fatalf("ordered bound %v, want the measured 6000", c)
	}
	tp.Runs[2].MsgPerSec = 5500 // ≥ 90 % of 6,000
	if gs := throughputGoals(tp); !gs[2].Met || !strings.Contains(gs[2].Goal, "6,000 msg/s") {
		t.Errorf("kinesis at 5,500 msg/s against %s: met %v", gs[2].Goal, gs[2].Met)
	}
	tp.Runs[2].MsgPerSec = 5000
	if gs := throughputGoals(tp); gs[2].Met {
		t.Errorf("kinesis at 5,000 msg/s met %s", gs[2].Goal)
	}
	out := Render(&Report{Mode: Quick, Started: time.Now(), Finished: time.Now(), Throughput: tp})
	for _, want := range []string{"## 8. Sinks at real rates", "| sqs batched | 1 × as fast as read | 4,000 |", "| kinesis | 1 × as fast as read | 5,000 |", "| 6,000 msg/s |", "kinesis, 1 × as fast as read: 15 requests, each round = 15 ms added + the engine's answer (mean 30.0 ms", "(mean 1.50 ms, p50 1.20, p99 4.00"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
