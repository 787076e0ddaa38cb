//go:build fleetsim

package fleetsim

import (
	"fmt"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/rebalance"
)

// handoffDark bounds the dark time of a directed hand-off in the
// simulator: well under a second (the graceful hand-off goal is 250 ms at
// p99; a session left to the others' reconciliation is dark for seconds).
const handoffDark = time.Second

// TestTermHandsSessionsToReceivers SIGTERMs the busiest worker of the short
// fleet: its drain hands every session to a receiver (rebalance.Drain, a
// POST /handoff to the receiver's admin server over the fleet's mesh), so
// every one delivers again well under a second after the SIGTERM, with no
// double owner and nothing lost.
func TestTermHandsSessionsToReceivers(t *testing.T) {
	sc := Scenarios(shortWorkers, shortSessions, shortFor)["term"]
	var calls int64
	term := sc.Faults[0]
	sc.Faults[0].Do = func(fl *Fleet) error {
		before := fl.HandoffCalls()
		err := term.Do(fl) // returns once the drain is done
		calls = fl.HandoffCalls() - before
		return err
	}
	f := runT(t, sc, 1, nil)
	checkSafe(t, f)
	for _, r := range f.Faults {
		if r.Kind != "term" {
			continue
		}
		if calls < int64(r.Sessions) {
			t.Errorf("term of %v: %d hand-off requests for its %d sessions: want one per session (a directed hand-off each)", r.Workers, calls, r.Sessions)
		}
		if r.P99 >= handoffDark.Seconds() || r.Max >= handoffDark.Seconds() {
			t.Errorf("term of %v: %d sessions dark p50 %.3fs, p99 %.3fs, max %.3fs after the SIGTERM: want under %s (directed hand-offs)",
				r.Workers, r.Sessions, r.P50, r.P99, r.Max, handoffDark)
		}
		t.Logf("term of %v: %d sessions, %d hand-off requests, dark p50 %.3fs p99 %.3fs max %.3fs", r.Workers, r.Sessions, calls, r.P50, r.P99, r.Max)
	}
}

// TestScaleOutRebalances doubles a full fleet a third into the run: by its
// end no worker holds more than its fair share and the rebalancing
// tolerance (shared/rebalance's defaults: what a round guarantees) and
// every new worker holds at least half its share, moved there by
// rebalancing rounds (directed hand-offs over the admin servers), with no
// double owner, nothing lost, and no session dark for long while it moved.
func TestScaleOutRebalances(t *testing.T) {
	const workers, sessions = 10, 200
	sc := Scenarios(workers, sessions, shortFor)["scale-out"]
	load := map[string]int{}
	sc.Faults = append(sc.Faults, Step{At: sc.Duration - time.Second, Do: func(fl *Fleet) error {
		for _, m := range fl.Running() {
			load[m.ID] = len(fl.ownedBy([]*Member{m}))
		}
		return nil
	}})
	f := runT(t, sc, 1, nil)
	checkSafe(t, f)
	if len(load) != 2*workers {
		t.Fatalf("%d workers running at the end, want %d", len(load), 2*workers)
	}
	share := float64(sessions) / float64(2*workers)
	slack := max(0.10*share, 2) // rebalance.Settings' defaults
	held := 0
	for id, n := range load {
		held += n
		if float64(n) > share+slack {
			t.Errorf("%s holds %d sessions at the end: fair share %.0f + %.0f at most", id, n, share, slack)
		}
		if id >= fmt.Sprintf("w-%03d", workers) && float64(n) < share/2 {
			t.Errorf("%s (added) holds %d sessions at the end: want at least half its fair share %.0f", id, n, share)
		}
	}
	if held != sessions {
		t.Errorf("the table says %d of %d sessions are owned at the end", held, sessions)
	}
	if moves := f.Tenures - sessions; moves < rebalanceMovesAtLeast(workers, sessions) {
		t.Errorf("%d tenures for %d sessions: %d moves, want at least %d", f.Tenures, sessions, moves, rebalanceMovesAtLeast(workers, sessions))
	}
	// A move's dark time adds to the gap between two messages (1 s at
	// rate 1): a session found by reconciliation instead would be dark for
	// seconds.
	if f.LongestSilence >= 1/f.Rate+handoffDark.Seconds() {
		t.Errorf("a session was silent %.2fs while the fleet rebalanced: want under %.1fs", f.LongestSilence, 1/f.Rate+handoffDark.Seconds())
	}
	t.Logf("load at the end %v; %d moves; longest silence %.2fs", load, f.Tenures-sessions, f.LongestSilence)
}

// rebalanceMovesAtLeast is the fewest moves that bring a fleet of n full
// workers holding sessions evenly, doubled, within tolerance.
func rebalanceMovesAtLeast(n, sessions int) int {
	ws := make([]rebalance.Worker, 2*n)
	for i := range ws {
		ws[i] = rebalance.Worker{ID: fmt.Sprint(i), Capacity: 1000}
		if i < n {
			ws[i].Load = sessions / n
		}
	}
	toTolerance, _ := rebalance.MinMoves(ws, rebalance.Settings{})
	return toTolerance
}
