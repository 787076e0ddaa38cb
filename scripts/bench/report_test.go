package bench

import (
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	ph := Phase{Command: "bin/bench -mode quick -only x", Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Seconds: 12, Settings: map[string]string{"k": "v"}}
	return &Report{
		Mode: Quick, Invocation: "bin/bench -mode quick", Started: ph.Started, Finished: ph.Started.Add(4 * time.Minute),
		Machine: Machine{Cores: 2, CPU: "AMD EPYC", MemoryMB: 24105, Kernel: "6.1", Go: "go1.26", Commit: "abc"},
		Claim:   &ClaimResult{Phase: ph, Workers: 2, FeedRate: 100, SQS: Dist{N: 200, P50: 30, P90: 60, P99: 140, Max: 200}, Reconcile: Dist{N: 200, P50: 1800, P99: 5900}},
		Failover: &HandoverResult{Phase: ph, Kind: "kill-9", GoalP99Ms: 11000, TTLPlusSkewMs: 10500, TTLPlusRecMs: 15000,
			Gap: Dist{N: 200, P50: 8800, P99: 10600}, PerRound: []Dist{{N: 100}}, Duplicated: 3000, DuplicatedMax: 20, ReplayBound: 24},
		Handoff: &HandoverResult{Phase: ph, Kind: "sigterm", GoalP99Ms: 250, Gap: Dist{N: 200, P50: 90, P99: 240}, SessionsPerRound: 100, Survivors: 2},
		Capacity: &CapacityResult{Phase: ph, Runs: []CapRunResult{
			{Store: "memory", Sessions: 2000, Rate: 1, Held: 2000, MsgRate: 2000, Expected: 2000, CPUPct: 6, CPUPer1k: 3, RSSPerSessKB: 40,
				Profiles: Profiles{MemStats: map[string]int64{"HeapInuse": 40 << 20}, HeapTop: []string{"flat flat%", "1MB 50% x"}}},
			{Store: "memory", Sessions: 1000, Rate: 10, Held: 1000, MsgRate: 10000, CPUPct: 20, CPUPer1k: 2},
			{Store: "memory", Sessions: 8000, Rate: 1, Held: 8000, CPUPer1k: 9, RSSPerSessKB: 30, MaxRenews: "64", RenewsPerSec: 2400, NeededPerSec: 2400, LeaseLost: 2},
		}},
		Dynalite: &DynaliteResult{Phase: ph, Steps: []DynStep{{Target: 2000, Held: 2000, RenewsPerSec: 600, NeededPerSec: 600, RenewP50Ms: 5, RenewP99Ms: -1, Verdict: "renew p99 above 1 s"}}, Bottleneck: "at 2000 sessions: renew p99 above 1 s"},
		Cost: &CostResult{Phase: ph, Sessions: 300, Workers: 2, RenewEverySec: 3.333, GSIMaxSessions: 1666, GSIMaxSessionsMeasured: 1660, GSITableMaxSessions: 26656, ShardSpread: 1.12,
			Steady: []KindCost{{Kind: "renew", Count: 9000, PerSessionHour: 1080, WRUPerSH: 3240, IndexWRUPerSH: 2160}}, PerTenure: map[string]float64{"acquire": 1, "release": 1},
			WRUPerSH: 3240, IndexWRUPerSH: 2160, MonthlyPer1000: 1478.25},
		Micro:  &MicroResult{Phase: ph, Benchmarks: []MicroBench{{Package: "shared/lease", Name: "BenchmarkRules/CanRenew-2", NsPerOp: 3.2}}},
		Errors: map[string]string{"dynalite": "boom\nline two"},
	}
}

