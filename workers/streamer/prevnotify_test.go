package streamer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// A start notification that names the tenure of an owner that is gone (a
// takeover's or a leaver's announcement) is claimed with one acquire,
// conditional on that tenure, once the consumer reads the owner not alive;
// one without it is refused first (the session is still the gone owner's)
// and sent again. One naming a live owner's tenure takes nothing.
func TestStartNamingTheDeadTenureIsClaimedInOneAcquire(t *testing.T) {
	e := newEnv(t)
	b := e.worker(nil)
	ctx := context.Background()
	// The queue flows (a start received): reconcile passes leave a gone
	// worker's sessions to the announcements for the takeover's grace
	// (claim.TakeoverGrace), so only the queue claims them here.
	e.notify(schema.NotifyStart, "s-none")
	testwait.Eventually(t, 5*time.Second, "a start received", b.consumer.ReceivedStart)
	k, err := lease.NewKeeper(dynamostore.New(e.db, e.table), clock.Real{}, lease.DefaultConfig("w-gone"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(ctx); err != nil {
		t.Fatal(err)
	}
	// It left with two sessions still its (a release that failed at its
	// shutdown: it announces them itself, announceLeftovers): no watcher
	// declares a worker that left dead (no takeover), and the sessions are
	// never unowned.
	if err := k.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	gone := func(it *lease.Item) { it.Owner, it.Epoch = "w-gone", 3 }
	named, bare := e.session(gone), e.session(gone)
	acquires := func() (int64, int64) {
		s := b.store.Stats()
		return s[dynamostore.OpAcquire], s[dynamostore.OpAcquire+"_failed"]
	}
	claimed := func(publish func(), id string) (int64, int64) {
		t.Helper()
		n0, f0 := acquires()
		publish()
		testwait.Eventually(t, 5*time.Second, "b owning "+id, func() bool { return b.owns(id) })
		n, f := acquires()
		return n - n0, f - f0
	}
	n, failed := claimed(func() {
		if err := e.queue.Publish(ctx, notify.Notification{Type: schema.NotifyStart, ConnectionID: named, SentAtMs: time.Now().UnixMilli(),
			PrevOwner: "w-gone", PrevEpoch: 3}); err != nil {
			t.Fatal(err)
		}
	}, named)
	bn, bfailed := claimed(func() { e.notify(schema.NotifyStart, bare) }, bare)
	// The store counts an acquire's fence of the checkpoint under acquire
	// too (a claim is two requests).
	if failed != 0 || bfailed != 1 || n >= bn {
		t.Fatalf("the start naming the dead tenure took %d acquire requests (%d refused), the one without %d (%d refused): want none refused and fewer, beside one refused",
			n, failed, bn, bfailed)
	}
	t.Logf("acquire requests: %d naming the dead tenure, %d without (%d refused)", n, bn, bfailed)

	// A start naming a live owner's tenure takes nothing: the consumer
	// reads that owner alive and claims as if none were named (refused).
	a := e.worker(func(c *Config) { c.ReconcileEvery = time.Hour })
	live := e.session(nil)
	e.notify(schema.NotifyStart, live)
	testwait.Eventually(t, 5*time.Second, "an owner of "+live, func() bool { return e.owner(live) != nil })
	owner, other := a, b
	if b.owns(live) {
		owner, other = b, a
	}
	handled := func() int {
		n := 0
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, `"connection_id":"`+live+`"`) && strings.Contains(l, `"message":"start notification handled"`) {
				n++
			}
		}
		return n
	}
	testwait.Eventually(t, 5*time.Second, "the first start of "+live+" handled", func() bool { return handled() >= 1 })
	it := e.item(live)
	if err := e.queue.Publish(ctx, notify.Notification{Type: schema.NotifyStart, ConnectionID: live, SentAtMs: time.Now().UnixMilli(),
		PrevOwner: it.Owner, PrevEpoch: it.Epoch}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, "the start naming "+live+"'s live tenure handled", func() bool { return handled() >= 2 })
	if it2 := e.item(live); it2.Owner != it.Owner || it2.Epoch != it.Epoch || !owner.owns(live) || other.owns(live) {
		t.Fatalf("%s: %s@%d after a start naming its live owner's tenure, want %s@%d still", live, it2.Owner, it2.Epoch, it.Owner, it.Epoch)
	}
}
