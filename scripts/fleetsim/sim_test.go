//go:build fleetsim

package fleetsim

import (
	"encoding/json"
	"flag"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/simddb"
	"github.com/wsfleet/wsfleet/workers/streamer"
)

// make sim's settings (mk/sim.mk passes them after -args).
var (
	simScenarios   = flag.String("sim.scenario", "", "scenarios to run, comma-separated (steady, crash, az, term, az-onehost, scale-out, deploy-default, deploy-infra, scale-out-in, standby-crash, crash-throttled, and faults.go's; all: all but crash-throttled, source-limit and source-limit-paced); empty: TestSim skips")
	simSeed        = flag.Uint64("sim.seed", 1, "the seed")
	simWorkers     = flag.Int("sim.workers", 10, "workers")
	simSessions    = flag.Int("sim.sessions", 1000, "sessions")
	simSizes       = flag.String("sim.sizes", "", "sizes to run every scenario at, WORKERSxSESSIONS comma-separated, in order (100x100000,1000x1000000); empty: -sim.workers × -sim.sessions")
	simMinutes     = flag.Float64("sim.minutes", 10, "virtual minutes per scenario")
	simRate        = flag.Float64("sim.rate", 1, "messages per second per session")
	simRerun       = flag.Bool("sim.rerun", true, "run each scenario a second time with the same seed and report what differs")
	simOut         = flag.String("sim.out", "", "directory of SCALE.md and scale.json (empty: not written)")
	simCommand     = flag.String("sim.command", "make sim", "the command named in the report")
	simRender      = flag.String("sim.render", "", "write SCALE.md and scale.json to -sim.out again from this scale.json (the report's code changed, not the runs); no scenario runs")
	simWarm        = flag.Bool("sim.warm", false, "the table pre-warmed to its quota (DynamoDB's warm throughput, set by UpdateTable: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html) instead of a new on-demand table's 4,000 write / 12,000 read units a second")
	simFeed        = flag.Bool("sim.feed", false, "the sessions dial the test feed over in-memory pipes through the worker's WebSocket client (Config.Feed), not the light source")
	simFleetClaims = flag.Float64("sim.fleetclaims", 0, "the fleet's claim budget every worker runs with (WSFLEET_FLEET_CLAIMS_PER_SECOND, claims a second shared by the alive workers; docs/infra.md sizes prod's from its table); 0: none, the workers' default")
	simWatch       = flag.String("sim.watch", "", "sessions whose ownership and work-queue calls to write to stderr as they happen, comma-separated (a scale.json's faults[].slowest names the slowest; the same seed replays them at small sizes), or \"slowest\": every session's from the first fault, written for each fault's slowest once judged")
	simHeapProf    = flag.String("sim.heapprofile", "", "write a heap profile of the live heap near its peak (each time it grew by a tenth) to this file, and the goroutines' to this file + .goroutine")
)

// TestSim is `make sim`: the named scenarios at the given sizes (each
// scenario at every size, size by size), judged, measured, and written to
// docs/SCALE.md and docs/scale.json; with -v a progress line a virtual
// minute.
func TestSim(t *testing.T) {
	if *simRender != "" {
		renderReport(t, *simRender, *simOut)
		return
	}
	if *simScenarios == "" {
		t.Skip("make sim runs it (SCENARIO=, SEED=, WORKERS= and SESSIONS= or SIZES=, MINUTES=)")
	}
	d := time.Duration(*simMinutes * float64(time.Minute))
	sizes, err := sizesOf(*simSizes, *simWorkers, *simSessions)
	if err != nil {
		t.Fatal(err)
	}
	names := strings.Split(*simScenarios, ",")
	if *simScenarios == "all" {
		names = []string{"steady", "crash", "az", "term", "az-onehost", "scale-out", "deploy-default", "deploy-infra", "scale-out-in", "standby-crash"}
		names = append(names, faultNames...)
	}
	rep := Report{Command: *simCommand, Go: runtime.Version(), Bound: recoveryBound.Seconds(), TTL: streamer.DefaultConfig().LeaseTTL.Seconds(), MemoryMiB: memoryMiB(), Light: !*simFeed}
	for _, sc := range simRuns(t, names, sizes, d) {
		sc.Rate = *simRate
		if *simFeed {
			sc.Fleet = withFleet(sc.Fleet, func(c *Config) { c.Feed = true })
		}
		if *simFleetClaims > 0 {
			sc.Fleet = withWorker(sc.Fleet, func(w *streamer.Config) { w.FleetClaimsPerSecond = *simFleetClaims })
		}
		if *simWarm {
			sc.Table = prewarmed(sc.Table)
		}
		if *simWatch != "" {
			sc.Fleet = withFleet(sc.Fleet, func(c *Config) { c.Watch, c.WatchTo = strings.Split(*simWatch, ","), os.Stderr })
		}
		m := measure(t, sc, *simSeed)
		m.Size = Size{Workers: sc.Workers, Sessions: sc.Sessions}
		if *simRerun {
			m.Differs = Diff(m.Figures, measure(t, sc, *simSeed).Figures)
			if m.Differs == nil {
				m.Differs = []string{}
			}
		}
		// Safety fails the run; a recovery slower than the bound is a
		// figure of the report (its verdict column), not a failure: how
		// long a takeover of many sessions takes is what it measures.
		if f := m.Figures; f.DoubleOwners+f.Silent > 0 || f.Fenced+f.Gaps > 0 || f.SourceOverlaps > 0 {
			t.Errorf("%s: %s", sc.Name, m.Verdict)
		}
		for _, r := range m.Faults {
			if r.Recovered != r.Sessions || r.Unfenced > 0 {
				t.Errorf("%s: %s", sc.Name, m.Verdict)
			}
		}
		rep.Runs = append(rep.Runs, m)
	}
	if *simOut != "" {
		if err := rep.Write(*simOut); err != nil {
			t.Fatal(err)
		}
	}
}

