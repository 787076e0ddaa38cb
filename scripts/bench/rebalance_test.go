package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

func TestSessionMoves(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	conns := []feed.ConnRecord{
		// a: opened before the join, moved once after it (dark 120 ms).
		{Session: "a", OpenedAt: at(0), ClosedAt: at(100)},
		{Session: "a", OpenedAt: at(100.12)},
		// b: moved twice after the join, 30 s apart (within a 60 s hold).
		{Session: "b", OpenedAt: at(1), ClosedAt: at(101)},
		{Session: "b", OpenedAt: at(101.05), ClosedAt: at(131)},
		{Session: "b", OpenedAt: at(131.2)},
		// c: never moved; a refused attempt is no move.
		{Session: "c", OpenedAt: at(2)},
		{Session: "c", OpenedAt: at(110), ClosedAt: at(110), Reason: feed.ReasonRefused},
		// d: moved before the join only.
		{Session: "d", OpenedAt: at(3), ClosedAt: at(50)},
		{Session: "d", OpenedAt: at(50.1)},
		// e: dialled again by its owner after the join (a redial, no move),
		// then moved to w2 (dark 300 ms after the redial's close).
		{Session: "e", Tenure: "w1/3", OpenedAt: at(4), ClosedAt: at(95)},
		{Session: "e", Tenure: "w1/3", OpenedAt: at(95.5), ClosedAt: at(170)},
		{Session: "e", Tenure: "w2/4", OpenedAt: at(170.3)},
	}
	m := sessionMoves(conns, at(90), time.Minute)
	if len(m.gaps) != 4 || len(m.opened) != 4 || m.redials != 1 {
		t.Fatalf("moves %v and %d redial(s), want 4 and 1", m.gaps, m.redials)
	}
	if m.twiceWithinHold != 1 {
		t.Fatalf("twice within the hold: %d, want 1 (session b)", m.twiceWithinHold)
	}
	var total time.Duration
	for _, g := range m.gaps {
		total += g
	}
	if want := 120*time.Millisecond + 50*time.Millisecond + 200*time.Millisecond + 300*time.Millisecond; total.Round(time.Millisecond) != want {
		t.Fatalf("gaps %v sum %v, want %v", m.gaps, total, want)
	}
	if m.bySender["w1"] != 1 || len(m.bySender) != 1 {
		t.Fatalf("by sender %v, want w1: 1", m.bySender)
	}
	if len(m.bySession["b"]) != 2 || len(m.bySession["c"]) != 0 || len(m.bySession["e"]) != 1 {
		t.Fatalf("by session %v", m.bySession)
	}
}

func TestRebalanceGoalsAndRender(t *testing.T) {
	rb := &RebalanceResult{Sessions: 2000, WorkersBefore: 2, WorkersAfter: 4, ToBalancedMs: 75000, GoalToBalancedMs: 120000,
		Moves: 1000, MinMoves: 900, MinMovesToShare: 1000, Ratio: 1000.0 / 900,
		Gap:         Dist{N: 1000, P50: 40, P99: 180},
		LoadsAtJoin: map[string]int{"w1": 1000, "w2": 1000, "w3": 0, "w4": 0}, LoadsAtEnd: map[string]int{"w1": 500, "w2": 500, "w3": 500, "w4": 500}}
	rep := &Report{Mode: Full, Rebalance: rb, Reruns: []Rerun{{Phases: []string{"rebalance"}, Invocation: "bin/bench -mode full -only rebalance -merge", Commit: "abc123"}}}
	met := map[string]bool{}
	for _, g := range Goals(rep) {
		if strings.HasPrefix(g.Figure, "Rebalancing") {
			met[g.Figure] = g.Met
		}
	}
	if len(met) != 4 {
		t.Fatalf("rebalancing goals %v, want 4", met)
	}
	for f, ok := range met {
		if !ok {
			t.Errorf("%s: not met", f)
		}
	}
	rb.Ratio, rb.Duplicated = 1.5, 3
	for _, g := range Goals(rep) {
		if (strings.Contains(g.Figure, "÷ the minimum") || strings.Contains(g.Figure, "duplicated")) && strings.HasPrefix(g.Figure, "Rebalancing") && g.Met {
			t.Errorf("%s met with ratio 1.5 and 3 duplicates", g.Figure)
		}
	}
	md := Render(rep)
	for _, want := range []string{"## 4b. Rebalancing: 2,000 sessions on 2 workers, then 2 more join", "1000 / 1000 / 0 / 0", "re-run: rebalance", "abc123"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
