//go:build fleetsim

package fleetsim

import (
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer"
)

// crash-throttled (the table's writes held at a tenth of a unit per
// session: 30 units/s for 300 sessions, of which the heartbeats take 6 and
// the checkpoints 5) with and without a fleet claim budget
// (WSFLEET_FLEET_CLAIMS_PER_SECOND). Without it every worker claims at its
// own 50/s: the table throttles the claims, the first checkpoints and the
// heartbeats with them. With a budget of 2 claims/s (about 14 units/s at
// ~7 units a claim: what the headroom leaves) at most a twentieth of the
// calls and a tenth of the heartbeats are throttled (0 or 1 heartbeat in the runs seen
// while a worker took the whole budget as its share before its first
// listing; it now claims at the pacer's floor until then),
// no seq is lost, and every session, the dead worker's among them,
// delivers, later: a claim waits its share of the budget (first
// deliveries p99 ~150 s here, what 300 claims at 2/s take, against 1 s
// without the budget).
func TestFleetClaimBudgetLeavesHeartbeatsTheirShare(t *testing.T) {
	const workers, sessions = 6, 300
	base := Scenarios(workers, sessions, 12*time.Minute)["crash-throttled"]
	before := runT(t, base, 1, nil)
	if before.Table.HeartbeatsThrottled == 0 {
		t.Fatalf("without a fleet budget no heartbeat was throttled: the scenario does not show what the budget is for: %+v", before.Table)
	}
	paced := base
	paced.Fleet = func(c *Config) { c.Worker = func(w *streamer.Config) { w.FleetClaimsPerSecond = 2 } }
	after := runT(t, paced, 1, nil)
	checkSafeWithin(t, after, 5*time.Minute)
	if after.Table.HeartbeatsThrottled*10 > before.Table.HeartbeatsThrottled {
		t.Errorf("with the fleet budget %d heartbeats were throttled, without %d: want at most a tenth", after.Table.HeartbeatsThrottled, before.Table.HeartbeatsThrottled)
	}
	var b, a int64
	for _, n := range before.Table.Throttled {
		b += n
	}
	for _, n := range after.Table.Throttled {
		a += n
	}
	if a*20 > b {
		t.Errorf("with the fleet budget %d calls throttled, without %d: want at most a twentieth", a, b)
	}
	t.Logf("without a budget: %d calls throttled, %d heartbeats, %d seqs lost, first deliveries p99 %.1f s; with 2 claims/s: %d, %d, %d, %.1f s; the dead worker's sessions again max %.1f s",
		b, before.Table.HeartbeatsThrottled, before.Gaps, before.FirstDelivery.P99, a, after.Table.HeartbeatsThrottled, after.Gaps, after.FirstDelivery.P99, faultOf(t, after, "kill").Max)
}
