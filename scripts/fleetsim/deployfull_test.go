//go:build fleetsim

package fleetsim

import (
	"testing"
	"time"
)

// A rolling deploy of workers holding 1,000 sessions each (4 workers ×
// 4,000 sessions at 0.1 msg/s, the infra's rolling settings for prod: at
// 129 % one task a wave, four waves): every old task hands its sessions to
// the new task of its wave within a third of its shutdown deadline. With
// the receivers' /handoff rate at 100/s (HandoffMinRate alone) and every
// old task draining at once (ECS's 200 %, the infra's batch before) the
// hand-offs beyond it were answered 429 and went the slow way (the work
// queue, the claim pace): the exact dark time was 8.8 s p99 (12.8 s max).
// With the rate sized to two drainers (handoffDrainRate) the p99 is within
// the graceful hand-off goal (250 ms). The run lasts 6 virtual minutes:
// the four waves end about 4 minutes in, and a session at 0.1 msg/s
// delivers again up to 10 s after its hand-off. A session's SIGTERM →
// delivering again is bounded by its turn in the drain (the worker hands
// off whatever is left at half its deadline) and a message: it streams on
// the old task meanwhile; the dark time is the exact one, checked below.
func TestDeployOfFullWorkersHandsOffWithinTheGoal(t *testing.T) {
	sc := Scenarios(4, 4000, 6*time.Minute)["deploy-infra"]
	sc.Rate = 0.1
	sc.Table = prewarmed(sc.Table)
	f := runT(t, sc, 1, nil)
	checkSafeWithin(t, f, InfraRolling.ShutdownDeadline/2+10*time.Second)
	var deploy *ECSOp
	for i := range f.ECS {
		if f.ECS[i].Op == "deploy" {
			deploy = &f.ECS[i]
		}
	}
	if deploy == nil || deploy.Dark.N == 0 {
		t.Fatalf("no deploy with hand-offs measured: %+v", f.ECS)
	}
	if p99 := deploy.Dark.P99; p99 > 0.250 {
		t.Fatalf("deploy of workers holding 1,000 sessions each: exact dark p99 %.3f s over %d hand-offs, goal 0.250 s", p99, deploy.Dark.N)
	}
	t.Logf("deploy: %d hand-offs, dark p50 %.3f / p99 %.3f / max %.3f s", deploy.Dark.N, deploy.Dark.P50, deploy.Dark.P99, deploy.Dark.Max)
}
