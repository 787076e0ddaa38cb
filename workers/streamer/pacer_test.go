package streamer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

func TestClaimPacerHalvesUnderThrottlingAndRecovers(t *testing.T) {
	p := newClaimPacer(40, clock.Real{})
	if p.Throttling() || p.Rate() != 40 {
		t.Fatalf("fresh pacer: throttling %v at %v/s", p.Throttling(), p.Rate())
	}
	p.Throttled()
	if !p.Throttling() || p.Rate() != 20 {
		t.Fatalf("after one throttled claim: %v/s", p.Rate())
	}
	for range 20 {
		p.Throttled()
	}
	if p.Rate() != float64(minClaimRate) {
		t.Fatalf("floor: %v/s, want %v", p.Rate(), minClaimRate)
	}
	for i := 0; p.Throttling(); i++ {
		if i > 10 {
			t.Fatalf("still throttling after %d successes: %v/s", i, p.Rate())
		}
		p.Succeeded()
	}
	if p.Rate() != 40 {
		t.Fatalf("recovered to %v/s, want 40", p.Rate())
	}
}

// Claims that queued at the floor rate go as soon as the rate grows back:
// none keeps the wait the floor gave it (ten seconds per claim ahead of it),
// which left a takeover trickling on for minutes after the throttling ended
// (found by TestMassTakeoverOnAHotIndexKeyBacksOff on the DynamoDB model).
func TestQueuedClaimsGoWhenTheRateRecovers(t *testing.T) {
	p := newClaimPacer(40, clock.Real{})
	for range 20 {
		p.Throttled()
	}
	ctx := context.Background()
	if err := p.Wait(ctx); err != nil { // the floor's one token
		t.Fatal(err)
	}
	const waiters = 5
	var done atomic.Int64
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Wait(ctx); err == nil {
				done.Add(1)
			}
		}()
	}
	testwait.Holds(t, 300*time.Millisecond, "the waiters wait at the floor", func() bool { return done.Load() == 0 })
	for p.Throttling() {
		p.Succeeded()
	}
	// At 40 claims a second the five need an eighth of a second, not the
	// floor's 10 s each.
	testwait.Eventually(t, 5*time.Second, "every queued claim admitted at the recovered rate", func() bool { return done.Load() == waiters })
	wg.Wait()

	// A waiter whose context ends returns its error.
	for range 20 {
		p.Throttled()
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := p.Wait(cctx) // a token the floor may still hold is taken at once
	if err == nil {
		err = p.Wait(cctx)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past its deadline: %v", err)
	}
}

