package session

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/wsfleet/wsfleet/shared/draw"
	"github.com/wsfleet/wsfleet/shared/netguard"
)

// DialGate admits a worker's dials per source host: a token bucket per host
// (rate per second, burst ceil(rate)), so that a failover of many sessions
// to one source does not dial it faster than the source allows (exchanges
// ban IPs that connect too often). A dial that has to wait waits a random
// extra up to one interval, so that workers taking over together do not
// dial in step. A host matching a DialLimit first waits for its window
// (dialwindow.go), then for the bucket. Safe for concurrent use.
type DialGate struct {
	perSec  float64
	limits  []DialLimit
	windows []*dialWindow // limits[i]'s
	mu      sync.Mutex
	hosts   map[string]*gateEntry
	sweep   time.Time
}

type gateEntry struct {
	lim  *rate.Limiter
	used time.Time
}

// gateIdle is how long an unused host's bucket is kept (then it is full
// again anyway).
const gateIdle = time.Minute

// NewDialGate returns a gate of perSec dials per second per host (0: no
// per-second limit) and of limits' windows (the first matching limit of a
// host applies); nil (no limit) when there is neither.
func NewDialGate(perSec float64, limits ...DialLimit) *DialGate {
	if perSec <= 0 && len(limits) == 0 {
		return nil
	}
	g := &DialGate{perSec: perSec, limits: limits, hosts: map[string]*gateEntry{}}
	for _, l := range limits {
		g.windows = append(g.windows, newDialWindow(l))
	}
	return g
}

// window is host's dial window (nil: no DialLimit matches it).
func (g *DialGate) window(host string) *dialWindow {
	for i, l := range g.limits {
		if netguard.HostAllowed([]string{l.Pattern}, host) {
			return g.windows[i]
		}
	}
	return nil
}

// Wait blocks until host may be dialed, or ctx ends (its error); the extra
// wait is drawn from r (the dialing session's stream; nil: the global
// source). A nil gate admits at once. It runs on the session's own
// goroutine (dialOn), so that a session queued here holds no second one:
// the waits are shallow (a channel, a timer), and the deep calls (the host
// patterns' match, the token bucket's reservation and its return) are
// quick ones on a fresh stack (onFreshStack), which on the session's
// goroutine grew its stack for the session's life (the fleet simulator at
// 10 × 10,000: peak stacks 80 MiB against 41).
func (g *DialGate) Wait(ctx context.Context, host string, r *draw.Stream) error {
	if g == nil {
		return nil
	}
	if len(g.limits) > 0 {
		w, _ := onFreshStack(func() (*dialWindow, error) { return g.window(host), nil })
		if w != nil {
			if err := w.wait(ctx); err != nil {
				return err
			}
		}
	}
	if g.perSec <= 0 {
		return nil
	}
	rv, _ := onFreshStack(func() (reservation, error) { return g.reserve(host, r), nil })
	if rv.d == 0 {
		return nil
	}
	t := time.NewTimer(rv.d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		// Give the token back to the dials behind.
		_, _ = onFreshStack(func() (struct{}, error) { rv.res.Cancel(); return struct{}{}, nil })
		return ctx.Err()
	}
}

// reservation is a host's next token and how long to wait for it (0: at
// once), the extra random wait included.
type reservation struct {
	res *rate.Reservation
	d   time.Duration
}

// reserve takes host's next token.
func (g *DialGate) reserve(host string, r *draw.Stream) reservation {
	now := time.Now()
	g.mu.Lock()
	if now.Sub(g.sweep) > gateIdle {
		g.sweep = now
		for h, e := range g.hosts {
			if now.Sub(e.used) > gateIdle {
				delete(g.hosts, h)
			}
		}
	}
	e := g.hosts[host]
	if e == nil {
		e = &gateEntry{lim: rate.NewLimiter(rate.Limit(g.perSec), int(math.Ceil(g.perSec)))}
		g.hosts[host] = e
	}
	e.used = now
	res := e.lim.ReserveN(now, 1)
	g.mu.Unlock()
	d := res.DelayFrom(now)
	if d == 0 {
		return reservation{res: res}
	}
	return reservation{res, d + time.Duration(r.Float64()*float64(time.Second)/g.perSec)}
}
