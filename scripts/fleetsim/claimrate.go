//go:build fleetsim

package fleetsim

import (
	"strings"
	"sync"
	"time"
)

// ClaimRate is the fleet's claims over the run: the acquires the workers
// sent (refused ones included) other than a directed hand-off's given
// tenure, which its sender paces and no claim budget counts. Busiest is
// the largest over any ClaimWindow-aligned window, per second, against
// Budget (the workers' WSFLEET_FLEET_CLAIMS_PER_SECOND; 0: none): how far
// the fleet's claims went above the budget (each worker's share follows
// its own listing of the alive workers, which lags the fleet: the
// survivors of a lost AZ count themselves fewer while the replacements do
// not yet count each other).
type ClaimRate struct {
	Total   int64   `json:"total"`
	Busiest float64 `json:"busiest_per_second"`
	At      float64 `json:"busiest_at"` // the window's start, seconds from the fleet's start
	Budget  float64 `json:"budget,omitempty"`
	// Paths are the workers' claims from the first fault on (the whole
	// run without one), by the path that sent them and their outcome
	// ("queue acquired", "reconcile held_elsewhere", …: the worker's
	// claim admission, workers/streamer claimpath.go), given tenures
	// included: where the claim budget went. From (seconds from the
	// fleet's start) is where they are counted from.
	Paths map[string]int64 `json:"paths,omitempty"`
	From  float64          `json:"paths_from"`
	// Windows are the claims the budget counts (every path but given)
	// per ClaimWindow from From on, to the last window with one (at most
	// maxClaimWindows): whether the recovery's tail still spent the
	// budget.
	Windows []ClaimSpan `json:"windows,omitempty"`
}

// ClaimSpan is one ClaimWindow's claims: At its start (seconds from the
// fleet's start), Claims the claims the budget counts that ended in it,
// Acquired those that took their session.
type ClaimSpan struct {
	At       float64 `json:"at"`
	Claims   int64   `json:"claims"`
	Acquired int64   `json:"acquired"`
}

// maxClaimWindows bounds ClaimRate.Windows (10 virtual minutes).
const maxClaimWindows = 60

// ClaimWindow is the window ClaimRate.Busiest is taken over.
const ClaimWindow = 10 * time.Second

// claimCounter counts claims in ClaimWindow-aligned windows.
type claimCounter struct {
	mu    sync.Mutex
	t0    time.Time
	win   map[int64]int64
	paths map[int64]map[string]int64 // by window, "path outcome"
}

// addPath counts a worker's claim by its path and outcome as it ends
// (streamer's SimOnClaim).
func (c *claimCounter) addPath(now time.Time, path, outcome string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paths == nil {
		c.paths = map[int64]map[string]int64{}
	}
	w := int64(now.Sub(c.t0) / ClaimWindow)
	if c.paths[w] == nil {
		c.paths[w] = map[string]int64{}
	}
	c.paths[w][path+" "+outcome]++
}

// pathsFrom are the claims by path and outcome of the windows from
// from (seconds from t0) on.
func (c *claimCounter) pathsFrom(from float64) map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int64{}
	for w, m := range c.paths {
		if float64(w+1)*ClaimWindow.Seconds() <= from {
			continue
		}
		for k, n := range m {
			out[k] += n
		}
	}
	return out
}

// windowsFrom are the budget's claims per window from from (seconds from
// t0) on, to the last window with one, at most maxClaimWindows.
func (c *claimCounter) windowsFrom(from float64) []ClaimSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := int64(from / ClaimWindow.Seconds())
	var out []ClaimSpan
	last := -1
	for w := first; w < first+maxClaimWindows; w++ {
		s := ClaimSpan{At: float64(w) * ClaimWindow.Seconds()}
		for k, n := range c.paths[w] {
			path, outcome, _ := strings.Cut(k, " ")
			if path == "given" {
				continue
			}
			s.Claims += n
			if outcome == "acquired" {
				s.Acquired += n
			}
		}
		out = append(out, s)
		if s.Claims > 0 {
			last = len(out) - 1
		}
	}
	return out[:last+1]
}

func (c *claimCounter) add(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.win == nil {
		c.win = map[int64]int64{}
	}
	c.win[int64(now.Sub(c.t0)/ClaimWindow)]++
}

func (c *claimCounter) figures(budget float64) ClaimRate {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := ClaimRate{Budget: budget}
	var busiest int64
	for w, n := range c.win {
		r.Total += n
		if n > busiest || (n == busiest && float64(w)*ClaimWindow.Seconds() < r.At) {
			busiest, r.At = n, float64(w)*ClaimWindow.Seconds()
		}
	}
	r.Busiest = float64(busiest) / ClaimWindow.Seconds()
	return r
}

// claimBudget is the workers' fleet claim budget (0: none).
func (fl *Fleet) claimBudget() float64 {
	return fl.workerConfig("").FleetClaimsPerSecond
}
