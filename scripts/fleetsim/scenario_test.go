//go:build fleetsim

package fleetsim

import (
	"testing"
	"time"
)

// Workers are sized so the fleet runs at most 70 % full (the infra's
// scaling target): the default WSFLEET_MAX_SESSIONS where it does, more
// where it would not (100 × 100,000: 1,000 a worker at a 1,000 limit).
func TestScenariosLeaveHeadroom(t *testing.T) {
	for _, c := range []struct{ workers, sessions, want int }{
		{10, 1000, 0}, {100, 70_000, 0}, {100, 100_000, 1429}, {1000, 1_000_000, 1429}, {1, 20_000, 28572},
	} {
		sc := Scenarios(c.workers, c.sessions, time.Minute)["az"]
		if sc.MaxSessions != c.want {
			t.Errorf("%d × %d: WSFLEET_MAX_SESSIONS %d, want %d", c.workers, c.sessions, sc.MaxSessions, c.want)
		}
	}
}
