package bench

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

// TestRebalanceTwoJoinSixHundredPerWorker is issue 14's integration run on
// the local engines and the real worker processes: 2 workers × 600
// sessions, then 2 more join, started together as a scale-out's tasks
// are (started one after the other on a loaded machine, the first was
// given sessions toward a 3-worker share for a few rounds and sent ~56 of
// them on to the second: 660 moves for 540, one run in three). A move is
// an ownership change, told by the tenure header. Within 2 minutes every worker is within
// ±10 % of its share; across the moves nothing is lost or duplicated (the
// chaos harness's checks over the feed's records and the sink lines); no
// session moves twice within the minimum hold; the moves made stay within
// 1.2 × the minimum; and every move went straight to its receiver (no
// source dark for the reservation bound, 5 s). The gap's p50 / p99 are the
// benchmark's figures (make bench-full, the rebalance phase), not a timed
// assertion on a shared machine. The rounds run every 2 s with a 10 s
// minimum hold (the defaults are 10 s and 60 s) so that the run takes about
// a minute.
func TestRebalanceTwoJoinSixHundredPerWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("1,200 sessions on 4 worker processes")
	}
	root, err := enginetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bins, err := devstack.BuildBinaries(root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{
		cfg: Config{Mode: Quick, Root: root, WorkDir: t.TempDir(), Bin: Binaries{Streamer: bins.Streamer, Ingest: bins.Ingest, Feed: bins.Feed}},
		sz: Sizes{RebalanceSessions: 1200, RebalanceFeedRate: 1, RebalanceObserve: 10 * time.Second, RebalanceTimeout: 2 * time.Minute,
			RebalanceMinHold: 10 * time.Second, RebalanceEvery: 2 * time.Second},
		rep: &Report{},
		log: zerolog.Nop(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if err := r.rebalance(ctx); err != nil {
		t.Fatal(err)
	}
	rb := r.rep.Rebalance
	t.Logf("balanced after %.0f ms; loads %v → %v; %d moves (minimum %d; %d sent on by a joiner), %d redials; joiners ready after %v ms; gap p50 %.0f ms p99 %.0f ms max %.0f ms",
		rb.ToBalancedMs, rb.LoadsAtJoin, rb.LoadsAtEnd, rb.Moves, rb.MinMoves, rb.MovesFromJoiners, rb.Redials, rb.JoinersReadyMs, rb.Gap.P50, rb.Gap.P99, rb.Gap.Max)
	if rb.ToBalancedMs < 0 {
		t.Errorf("not every worker within ±10 %% of its share 2 minutes after the join: loads %v", rb.LoadsAtEnd)
	}
	if rb.Lost != 0 || rb.Gaps != 0 || rb.Duplicated != 0 || len(rb.Violations) > 0 {
		t.Errorf("%d lost, %d skipped, %d duplicated; violations %v", rb.Lost, rb.Gaps, rb.Duplicated, rb.Violations)
	}
	if rb.MovedTwiceWithinHold != 0 {
		t.Errorf("%d session(s) moved twice within the minimum hold", rb.MovedTwiceWithinHold)
	}
	if rb.MinMoves == 0 || rb.Ratio > 1.2 {
		t.Errorf("%d moves against a minimum of %d (ratio %.2f, want ≤ 1.2)", rb.Moves, rb.MinMoves, rb.Ratio)
	}
	if rb.Gap.N == 0 || rb.Gap.Max >= 5000 {
		t.Errorf("gaps %+v: a move waited for its reservation to lapse (not handed straight to its receiver)", rb.Gap)
	}
}