// Many queued claims wait on the queue, not on a timer each: while the
// rate stands still every claim takes one slot, however many wait (a slot
// per waiter per token was a wake-up storm that starved the heartbeats of
// a mass start: the cost bench's 10,000 sessions lost their tenures).
func TestQueuedClaimsTakeOneSlotEach(t *testing.T) {
	p := newClaimPacer(2000, clock.Real{})
	const waiters = 300
	var wg sync.WaitGroup
	var done atomic.Int64
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.Wait(context.Background()) == nil {
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if done.Load() != waiters {
		t.Fatalf("%d of %d waiters admitted", done.Load(), waiters)
	}
	if n := p.reserves.Load(); n != waiters {
		t.Fatalf("%d slots taken for %d claims at a steady rate, want one each", n, waiters)
	}
}

// A claim skipped at the head (WaitUnless) spends no slot of the rate:
// the next claim goes at once.
func TestSkippedClaimSpendsNoSlot(t *testing.T) {
	p := newClaimPacer(1, clock.Real{}) // one token, then one a second
	ctx := context.Background()
	skipped, err := p.WaitUnless(ctx, func() bool { return true })
	if err != nil || !skipped {
		t.Fatalf("skip at the head: skipped %v, %v", skipped, err)
	}
	// The bucket still holds its one token (a slot taken would have left
	// it empty, refilling at one a second).
	if n, tok := p.reserves.Load(), p.lim.Tokens(); n != 0 || tok < 0.5 {
		t.Fatalf("after a skipped claim: %d slots taken, %.2f tokens left; want none taken, the token kept", n, tok)
	}
	if skipped, err := p.WaitUnless(ctx, func() bool { return false }); err != nil || skipped {
		t.Fatalf("a claim still worth sending: skipped %v, %v", skipped, err)
	}
	if n := p.reserves.Load(); n != 1 {
		t.Fatalf("%d slots taken by one claim sent, want one", n)
	}
}

// TestThrottledClaimsSlowDownAndTheWorkerStaysAlive: while the store
// throttles acquires, the worker's claim rate drops (claims stop adding to
// the throttling), its heartbeats go on (it stays trusted and alive), and
// once the throttling ends every session is claimed and the rate is back.
func TestThrottledClaimsSlowDownAndTheWorkerStaysAlive(t *testing.T) {
	st := memstore.New()
	var throttling atomic.Bool
	var throttled, heartbeats atomic.Int64
	throttling.Store(true)
	st.SetFail(func(op string) (error, bool) {
		switch {
		case op == "acquire" && throttling.Load():
			throttled.Add(1)
			return fmt.Errorf("%w: injected", lease.ErrThrottled), false
		case op == "heartbeat":
			heartbeats.Add(1)
		}
		return nil, false
	})
	m := startMemOn(t, st, 20, func(c *Config) { c.ClaimsPerSecond = 50 }, nil)
	testwait.Eventually(t, 5*time.Second, "throttled claims", func() bool { return throttled.Load() >= 3 })
	if r := m.pacer.Rate(); r >= 50 {
		t.Fatalf("claim rate %v/s after %d throttled claims, want below 50", r, throttled.Load())
	}
	hb := heartbeats.Load()
	testwait.Eventually(t, 5*time.Second, "heartbeats while claims are throttled", func() bool { return heartbeats.Load() >= hb+2 })
	if st := m.Status(); st.TrustedForMs == 0 || st.Record.State != "ALIVE" || st.Owned != 0 {
		t.Fatalf("worker while throttled: trusted for %d ms, state %s, owns %d", st.TrustedForMs, st.Record.State, st.Owned)
	}
	throttling.Store(false)
	// From the floor (a claim every 10 s) the rate grows back by a tenth per
	// claim that succeeds.
	testwait.Eventually(t, 90*time.Second, "every session claimed after the throttling", func() bool { return m.Status().Owned == 20 })
	testwait.Eventually(t, 5*time.Second, "the claim rate back", func() bool { return !m.pacer.Throttling() })
}

// A fleet budget's share moves the pacer's configured rate: at once when it
// is at its rate, and a throttled pacer keeps its lower rate (at most the
// new one) and grows back to the new one, never above.
func TestClaimPacerFollowsItsShare(t *testing.T) {
	p := newClaimPacer(50, clock.Real{})
	p.setBase(10) // 100 claims/s over 10 workers
	if p.Rate() != 10 || p.Throttling() {
		t.Fatalf("share 10/s: pacer at %v/s (throttling %v)", p.Rate(), p.Throttling())
	}
	p.Throttled()
	p.setBase(20) // half the fleet gone: the survivors' share doubles
	if p.Rate() != 5 || !p.Throttling() {
		t.Fatalf("throttled pacer after a larger share: %v/s, want it to keep 5/s", p.Rate())
	}
	for range 20 {
		p.Succeeded()
	}
	if p.Rate() != 20 {
		t.Fatalf("grew back to %v/s, want the new share 20/s", p.Rate())
	}
	p.Throttled()
	p.setBase(4) // below the throttled rate: the share bounds it
	if p.Rate() != 4 {
		t.Fatalf("share 4/s below a throttled 10/s: %v/s", p.Rate())
	}
	p.setBase(0.01)
	if p.Rate() != float64(minClaimRate) {
		t.Fatalf("a share below the floor: %v/s, want %v", p.Rate(), minClaimRate)
	}
}
