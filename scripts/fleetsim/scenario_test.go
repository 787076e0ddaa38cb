//go:build fleetsim

package fleetsim

import (
	"slices"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer"
)

// Workers are sized so the fleet runs at most 65 % full (the infra's
// scaling target, schema.ScalingTargetPercent): the default
// WSFLEET_MAX_SESSIONS where it does, more where it would not (100 ×
// 100,000: 1,000 a worker at a 1,000 limit). There the workers outside
// the AZ that holds the most of them (⌈workers ÷ 3⌉, as KillAZ counts)
// hold every session: an AZ's loss waits for no replacement.
func TestScenariosLeaveHeadroom(t *testing.T) {
	for _, c := range []struct{ workers, sessions, want int }{
		{10, 1000, 0}, {100, 65_000, 0}, {100, 100_000, 1539}, {1000, 1_000_000, 1539}, {1, 20_000, 30770},
	} {
		sc := Scenarios(c.workers, c.sessions, time.Minute)["az"]
		if sc.MaxSessions != c.want {
			t.Errorf("%d × %d: WSFLEET_MAX_SESSIONS %d, want %d", c.workers, c.sessions, sc.MaxSessions, c.want)
		}
		if c.workers < 100 {
			continue
		}
		limit := sc.MaxSessions
		if limit == 0 {
			limit = streamer.DefaultConfig().MaxSessions
		}
		// The workers as ECS places them (ecs.go), one at a time.
		azs := DefaultECS().AZs
		tasks, down := make([]int, azs), make([]bool, azs)
		for range c.workers {
			tasks[leastLoadedAZ(tasks, down)]++
		}
		if left := c.workers - slices.Max(tasks); left*limit < c.sessions {
			t.Errorf("%d × %d: the %d workers outside the busiest AZ hold %d, fewer than the sessions", c.workers, c.sessions, left, left*limit)
		}
	}
}

// A scenario's faults come after its sessions started and delivered: at a
// third of the run, or at 1.5 × the ramp when startsPerSecond stretches
// the ramp past it (1,000,000 sessions: 250 s, in 10 virtual minutes).
func TestFaultsFollowTheRamp(t *testing.T) {
	for _, c := range []struct {
		workers, sessions int
		d, want           time.Duration
	}{
		{10, 1000, 10 * time.Minute, 200 * time.Second},
		{100, 100_000, 10 * time.Minute, 200 * time.Second},
		{1000, 1_000_000, 10 * time.Minute, 375 * time.Second},
	} {
		for name, sc := range Scenarios(c.workers, c.sessions, c.d) {
			if len(sc.Faults) == 0 || name == "crash-throttled" || name == "crash-big" {
				continue // no fault; one 20 s after the ramp; one after the others' start
			}
			if at := sc.Faults[0].At; at != c.want || at < sc.Ramp+sc.Ramp/2 {
				t.Errorf("%d × %d, %s: first fault at %v (ramp %v), want %v", c.workers, c.sessions, name, at, sc.Ramp, c.want)
			}
		}
	}
}
