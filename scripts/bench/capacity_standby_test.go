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
	sectionHas(t, md, "## 5d",
		"## 5d. A hot standby's memory against the bare client",
		"| holder (wsfleet worker) | 1,024 | 33.0 KiB (43.0) | 10.0 KiB | 1.0 KiB | 1.00 | 0.50 KiB |",
		"| bare client | 1,024 | 30.0 KiB (40.0) | 8.0 KiB |",
		"| holder − bare | | +3.0 KiB | +2.0 KiB | +0.0 KiB | +0.00 |",
		"33.0 ≤ 30.0 + 0.50 KiB: **missed** by 2.5 KiB",
		"| Hot standby: memory per standby against the bare client's per connection plus its window, 1,024 standbys × 1 msg/s, wss | 33.0 vs 30.0 + 0.50 KiB (+3.0) | ≤ bare + window | **no** | +2.5 KiB |",
	)
}

// withMem gives f MemStats (bytes) at the window and at idle, from MiB
// above idle per key: idle has 1 MiB of each key.
func withMem(f ClientFigures, aboveMB map[string]float64) ClientFigures {
	f.Mem, f.Idle.Mem = map[string]float64{}, map[string]float64{}
	for _, k := range memStatKeys {
		f.Idle.Mem[k] = 1 << 20
		f.Mem[k] = (1 + aboveMB[k]) * (1 << 20)
	}
	return f
}

// The breakdown of the RSS above idle per standby: MemStats above the
// idle process's ÷ N, the free heap kept being HeapIdle − HeapReleased,
// and the rest what MemStats do not account for; without MemStats on
// either side there is no table.
func TestStandbyMemRSSParts(t *testing.T) {
	r := standbyMemReport(33, 30, 512<<10)
	s := r.StandbyMem
	// 1,024 standbys: a MiB above idle is 1 KiB per standby.
	s.Holder = withMem(s.Holder, map[string]float64{"HeapInuse": 20, "HeapIdle": 9, "HeapReleased": 1, "Stack": 1,
		"MSpan": 0.5, "GCSys": 1, "OtherSys": 0.5, "NextGC": 30})
	s.Bare = withMem(s.Bare, map[string]float64{"HeapInuse": 18, "HeapIdle": 3, "HeapReleased": 2, "Stack": 1, "GCSys": 1, "NextGC": 27})
	s.Holder.GOGC = "50"
	s.Holder.LiveHeapMB, s.Bare.LiveHeapMB = 1+12, 1+10
	x, ok := rssPartsOf(s.Holder)
	if !ok || !close9(x.RSS, 33) || !close9(x.HeapInuse, 20) || !close9(x.HeapKept, 8) || !close9(x.Stack, 1) || !close9(x.Meta, 2) || !close9(x.Rest, 2) || !close9(x.HeapGoal, 30) || !close9(x.Live, 12) {
		t.Fatalf("holder parts: %+v %v", x, ok)
	}
	md := Render(r)
	sectionHas(t, md, "## 5d",
		"above the idle process of each kind (the idle holder: a worker started as the holder is, before the owner and any session, stopped before the holder starts)",
		"Where the RSS above idle goes, per standby or connection (Go's MemStats at the window's end, the mean of its reads, less the idle process's after a collection; GOGC 50 on both)",
		"| RSS | 33.0 | 30.0 | +3.0 |",
		"| heap in use (HeapInuse) | 20.0 | 18.0 | +2.0 |",
		"| free heap kept, not returned to the OS (HeapIdle − HeapReleased) | 8.0 | 1.0 | +7.0 |",
		"| goroutine stacks (StackInuse) | 1.0 | 1.0 | +0.0 |",
		"| runtime metadata (MSpanInuse, MCacheInuse, GCSys, OtherSys, BuckHashSys) | 2.0 | 1.0 | +1.0 |",
		"| the rest (RSS less the above: pages mapped and touched outside these, the binary's) | 2.0 | 9.0 | -7.0 |",
		"| heap goal (NextGC), for scale: the runtime keeps free heap up to 10 % above it | 30.0 | 27.0 | +3.0 |",
		"| live heap (HeapAlloc after a collection, at the end), for scale | 12.0 | 10.0 | +2.0 |",
		"Like with like without the collector's timing (what each holds, not how far its heap has grown toward its goal): live heap + goroutine stacks per standby 13.0 KiB, per bare connection 11.0 KiB (+2.0);",
	)
	s.Bare.Idle.Mem = nil
	if md := Render(r); strings.Contains(md, "Where the RSS above idle goes") {
		t.Error("a breakdown without the bare client's idle MemStats")
	}
}

// The settle's rule: steady once the last 10 reads lie within 2 % of
// each other, never with fewer; a rise (the placement wave's last dials)
// followed by a fall is not steady, however their means compare.
func TestRSSSteady(t *testing.T) {
	flat := []float64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100}
	for _, tc := range []struct {
		name  string
		reads []float64
		want  bool
	}{
		{"too few", flat[:9], false},
		{"flat", flat, true},
		{"within 2 %", []float64{100, 101, 102, 101, 100, 102, 101, 100, 101, 102}, true},
		{"falling 3 %", []float64{103, 103, 103, 103, 103, 100, 100, 100, 100, 100}, false},
		{"rising 3 %", []float64{100, 100, 100, 100, 100, 103, 103, 103, 103, 103}, false},
		{"rose, then fell (equal means)", []float64{268, 270, 272, 274, 276, 279, 281, 264, 265, 265}, false},
		{"fell, then flat for 10 reads", []float64{300, 280, 260, 240, 220, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200}, true},
		{"flat, then falling", []float64{200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 190, 180, 170, 160, 150}, false},
	} {
		if got := rssSteady(tc.reads); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The settles are said with the highest RSS per standby above idle; a
// bound reached is said so.
func TestStandbyMemSettlesSaid(t *testing.T) {
	r := standbyMemReport(33, 30, 512<<10)
	s := r.StandbyMem
	s.Holder.SettleSec, s.Holder.PeakRSSMB, s.Holder.Steady = 27.4, 10+50, true
	s.Bare.SettleSec, s.Bare.PeakRSSMB = 120, 10+31
	md := Render(r)
	want := "Settles: the holder settled 27 s (its RSS steady); its highest RSS from its start (the placement wave) to the window: 60 MiB, 50.0 KiB per standby or connection above idle; " +
		"the bare client settled 120 s (its RSS not steady at the bound); its highest RSS from its ramp to the window: 41 MiB, 31.0 KiB per standby or connection above idle."
	if !strings.Contains(md, want) {
		i := strings.Index(md, "## 5d")
		t.Fatalf("report lacks %q:\n%s", want, md[i:])
	}
	s.Holder.SettleSec, s.Bare.SettleSec = 0, 0
	if strings.Contains(Render(r), "Settles:") {
		t.Error("settles said without a settle")
	}
}
