package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sampleCostRun: 10,000 sessions on 2 workers for an hour at 1 msg/s.
func sampleCostRun() *CostRun {
	run := &CostRun{Name: "active", Sessions: 10000, Workers: 2, FeedRate: 1, Held: 10000, SessionsPerWorker: 5000, RampSec: 80, WindowSec: 3600, SessionHours: 10000, WorkerHours: 2,
		HeartbeatWRUPerWH: 3600, HeartbeatsPerWH: 3600, CheckpointsPerSH: 60,
		Tenure: []TenureCost{{Kind: "acquire", Requests: 1, WRU: 4, IndexWRU: 2}, {Kind: "release", Requests: 1, WRU: 4, IndexWRU: 2}}, TenureWRU: 8}
	run.Steady = Split(sampleUnits(), run.SessionHours, run.WorkerHours)
	run.MonthlyMeasured = MonthlyPer1000(run.Steady.Total.WRUPerSH, run.Steady.Total.RRUPerSH)
	run.MonthlyDefaults = MonthlyPer1000(run.Steady.Total.NormWRUPerSH, run.Steady.Total.NormRRUPerSH)
	return run
}

func sampleReport() *Report {
	ph := Phase{Command: "bin/bench -mode quick -only x", Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Seconds: 12, Settings: map[string]string{"k": "v"}}
	return &Report{
		Mode: Quick, Invocation: "bin/bench -mode quick", Started: ph.Started, Finished: ph.Started.Add(4 * time.Minute),
		Machine: Machine{Cores: 2, CPU: "AMD EPYC", MemoryMB: 24105, Kernel: "6.1", Go: "go1.26", Commit: "abc"},
		Claim:   &ClaimResult{Phase: ph, Workers: 2, FeedRate: 100, SQS: Dist{N: 200, P50: 30, P90: 60, P99: 140, Max: 200}, Reconcile: Dist{N: 200, P50: 1800, P99: 5900}},
		Failover: &HandoverResult{Phase: ph, Kind: "kill-9", GoalP99Ms: 11000, TTLPlusWatchMs: 10500, TTLPlusRecMs: 15000,
			Gap: Dist{N: 200, P50: 8800, P99: 10600}, PerRound: []Dist{{N: 100}}, Duplicated: 3000, DuplicatedMax: 20, ReplayBound: 336,
			KillToDead: Dist{N: 1, P50: 9600, Max: 9600}, DeadToFirst: Dist{N: 100, P50: 300, P99: 700, Max: 800}},
		Handoff: &HandoverResult{Phase: ph, Kind: "sigterm", GoalP99Ms: 250, Gap: Dist{N: 200, P50: 90, P99: 240, Max: 400}, Dark: Dist{N: 200, P50: 60, P99: 200}, SessionsPerRound: 100, Survivors: 2},
		Capacity: &CapacityResult{Phase: ph, Runs: []CapRunResult{
			{Store: "memory", Sessions: 2000, Rate: 1, Held: 2000, MsgRate: 2000, Expected: 2000, CPUPct: 6, CPUPer1k: 3, RSSPerSessKB: 40,
				Profiles: Profiles{MemStats: map[string]int64{"HeapInuse": 40 << 20}, HeapTop: []string{"flat flat%", "1MB 50% x"}}},
			{Store: "memory", Sessions: 1000, Rate: 10, Held: 1000, MsgRate: 10000, CPUPct: 20, CPUPer1k: 2},
			{Store: "memory", Sessions: 8000, Rate: 1, Held: 8000, CPUPer1k: 9, RSSPerSessKB: 30, MaxRenews: "64", RenewsPerSec: 2400, NeededPerSec: 2400, LeaseLost: 2},
		}},
		Dynalite: &DynaliteResult{Phase: ph, Steps: []DynStep{{Target: 2000, Held: 2000, RenewsPerSec: 600, NeededPerSec: 600, RenewP50Ms: 5, RenewP99Ms: -1, Verdict: "renew p99 above 1 s"}}, Bottleneck: "at 2000 sessions: renew p99 above 1 s"},
		Stop:     &StopResult{Phase: ph, GoalP99Ms: 1500, Owner: Dist{N: 30, P50: 40, P99: 90}, NonOwner: Dist{N: 30, P50: 600, P99: 1200}, Mailbox: Dist{N: 30, P50: 650, P99: 1700}},
		Cost: &CostResult{Phase: ph, Active: sampleCostRun(), Idle: &CostRun{Name: "idle", Sessions: 200, Workers: 2, Held: 200, SessionsPerWorker: 100, WindowSec: 60, SessionHours: 3.33, WorkerHours: 0.033,
			Steady: Split(map[string]Usage{"heartbeat": {Writes: 120, WriteUnits: 120}}, 3.33, 0.0333)}, TableCeiling: 2264150, TableCeilingMeasured: 2400000, WorkerKeyWRUPerSec: 1, WorkerKeyRRUPerSec: 4, CheckpointKeyWRUPerSec: 1.0 / 60},
		Reads: &ReadsResult{Phase: ph, Runs: []ReadsRun{{Workers: 10, WindowSec: 30, WorkerHours: 0.083, RRUPerWH: 21000, WRUPerWH: 3600, HeartbeatsPerWH: 3600, Kinds: []KindCost{{Kind: "get_worker", RRUPerWH: 14400}}},
			{Workers: 100, WindowSec: 30, WorkerHours: 0.83, RRUPerWH: 21500, WRUPerWH: 3600, HeartbeatsPerWH: 3590, Kinds: []KindCost{{Kind: "get_worker", RRUPerWH: 14400}, {Kind: "heartbeat", WRUPerWH: 3600}}}}},
		Micro:  &MicroResult{Phase: ph, Benchmarks: []MicroBench{{Package: "workers/streamer/internal/session", Name: "BenchmarkHandle/new/discard-2", NsPerOp: 151.5}}},
		Errors: map[string]string{"dynalite": "boom\nline two"},
	}
}

