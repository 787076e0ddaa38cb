//go:build fleetsim

package fleetsim

import (
	"testing"
	"time"
)

// The claim rate's busiest window is the one with the most claims, per
// second, and the earliest of equals.
func TestClaimRateBusiestWindow(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := claimCounter{t0: t0}
	for i := range 30 {
		c.add(t0.Add(time.Duration(i) * 300 * time.Millisecond)) // 30 in [0, 9 s]
	}
	for i := range 50 {
		c.add(t0.Add(20*time.Second + time.Duration(i)*100*time.Millisecond)) // 50 in [20, 25 s)
	}
	c.add(t0.Add(45 * time.Second))
	got := c.figures(4)
	if got.Total != 81 || got.Busiest != 5 || got.At != 20 || got.Budget != 4 {
		t.Fatalf("figures %+v: want 81 claims, busiest 5/s at 20 s, budget 4", got)
	}
}