// renderReport writes the report in from (a scale.json) to dir again: its
// runs as they were, what the report computes from them (goals, sizes) by
// today's code. A report written before MemoryMiB existed takes this
// machine's.
func renderReport(t *testing.T, from, dir string) {
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%s: %v", from, err)
	}
	if rep.TTL == 0 {
		rep.TTL = streamer.DefaultConfig().LeaseTTL.Seconds()
	}
	if rep.MemoryMiB == 0 {
		rep.MemoryMiB = memoryMiB()
	}
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
}

// measure runs sc once and what it cost: real and CPU time, the peak live
// heap (sampled every 50 ms outside the bubble).
func measure(t *testing.T, sc Scenario, seed uint64) Measured {
	runtime.GC()
	cpu0 := cpuTime()
	real0 := time.Now()
	sc.Progress = progressLog(t)
	stop := make(chan struct{})
	var peak, stacks, profiled uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if *simHeapProf != "" && ms.HeapInuse > profiled+profiled/10 {
				writeHeapProfile(t, *simHeapProf)
				profiled = ms.HeapInuse
			}
			peak = max(peak, ms.HeapInuse)
			stacks = max(stacks, ms.StackInuse)
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	})
	f := runT(t, sc, seed, nil)
	close(stop)
	wg.Wait()
	m := Measured{Figures: f, Verdict: f.Verdict(recoveryBound), Real: time.Since(real0).Seconds(), CPU: (cpuTime() - cpu0).Seconds(), HeapPeak: float64(peak) / (1 << 20), StackPeak: float64(stacks) / (1 << 20)}
	if f.Virtual > 0 {
		m.CPUPerHour = m.CPU / (f.Virtual / 3600)
	}
	return m
}

// writeHeapProfile writes the live heap's profile to path (the last GC's
// view; -sim.heapprofile: where the simulator's memory goes).
func writeHeapProfile(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Errorf("heap profile: %v", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Errorf("heap profile: %v", err)
	}
	g, err := os.Create(path + ".goroutine")
	if err != nil {
		t.Errorf("goroutine profile: %v", err)
		return
	}
	defer g.Close()
	if err := pprof.Lookup("goroutine").WriteTo(g, 0); err != nil {
		t.Errorf("goroutine profile: %v", err)
	}
}

// memoryMiB is the machine's memory (0 when unknown).
func memoryMiB() float64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return float64(si.Totalram) * float64(si.Unit) / (1 << 20)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// prewarmed is table (nil: simddb.AWS() unchanged) with the warm throughput
// raised to the table's quota: a table pre-warmed for the fleet's peak
// (or one that has served it before), not a new on-demand table.
func prewarmed(table func(*simddb.Config)) func(*simddb.Config) {
	return func(c *simddb.Config) {
		if table != nil {
			table(c)
		}
		c.Throughput.WarmWCU = max(c.Throughput.WarmWCU, c.Throughput.QuotaWCU)
		c.Throughput.WarmRCU = max(c.Throughput.WarmRCU, c.Throughput.QuotaRCU)
	}
}
