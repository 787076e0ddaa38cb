//go:build fleetsim

package fleetsim

import (
	"cmp"
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer"
)

// The short set's size: small enough for `make test` under -race on two
// loaded cores, big enough for every worker to hold sessions.
const (
	shortWorkers  = 10
	shortSessions = 60
	shortFor      = 3 * time.Minute
)

// recoveryBound is how soon every session a fault hit must deliver again:
// the liveness TTL (a dead worker is declared dead once its heartbeat stood
// still that long) plus 5 s (the takeover's claims and dials, a reconcile
// pass after a graceful release, index lag).
var recoveryBound = streamer.DefaultConfig().LeaseTTL + 5*time.Second

func runT(t *testing.T, sc Scenario, seed uint64, after func(*Fleet) error) Figures {
	t.Helper()
	var fig Figures
	real0 := time.Now()
	synctest.Test(t, func(t *testing.T) {
		var err error
		if fig, err = run(sc, seed, after); err != nil {
			t.Fatal(err)
		}
	})
	b, _ := json.Marshal(fig)
	t.Logf("%s seed %d: %s virtual in %s real: %s", sc.Name, seed, sc.Duration, time.Since(real0).Round(time.Millisecond), b)
	return fig
}

// checkSafe fails t on any violation the judge found: two owners
// delivering at once, a fenced delivery, loss, a session that never
// delivered, two connections of a session open at once at the source, a
// faulted session not delivering again within recoveryBound.
func checkSafe(t *testing.T, f Figures) {
	t.Helper()
	checkSafeWithin(t, f, recoveryBound)
}

// checkSafeWithin is checkSafe with another recovery bound.
func checkSafeWithin(t *testing.T, f Figures, recoveryBound time.Duration) {
	t.Helper()
	if f.DoubleOwners != 0 || f.Fenced != 0 {
		t.Errorf("%s: %d sessions with two owners delivering at once (%d pairs, %d deliveries), %d fenced deliveries",
			f.Scenario, f.DoubleOwners, f.DoublePairs, f.Overlapping, f.Fenced)
	}
	if f.Gaps != 0 || f.Silent != 0 {
		t.Errorf("%s: %d seqs lost, %d sessions never delivered", f.Scenario, f.Gaps, f.Silent)
	}
	if f.SourceOverlaps != 0 {
		t.Errorf("%s: the source saw two connections of a session open at once %d times", f.Scenario, f.SourceOverlaps)
	}
	if f.Deliveries == 0 {
		t.Errorf("%s: nothing delivered", f.Scenario)
	}
	for _, r := range f.Faults {
		if len(r.Unrecovered) > 0 || r.Recovered != r.Sessions {
			t.Errorf("%s: %s of %v at %.0fs: %d of %d sessions delivered again (not: %v)", f.Scenario, r.Kind, r.Workers, r.At, r.Recovered, r.Sessions, r.Unrecovered)
		}
		if r.Unfenced > 0 {
			t.Errorf("%s: %s: %d deliveries after every lease was untrusted", f.Scenario, r.Kind, r.Unfenced)
		}
		if r.Max > cmp.Or(r.Bound, recoveryBound.Seconds()) {
			t.Errorf("%s: %s of %v: a session delivered again only %.1fs after (p50 %.1fs, p99 %.1fs), bound %s",
				f.Scenario, r.Kind, r.Workers, r.Max, r.P50, r.P99, recoveryBound)
		}
		if r.Sessions == 0 {
			t.Errorf("%s: %s of %v hit no session: the scenario tests nothing", f.Scenario, r.Kind, r.Workers)
		}
	}
}

// TestShortSet runs the short scenarios (10 workers, 60 sessions, three
// virtual minutes each; a fault a third in) and checks the behaviour: no
// double owner, no loss, every session a fault hit delivering again within
// the TTL and 5 s. Deterministic in virtual time: the bounds do not depend
// on the machine's speed.
func TestShortSet(t *testing.T) {
	all := Scenarios(shortWorkers, shortSessions, shortFor)
	for _, name := range []string{"steady", "crash", "az", "term"} {
		t.Run(name, func(t *testing.T) {
			f := runT(t, all[name], 1, nil)
			checkSafe(t, f)
			if name == "steady" && f.LongestSilence > 5 {
				t.Errorf("steady: a session was silent %.1fs", f.LongestSilence)
			}
		})
	}
}

// TestMutationCatchesDoubleOwner breaks fencing on purpose (a thief worker
// whose acquire ignores the owner and whose discovery lists held sessions as
// unowned, AddThief) and checks that the judge sees it: the simulator's
// safety verdict is not vacuous.
func TestMutationCatchesDoubleOwner(t *testing.T) {
	sc := Scenarios(4, 40, 2*time.Minute)["steady"]
	sc.Name = "mutation"
	f := runT(t, sc, 1, func(fl *Fleet) error {
		time.Sleep(30 * time.Second) // the others own every session by then
		_, err := fl.AddThief(5)
		return err
	})
	if f.DoubleOwners == 0 || f.Overlapping == 0 {
		t.Fatalf("fencing broken, yet the judge found no double owner: %+v", f)
	}
	if f.Fenced == 0 {
		t.Errorf("the old owners' deliveries after the thief's were not counted as fenced: %+v", f)
	}
	t.Logf("broken fencing: %d sessions with two owners at once (%d pairs, %d deliveries inside another tenure's span), %d fenced",
		f.DoubleOwners, f.DoublePairs, f.Overlapping, f.Fenced)
}

// TestSameSeedSameVerdicts runs one scenario twice with one seed. The
// verdicts must agree; the figures that differ are logged: the seed fixes
// the table's draws, the skews, the workers' start gaps and the workers' own
// draws (Deps.Rand from the seed and the worker's id), not the order of
// goroutines runnable at one virtual instant. Diff names them.
func TestSameSeedSameVerdicts(t *testing.T) {
	sc := Scenarios(6, 40, 2*time.Minute)["crash"]
	a, b := runT(t, sc, 42, nil), runT(t, sc, 42, nil)
	checkSafe(t, a)
	checkSafe(t, b)
	if va, vb := a.Verdict(recoveryBound), b.Verdict(recoveryBound); va != vb {
		t.Errorf("same seed, different verdicts: %q vs %q", va, vb)
	}
	t.Logf("figures that differ between two runs of seed 42: %v", Diff(a, b))
}

// TestSameSeedSameFigures runs the crash and term scenarios twice with one
// seed and requires the same figures: the workers' own draws come from the
// seed (Deps.Rand), a drain hands off by id, peaks break ties by key, each
// worker draws its queue calls' latency from its own stream. The order of
// goroutines runnable at one virtual instant is not fixed by the seed: two
// claims a takeover hands to one receiver at once may swap places in its
// claim pace, which moves a time of delivering again by a call's latency;
// those times are compared within 50 ms (DiffBeyond), every other figure
// exactly (make sim's reruns list what a second run changed in
// docs/SCALE.md).
func TestSameSeedSameFigures(t *testing.T) {
	for _, name := range []string{"crash", "term"} {
		t.Run(name, func(t *testing.T) {
			sc := Scenarios(6, 40, 2*time.Minute)[name]
			a, b := runT(t, sc, 42, nil), runT(t, sc, 42, nil)
			if d := DiffBeyond(a, b, 0.05); len(d) > 0 {
				t.Errorf("two runs of seed 42 differ in %v", d)
			}
		})
	}
}
