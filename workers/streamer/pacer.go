package streamer

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"

	"github.com/wsfleet/wsfleet/shared/clock"
)

// claimPacer paces this worker's claims: at most ClaimsPerSecond, and less
// while the store throttles them. Each claim the store refused for its
// throughput (lease.ErrThrottled) halves the rate, down to a floor of one
// claim every ten seconds (minClaimRate); each claim that
// succeeds adds back a tenth of the configured rate (additive increase,
// multiplicative decrease, as TCP's congestion control and the AWS SDK's
// adaptive retry mode do). A mass takeover or a rebalancing round on a
// throttled table then slows down instead of adding retries to the
// throttling, and the heartbeats, on their own client, keep their share.
//
// Waiting claims queue for the head (one at a time, in the order they
// came), and only the head holds a slot: a slot reserved in advance at the
// floor rate would keep its wait (ten seconds for the first, a hundred for
// the tenth) after the throttling ended and the rate grew back, so the head
// gives its slot back and takes a new one whenever the rate changes. The
// others sleep on the queue, not on timers: thousands of queued claims (a
// mass start) cost one wake-up each, not one per token.
type claimPacer struct {
	mu      sync.Mutex
	lim     *rate.Limiter
	base    rate.Limit
	changed chan struct{} // closed (and replaced) when the rate changes
	head    chan struct{} // holds one token: the waiter that holds it is the head
	// clk times the head's wait. The limiter reads the system clock
	// itself: it yields durations only (immune to an offset clock), and in
	// a testing/synctest bubble that clock is virtual too.
	clk clock.Clock
	// reserves counts the slots taken (tests: one per claim while the rate
	// stands still).
	reserves atomic.Int64
}

// minClaimRate is the slowest the pacer goes: one claim every 10 s.
const minClaimRate = rate.Limit(0.1)

func newClaimPacer(perSecond float64, clk clock.Clock) *claimPacer {
	base := rate.Limit(perSecond)
	return &claimPacer{lim: rate.NewLimiter(base, max(1, int(math.Ceil(perSecond)))), base: base,
		changed: make(chan struct{}), head: make(chan struct{}, 1), clk: clk}
}

// Wait blocks until a claim may be sent (or ctx ends).
func (p *claimPacer) Wait(ctx context.Context) error {
	_, err := p.WaitUnless(ctx, nil)
	return err
}

// WaitUnless is Wait, but once the claim is at the head of the queue,
// before it takes a slot, skip (when not nil) is asked whether the claim
// is still worth sending: true gives the head to the next claim and
// returns true, without spending a slot of the rate. A claim that queued
// behind others may have been taken by another worker while it waited.
func (p *claimPacer) WaitUnless(ctx context.Context, skip func() bool) (skipped bool, err error) {
	select {
	case p.head <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-p.head }()
	if skip != nil && skip() {
		return true, nil
	}
	for {
		p.mu.Lock()
		r := p.lim.Reserve()
		changed := p.changed
		p.mu.Unlock()
		p.reserves.Add(1)
		d := r.Delay()
		if d == 0 {
			return false, nil
		}
		t := p.clk.NewTimer(d)
		select {
		case <-t.C():
			return false, nil
		case <-changed:
			// A new rate: give the slot back (the head's is the only
			// reservation, so all of it comes back) and take one at it.
			t.Stop()
			r.Cancel()
		case <-ctx.Done():
			t.Stop()
			r.Cancel()
			return false, ctx.Err()
		}
	}
}

// setLimit changes the rate and wakes the waiters; p.mu is held.
func (p *claimPacer) setLimit(l rate.Limit, burst int) {
	p.lim.SetLimit(l)
	p.lim.SetBurst(burst)
	close(p.changed)
	p.changed = make(chan struct{})
}

// Throttling reports whether the store throttled claims lately (the rate
// is below the configured one): then even the claims that skip the pace
// (directed hand-offs, takeovers) wait for it.
func (p *claimPacer) Throttling() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lim.Limit() < p.base
}

// Throttled records a claim the store throttled: the rate halves.
func (p *claimPacer) Throttled() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setLimit(max(minClaimRate, p.lim.Limit()/2), 1)
}

// Succeeded records a claim the store took: the rate grows back by a tenth
// of the configured one, up to it.
func (p *claimPacer) Succeeded() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.lim.Limit(); l < p.base {
		l = min(p.base, l+p.base/10)
		burst := 1
		if l == p.base {
			burst = max(1, int(math.Ceil(float64(p.base))))
		}
		p.setLimit(l, burst)
	}
}

// setBase makes perSecond the configured rate (at least minClaimRate): the
// worker's share of the fleet's claim budget (fleetbudget.go) as the fleet
// changes. A pacer at its rate moves to the new one at once; a throttled
// one keeps its lower rate (at most the new one) and grows back to it.
func (p *claimPacer) setBase(perSecond float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := max(rate.Limit(perSecond), minClaimRate)
	if b == p.base {
		return
	}
	l := p.lim.Limit()
	if l >= p.base || l > b {
		l = b
	}
	p.base = b
	burst := 1
	if l == b {
		burst = max(1, int(math.Ceil(float64(b))))
	}
	p.setLimit(l, burst)
}

// Rate is the claims per second the pacer allows now.
func (p *claimPacer) Rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return float64(p.lim.Limit())
}
