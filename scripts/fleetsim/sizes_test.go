//go:build fleetsim

package fleetsim

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sizesOf are the sizes TestSim runs at: -sim.sizes when set (an error
// naming the flag when it does not parse), else workers × sessions
// (-sim.workers, -sim.sessions).
func sizesOf(sizes string, workers, sessions int) ([]Size, error) {
	if strings.TrimSpace(sizes) == "" {
		return []Size{{Workers: workers, Sessions: sessions}}, nil
	}
	out, err := ParseSizes(sizes)
	if err != nil {
		return nil, fmt.Errorf("-sim.sizes (make sim SIZES=) %q: %w", sizes, err)
	}
	return out, nil
}

// simRuns are the scenarios named at every size, size by size, in the
// order given; t fails at once on a name no scenario has.
func simRuns(t *testing.T, names []string, sizes []Size, d time.Duration) []Scenario {
	t.Helper()
	var out []Scenario
	for _, size := range sizes {
		all := Scenarios(size.Workers, size.Sessions, d)
		for _, name := range names {
			sc, ok := all[strings.TrimSpace(name)]
			if !ok {
				t.Fatalf("no scenario %q", name)
			}
			out = append(out, sc)
		}
	}
	return out
}

// progressLog logs a running scenario's Progress on t, with the real time
// since progressLog was called (go test -v streams the lines as they
// come).
func progressLog(t *testing.T) func(Progress) {
	real0 := wallClock()
	return func(p Progress) {
		t.Logf("progress: %s; %s real", p, (wallClock() - real0).Round(time.Second))
	}
}

// wallClock is the real time (inside a synctest bubble time.Now is the
// bubble's).
func wallClock() time.Duration {
	var tv syscall.Timeval
	if err := syscall.Gettimeofday(&tv); err != nil {
		return 0
	}
	return time.Duration(tv.Nano())
}

// -sim.sizes (make sim SIZES=): sizes in their order; bad input is an error
// naming the flag; empty is -sim.workers × -sim.sessions.
func TestSizesFlag(t *testing.T) {
	got, err := sizesOf("100x10000, 1000X100000", 10, 1000)
	if want := []Size{{100, 10000}, {1000, 100000}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("sizes %v (%v), want %v", got, err, want)
	}
	if got, err := sizesOf("", 10, 1000); err != nil || !slices.Equal(got, []Size{{10, 1000}}) {
		t.Errorf("no -sim.sizes: %v (%v), want the workers × sessions flags' 10 × 1000", got, err)
	}
	for _, bad := range []string{"100x", "x10", "0x10", "10x0", "-1x10", "100", "10x10,", "10x10,5", "axb", "10x10x10", "1.5x10"} {
		if got, err := sizesOf(bad, 10, 1000); err == nil || !strings.Contains(err.Error(), "-sim.sizes") {
			t.Errorf("-sim.sizes=%s: %v (%v), want an error naming the flag", bad, got, err)
		}
	}
}

// The progress lines (Scenario.Progress, a virtual minute each) read and
// change nothing: a run of a seed with them has the figures of one without.
func TestSameSeedSameFiguresWithProgress(t *testing.T) {
	sc := Scenarios(6, 40, 2*time.Minute)["crash"]
	a := runT(t, sc, 42, nil)
	var lines []Progress
	sc.Progress = func(p Progress) { lines = append(lines, p) }
	b := runT(t, sc, 42, nil)
	if d := DiffBeyond(a, b, 0.05); len(d) > 0 {
		t.Errorf("the run with progress lines differs in %v", d)
	}
	if len(lines) == 0 {
		t.Fatal("no progress line in two virtual minutes")
	}
	if p := lines[0]; p.Virtual != time.Minute || p.Started != 40 || p.Delivering == 0 || p.Delivering > p.Started || p.WriteUnits <= 0 || p.ReadUnits <= 0 || p.Size != (Size{6, 40}) {
		t.Errorf("first progress line %+v (%s)", p, p)
	}
	t.Logf("progress: %v", lines)
}

// The read units split by what they read (readSplit) sum to the workers'
// read units, and both parts are there in a run.
func TestReadSplitSumsToReadUnits(t *testing.T) {
	f := runT(t, Scenarios(4, 40, 2*time.Minute)["steady"], 1, nil)
	tb := f.Table
	if tb.WorkerReadUnits <= 0 || tb.SessionReadUnits <= 0 || math.Abs(tb.WorkerReadUnits+tb.SessionReadUnits-tb.ReadUnits) > 1e-6*tb.ReadUnits {
		t.Errorf("read units %g, split worker records %g + sessions %g", tb.ReadUnits, tb.WorkerReadUnits, tb.SessionReadUnits)
	}
}
