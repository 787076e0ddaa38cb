package streamer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/memqueue"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
)

// No rebalancing round while the work queue brings announced tenures (a
// death's sessions still being placed): the round reads no plan and moves
// nothing; one starts again once no announcement came for
// claim.FlowingWithin. A start naming no previous tenure (a new session)
// does not hold rounds back.
func TestNoRebalancingWhileADeathsSessionsArePlaced(t *testing.T) {
	q := memqueue.New(memqueue.Config{Wait: 20 * time.Millisecond})
	w, _ := fleetAroundWith(t, 10, func(d *Deps) { d.Queue = q })
	clk := w.deps.Clock.(*clock.Fake)
	ctx := context.Background()
	ranAt := func() time.Time {
		t.Helper()
		clk.Advance(time.Millisecond)
		if err := w.rebalanceRound(ctx); err != nil {
			t.Fatal(err)
		}
		return w.rebalanceStatus().RoundAt
	}
	// receive publishes n and runs the consumer until a receive brought it
	// (this worker, not started, hands starts back: they stay queued).
	receive := func(n notify.Notification, got func() bool) {
		t.Helper()
		if err := q.Publish(ctx, n); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { _ = w.consumer.Run(cctx) })
		testwait.Eventually(t, 5*time.Second, "the start received", got)
		cancel()
		wg.Wait()
	}
	receive(notify.Notification{Type: schema.NotifyStart, ConnectionID: "new-1", SentAtMs: 1}, w.consumer.ReceivedStart)
	if w.recovering() {
		t.Fatal("recovering after a new session's start")
	}
	if at := ranAt(); !at.Equal(clk.Now()) {
		t.Fatalf("no round with no announcement taken (last at %s, now %s): want one (the control)", at, clk.Now())
	}
	receive(notify.Notification{Type: schema.NotifyStart, ConnectionID: "dead-1", SentAtMs: 1, PrevOwner: "w-000", PrevEpoch: 3},
		func() bool { return w.consumer.Announcing(time.Minute) })
	if !w.recovering() {
		t.Fatal("not recovering right after an announced tenure")
	}
	if at := ranAt(); at.Equal(clk.Now()) {
		t.Fatal("a round ran while a death's sessions were placed: want none")
	}
	clk.Advance(claim.FlowingWithin(w.cfg.ReconcileEvery))
	if w.recovering() {
		t.Fatal("still recovering after no announcement for claim.FlowingWithin")
	}
	if at := ranAt(); !at.Equal(clk.Now()) {
		t.Fatal("no round after the announcements ended")
	}
}