func TestGoals(t *testing.T) {
	gs := Goals(sampleReport())
	want := map[string]bool{
		"Claim latency via SQS, p99":                                     false,
		"Crash failover (kill -9 → first message by the new owner), p99": true,
		"Crash failover: messages lost / skipped (the no-loss check)":    true,
		"Graceful handoff: a session's dark time (old connection closed at the source → first message by the new owner), p99, 100 sessions per SIGTERM": true,
		"Graceful handoff: SIGTERM → the last session's first message by its new owner (the drain), 100 sessions per SIGTERM":                           true,
		"Graceful handoff: messages lost / duplicated, 100 sessions per SIGTERM":                                                                        true,
		"RSS per session, 2,000 sessions × 1 msg/s":                                                                                                     false,
		"CPU per 1,000 msg/s, 2,000 sessions × 1 msg/s":                                                                                                 false,
		"CPU per 1,000 msg/s, 1,000 sessions × 10 msg/s":                                                                                                true,
		"RSS per session, 8,000 sessions × 1 msg/s":                                                                                                     true,
		"CPU per 1,000 msg/s, 8,000 sessions × 1 msg/s":                                                                                                 false,
		"POST stop → connection closed at the source, p99, notification reaching the owner":                                                             true,
		"POST stop → connection closed at the source, p99, notification reaching a non-owner":                                                           true,
		"POST stop → connection closed at the source, p99, notification reaching no worker (mailbox only)":                                              false,
		"Write units per session-hour at the defaults (1,000 sessions per worker, 1 msg/s)":                                                             true,
		"— of which liveness + ownership":                                                                                                               true,
		"Write units per idle session-hour at the defaults":                                                                                             true,
		"Table ceiling (40,000 WRU/s ÷ write units per session-second at the defaults)":                                                                 true,
		"Index write units in the steady windows (no hot index key)":                                                                                    true,
		"Read units per worker-hour, 100 workers ÷ 10 workers (N² reads would be ×10)":                                                                  true,
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
		"**dynalite**: boom line two",
		// failover: no renewals, no skew
		"TTL + one watch interval = 10,500 ms", "kill → victim declared dead", "bound: rate × (checkpoint interval × 1.1 + 1 s) + 1 = 336",
		// stop
		"## 4. Stop: POST stop → the connection closed at the source", "| it reaches a non-owner (the owner reads its mailbox) | 30 (n < 200: p99 indicative) |",
		// cost
		"## 6. DynamoDB cost", "at the defaults' 1,000 sessions per worker 3600 ÷ 1,000 = 3.60",
		"**Total at the defaults (1,000 sessions per worker, 1 msg/s): 63.6 write units per session-hour**, of which liveness + ownership 3.60, checkpoints 60.0",
		"against $1,468.63 before issue 13", "**2,264,150 sessions**", "**0 index write units in the steady windows**",
		"| heartbeat | liveness | workers | 7200 (0) | 0 | 7200 (0) | 0.0 | 3600 / 0 |", "| **per tenure** | | **8.00** |",
		"**Idle sessions**", "| checkpoints | 60.00 (0.00) | 60.00 |",
		// reads
		"## 7. Finding dead workers", "| **total: write / read units** | **3600 / 21000** | **3600 / 21500** |", "go ×1.02 (reads that grew with the square of the fleet, every worker reading every record, would go ×10)",
		"RSS per session 40.0 KiB", "about 768,000 sessions", "heartbeat 2400.0 times/s against 2400 needed", "```\nflat flat%\n1MB 50% x\n```", "≤ 5 ms / > 2 s", "BenchmarkHandle/new/discard-2",
		"command: `bin/bench -mode quick -only x`", "(n < 200: p99 indicative)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, stale := range []string{"renewal", "max skew", "lease_expires_at_ms", "takeable (stored expiry"} {
		if strings.Contains(md, stale) && !strings.Contains(md, "before issue 13") {
			t.Errorf("report still says %q", stale)
		}
	}
}

// rerendered writes js and renders it as bin/bench -rerender does.
func rerendered(t *testing.T, js []byte) string {
	t.Helper()
	dir := t.TempDir()
	in, md := filepath.Join(dir, "benchmarks.json"), filepath.Join(dir, "BENCHMARKS.md")
	if err := os.WriteFile(in, js, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Rerender(in, md); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWhereItGoesAboveTheBareClient(t *testing.T) {
	run := CapRunResult{Store: "memory", Sessions: 2000, Rate: 1, Transport: "wss", Held: 2000, RSSPerSessKB: 40,
		Profiles: Profiles{
			HeapFile: "/r/out/bench/capacity-1-wss/capacity-1-wss-heap.pb.gz", HeapTop: []string{"flat flat%", "100MB 100% x"}, LiveHeapBytes: 100 << 20,
			CPUFile: "/r/out/bench/capacity-1-wss/capacity-1-wss-cpu.pb.gz", CPUTop: []string{"flat flat%", "1s 50% y"},
			BareHeapFile: "/r/out/bench/capacity-1-wss/capacity-1-wss-bare-heap.pb.gz", BareLiveHeapBytes: 80 << 20,
			HeapAboveBare: []string{
				"Showing nodes accounting for 20MB, 25.00% of 80MB total",
				"      flat  flat%   sum%        cum   cum%",
				"      21MB 26.25% 26.25%       21MB 26.25%  bufio.NewWriterSize",
				"     -1MB -1.25% 25.00%      -1MB -1.25%  main.(*Client).hold",
			}}}
	js, err := json.Marshal(&Report{Mode: Full, Capacity: &CapacityResult{Transport: "wss", Runs: []CapRunResult{run}}})
	if err != nil {
		t.Fatal(err)
	}
	s := rerendered(t, js)
	title := "Heap in use above the bare client, per allocation site (`go tool pprof -top -sample_index=inuse_space -diff_base out/bench/capacity-1-wss/capacity-1-wss-bare-heap.pb.gz out/bench/capacity-1-wss/capacity-1-wss-heap.pb.gz`"
	for _, want := range []string{
		title,
		"the percentages are of the bare client's total):\n\n```\nShowing nodes accounting for 20MB, 25.00% of 80MB total\n",
		"  main.(*Client).hold\n```\n",
		// (100 − 80 MiB) × 1,024 ÷ 2,000 = 10.24 KiB; the sampling's
		// error √(512 KiB × 180 MiB) = 9.49 MiB, 4.86 KiB per session.
		"Heap in use above the bare client, per session: (100.0 − 80.0 MiB) ÷ 2,000 sessions = +10.2 ± 4.9 KiB (",
		"one sample per 512 KiB allocated on average",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// In "Where it goes", after the worker's heap and before its CPU.
	where, heap, above, cpu := strings.Index(s, "### Where it goes: 2,000 × 1 msg/s, wss"), strings.Index(s, "Heap in use, top entries"), strings.Index(s, title), strings.Index(s, "CPU, flat")
	if where < 0 || !(where < heap && heap < above && above < cpu) {
		t.Errorf("order: where it goes %d, heap %d, above the bare client %d, CPU %d", where, heap, above, cpu)
	}

	// A report from before the bare client's heap profile renders as it did.
	old := `{"mode":"full","capacity":{"transport":"wss","runs":[{"store":"memory","sessions":2000,"rate":1,"transport":"wss","held":2000,"rss_kib_per_session":40,
		"profiles":{"heap_file":"/r/out/bench/capacity-1-wss/capacity-1-wss-heap.pb.gz","cpu_file":"","heap_top":["flat flat%","1MB 50% x"],"cpu_top":null,"cpu_cum":null,
		"memstats":{"HeapInuse":41943040},"live_heap_bytes":1048576}}],
		"compare":[{"sessions":2000,"rate":1,"transport":"wss","worker":{"held":2000,"rss_mean_mb":80},"bare":{"held":2000,"rss_mean_mb":60}}]}}`
	s = rerendered(t, []byte(old))
	if !strings.Contains(s, "Heap in use, top entries (`go tool pprof -top -sample_index=inuse_space out/bench/capacity-1-wss/capacity-1-wss-heap.pb.gz`)") {
		t.Error("the old report lost its heap excerpt")
	}
	if strings.Contains(s, "above the bare client") {
		t.Error("an old report with a block above the bare client")
	}
}
