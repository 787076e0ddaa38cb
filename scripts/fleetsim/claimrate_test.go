//go:build fleetsim

package fleetsim

import (
	"strings"
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

// Claims by path count from the window holding from on.
func TestClaimPathsFrom(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := claimCounter{t0: t0}
	c.addPath(t0.Add(3*time.Second), "queue", "acquired")
	c.addPath(t0.Add(25*time.Second), "queue", "acquired")
	c.addPath(t0.Add(26*time.Second), "reconcile", "held_elsewhere")
	c.addPath(t0.Add(41*time.Second), "reconcile", "held_elsewhere")
	if got := c.pathsFrom(0); got["queue acquired"] != 2 || got["reconcile held_elsewhere"] != 2 {
		t.Fatalf("whole run %v", got)
	}
	got := c.pathsFrom(22)
	if len(got) != 2 || got["queue acquired"] != 1 || got["reconcile held_elsewhere"] != 2 {
		t.Fatalf("from 22 s (the window from 20 s on) %v: want 1 queue acquired, 2 reconcile held_elsewhere", got)
	}
	if line := pathsLine(got); line != "`reconcile` 2 held elsewhere; `queue` 1 acquired" {
		t.Fatalf("line %q", line)
	}
}

// The budget's claims per window from a fault on: given tenures left out,
// the acquired ones counted apart, empty windows between kept, the ones
// after the last claim dropped.
func TestClaimWindowsFrom(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := claimCounter{t0: t0}
	c.addPath(t0.Add(5*time.Second), "queue", "acquired") // before the fault's window
	c.addPath(t0.Add(21*time.Second), "takeover", "acquired")
	c.addPath(t0.Add(22*time.Second), "reconcile", "held_elsewhere")
	c.addPath(t0.Add(23*time.Second), "given", "acquired")
	c.addPath(t0.Add(45*time.Second), "queue", "acquired")
	got := c.windowsFrom(22)
	want := []ClaimSpan{{At: 20, Claims: 2, Acquired: 1}, {At: 30}, {At: 40, Claims: 1, Acquired: 1}}
	if len(got) != len(want) {
		t.Fatalf("windows %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("windows %+v, want %+v", got, want)
		}
	}
	if line := windowsLine([]ClaimSpan{{At: 120, Claims: 100, Acquired: 50}, {At: 130, Claims: 30, Acquired: 30}}); line != "+0 s 10 / 5, +10 s 3 / 3" {
		t.Fatalf("line %q", line)
	}
	if len(c.windowsFrom(60)) != 0 {
		t.Fatalf("windows after the last claim: %+v", c.windowsFrom(60))
	}
}

// A crash's sessions come back by the paths a takeover sends them: its
// parts told to the receivers and its own part, counted from the crash on.
func TestClaimPathsOfACrash(t *testing.T) {
	f := runT(t, Scenarios(6, 60, 2*time.Minute)["crash"], 1, nil)
	if len(f.Faults) != 1 || f.Claims.From != f.Faults[0].At {
		t.Fatalf("claims by path from %.1f s, faults %+v: want from the crash", f.Claims.From, f.Faults)
	}
	acquired := int64(0)
	for k, n := range f.Claims.Paths {
		if strings.HasSuffix(k, " acquired") {
			acquired += n
		}
	}
	if f.Claims.Paths["takeover acquired"] == 0 || acquired < int64(f.Faults[0].Sessions) {
		t.Fatalf("claims by path %v after a crash of %d sessions: want the takeover's parts taken, and at least every session acquired", f.Claims.Paths, f.Faults[0].Sessions)
	}
}