func TestGoals(t *testing.T) {
	gs := Goals(sampleReport())
	want := map[string]bool{
		"Claim latency via SQS, p99":                                                                     false,
		"Crash failover (kill -9 → first message by the new owner), p99":                                 true,
		"Graceful handoff gap (SIGTERM → first message by the new owner), p99, 100 sessions per SIGTERM": true,
		"Graceful handoff: messages lost / duplicated, 100 sessions per SIGTERM":                         true,
		"RSS per session, 2,000 sessions × 1 msg/s":                                                      false,
		"CPU per 1,000 msg/s, 2,000 sessions × 1 msg/s":                                                  false,
		"CPU per 1,000 msg/s, 1,000 sessions × 10 msg/s":                                                 true,
		"RSS per session, 8,000 sessions × 1 msg/s":                                                      true,
		"CPU per 1,000 msg/s, 8,000 sessions × 1 msg/s":                                                  false,
	}
	if len(gs) != len(want) {
		t.Fatalf("%d goals: %+v", len(gs), gs)
	}
	for _, g := range gs {
		met, ok := want[g.Figure]
		if !ok || met != g.Met {
			t.Errorf("%q: met %v (known %v)", g.Figure, g.Met, ok)
		}
		if !g.Met && g.Miss == "" {
			t.Errorf("%q: missed without saying by how much", g.Figure)
		}
	}
}

func TestRender(t *testing.T) {
	md := Render(sampleReport())
	for _, want := range []string{
		"**Mode: quick**", "make bench-full", "| date | 2026-01-02 03:04:05 UTC",
		"2 cores (AMD EPYC)", "| Claim latency via SQS, p99 | 140.0 ms | ≤ 100 ms | **no** | +40.0 ms (×1.4) |",
		"**dynalite**: boom line two", "N_key = 1000 WCU/s × RenewEvery / 2", "**1,666 sessions**", "**26,656 sessions**", "put 1.12× the mean", "$1,478.25",
		"RSS per session 40.0 KiB", "about 42,666 sessions", "the workers renewed 2400 leases/s against 2400 needed and lost 2", "```\nflat flat%\n1MB 50% x\n```", "≤ 5 ms / > 2 s", "BenchmarkRules/CanRenew-2",
		"command: `bin/bench -mode quick -only x`", "(n < 200: p99 indicative)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestFormatting(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{ms(3.456), "3.46 ms"}, {ms(45.67), "45.7 ms"}, {ms(10512.4), "10,512 ms"}, {ms(-40), "−40.0 ms"},
		{thousands(1234567), "1,234,567"}, {thousands(-1000), "-1,000"}, {thousands(12), "12"},
		{money(1478.25), "1,478.25"}, {money(2.999), "3.00"}, {bucket(-1), "> 2 s"}, {bucket(5), "≤ 5 ms"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestRenewBound(t *testing.T) {
	if got := RenewBound(64, 5*time.Millisecond, DefaultRenewEvery); got != 42666 {
		t.Fatalf("%d, want 42666 (64 / 5 ms × 3.33 s)", got)
	}
}

func TestJudgeStep(t *testing.T) {
	ok := DynStep{Target: 2000, Held: 2000, RenewsPerSec: 600, NeededPerSec: 600, RenewP99Ms: 50, DynaliteCPU: 40}
	if v := judgeStep(ok); v != VerdictOK {
		t.Fatalf("healthy step: %q", v)
	}
	hot := ok
	hot.DynaliteCPU = 95
	if v := judgeStep(hot); v != VerdictSaturated {
		t.Fatalf("saturated: %q", v)
	}
	bad := ok
	bad.LeaseLost, bad.RenewsPerSec = 3, 400
	if v := judgeStep(bad); !strings.Contains(v, "3 lease(s) lost") || !strings.Contains(v, "renewals behind") {
		t.Fatalf("unhealthy: %q", v)
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig(Quick)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultConfig(Full).Validate(); err != nil {
		t.Fatal(err)
	}
	c.Phases = []string{"nope"}
	c.Mode = "medium"
	c.Sizes.CapRuns = []CapRun{{Sessions: 25000, Rate: 1}}
	err := c.Validate()
	for _, want := range []string{"phase \"nope\"", "mode \"medium\"", "open-file limit"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error about %s, got %v", want, err)
		}
	}
}
