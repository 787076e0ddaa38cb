package session

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/wsfleet/wsfleet/shared/draw"
)

// DialGate admits a worker's dials per source host: a token bucket per host
// (rate per second, burst ceil(rate)), so that a failover of many sessions
// to one source does not dial it faster than the source allows (exchanges
// ban IPs that connect too often). A dial that has to wait waits a random
// extra up to one interval, so that workers taking over together do not
// dial in step. Safe for concurrent use.
type DialGate struct {
	perSec float64
	mu     sync.Mutex
	hosts  map[string]*gateEntry
	sweep  time.Time
}

type gateEntry struct {
	lim  *rate.Limiter
	used time.Time
}

// gateIdle is how long an unused host's bucket is kept (then it is full
// again anyway).
const gateIdle = time.Minute

// NewDialGate returns a gate of perSec dials per second per host; nil (no
// limit) when perSec is 0.
func NewDialGate(perSec float64) *DialGate {
	if perSec <= 0 {
		return nil
	}
	return &DialGate{perSec: perSec, hosts: map[string]*gateEntry{}}
}

// Wait blocks until host may be dialed, or ctx ends (its error); the extra
// wait is drawn from r (the dialing session's stream; nil: the global
// source). A nil gate admits at once.
func (g *DialGate) Wait(ctx context.Context, host string, r *draw.Stream) error {
	if g == nil {
		return nil
	}
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
		return nil
	}
	d += time.Duration(r.Float64() * float64(time.Second) / g.perSec)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		res.Cancel() // give the token back to the dials behind
		return ctx.Err()
	}
}
