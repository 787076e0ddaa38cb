package bench

import (
	"strings"
	"testing"
)

// standbyFigures: n held, RSS / heap / stacks (MiB) and goroutines, above
// an idle process of 10 / 2 / 0.25 MiB and 5 goroutines (figures).
func standbyFigures(n int, rssAboveMB, heapAboveMB float64) ClientFigures {
	return figures(n, 0, 1, 10+rssAboveMB, 2+heapAboveMB, 0.25+float64(n)/1024, 5+n)
}

func TestJudgeStandbyMem(t *testing.T) {
	for _, tc := range []struct {
		name             string
		holderMB, bareMB float64
		windowBytes      int64
		met              bool
		over, bound      float64
	}{
		// 1,024 standbys: a MiB above idle is 1 KiB per standby; a window
		// of 512 KiB in all is 0.5 KiB per standby.
		{"within the window", 30.25, 30, 512 << 10, true, 0.25, 30.5},
		{"exactly bare + window", 30.5, 30, 512 << 10, true, 0.5, 30.5},
		{"above bare + window", 33, 30, 512 << 10, false, 3, 30.5},
		{"below bare, no window", 20, 30, 0, true, -10, 30},
	} {
		h, b := standbyFigures(1024, tc.holderMB, 10), standbyFigures(1024, tc.bareMB, 8)
		v := JudgeStandbyMem(&h, &b, tc.windowBytes)
		if !v.Known || v.Met != tc.met || !close9(v.OverBareKB, tc.over) || !close9(v.BoundKB, tc.bound) || !close9(v.HolderKB, tc.holderMB) || !close9(v.BareKB, tc.bareMB) {
			t.Errorf("%s: %+v", tc.name, v)
		}
		// The figures are derived in place: the section's per-standby heap.
		if !close9(h.HeapPerSessKB, 10) || !close9(b.HeapPerSessKB, 8) || !close9(h.GoroutinesPerSess, 1) {
			t.Errorf("%s: derived %+v %+v", tc.name, h, b)
		}
	}
	// A run that held nothing on either side judges nothing, without a
	// division by zero.
	h, b := standbyFigures(1024, 30, 10), ClientFigures{Error: "bare client exited"}
	if v := JudgeStandbyMem(&h, &b, 1<<20); v.Known || v.Met || v.WindowKB != 0 {
		t.Fatalf("bare failed: %+v", v)
	}
}

func standbyMemReport(holderMB, bareMB float64, window int64) *Report {
	s := &StandbyMemResult{Transport: "wss", Sessions: 1024, Rate: 1, Owned: 1024, Connected: 1024, WindowBytes: window,
		Holder: standbyFigures(1024, holderMB, 10), Bare: standbyFigures(1024, bareMB, 8)}
	s.Verdict = JudgeStandbyMem(&s.Holder, &s.Bare, s.WindowBytes)
	return &Report{Mode: Quick, Machine: Machine{Cores: 2}, StandbyMem: s}
}

func TestStandbyMemGoalAndSection(t *testing.T) {
	ok := standbyMemGoals(standbyMemReport(30.25, 30, 512<<10))
	if len(ok) != 1 || !ok[0].Met || !ok[0].Known || ok[0].Miss != "" || ok[0].Measured != "30.2 vs 30.0 + 0.50 KiB (+0.2)" ||
		!strings.Contains(ok[0].Figure, "1,024 standbys × 1 msg/s, wss") {
		t.Fatalf("met: %+v", ok)
	}
	bad := standbyMemGoals(standbyMemReport(33, 30, 512<<10))
	if len(bad) != 1 || bad[0].Met || bad[0].Miss != "+2.5 KiB" {
		t.Fatalf("missed: %+v", bad)
	}
	r := standbyMemReport(30.25, 30, 512<<10)
	r.StandbyMem.Bare = ClientFigures{Error: "bare client exited"}
	r.StandbyMem.Verdict = JudgeStandbyMem(&r.StandbyMem.Holder, &r.StandbyMem.Bare, r.StandbyMem.WindowBytes)
	if g := standbyMemGoals(r); len(g) != 1 || g[0].Known || g[0].Met || g[0].Miss != "not measured" {
		t.Fatalf("not measured: %+v", g)
	}
	if standbyMemGoals(&Report{}) != nil {
		t.Fatal("a goal without the run")
	}

	md := Render(standbyMemReport(33, 30, 512<<10))
	for _, want := range []string{
		"## 5d. A hot standby's memory against the bare client",
		"| holder (wsfleet worker) | 1,024 | 33.0 KiB (43.0) | 10.0 KiB | 1.0 KiB | 1.00 | 0.50 KiB |",
		"| bare client | 1,024 | 30.0 KiB (40.0) | 8.0 KiB |",
		"| holder − bare | | +3.0 KiB | +2.0 KiB | +0.0 KiB | +0.00 |",
		"33.0 ≤ 30.0 + 0.50 KiB: **missed** by 2.5 KiB",
		"| Hot standby: memory per standby against the bare client's per connection plus its window, 1,024 standbys × 1 msg/s, wss | 33.0 vs 30.0 + 0.50 KiB (+3.0) | ≤ bare + window | **no** | +2.5 KiB |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		i := strings.Index(md, "## 5d")
		t.Log(md[i:])
	}
}
