package lease_test

import (
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// The checks a takeover's receivers make of its dead owners share one
// listing of the GONE workers: the dead it shows are not read one by one,
// a check arriving within GoneListEvery of the last listing waits for the
// next (one query for all of them), and a dead worker the listing misses
// (an index lags) or an alive one is still read.
func TestNotAliveLearnsTheDeadFromOneListing(t *testing.T) {
	r := newRig(t)
	k, store := r.countedKeeper("w1")
	dead := func(id string) {
		t.Helper()
		if err := r.store.Register(r.ctx, lease.WorkerRecord{ID: id, State: schema.WorkerDead, Epoch: 2, List: schema.WorkerListGone}); err != nil {
			t.Fatal(err)
		}
	}
	dead("d1")
	dead("d2")
	for _, id := range []string{"d1", "d2", "d1"} {
		if !k.NotAlive(r.ctx, id) {
			t.Fatalf("%s, listed GONE, is alive", id)
		}
	}
	if n, g1, g2 := store.lists(), store.count("d1"), store.count("d2"); n != 1 || g1 != 0 || g2 != 0 {
		t.Fatalf("two dead workers: %d listings, %d and %d record reads; want one listing, no reads", n, g1, g2)
	}

	// Another dies half a period later: its check waits for the next
	// listing, sent GoneListEvery after the last.
	r.clk.Advance(lease.GoneListEvery / 2)
	dead("d3")
	done := make(chan bool, 1)
	go func() { done <- k.NotAlive(r.ctx, "d3") }()
	testwait.Eventually(t, 10*time.Second, "d3's check waiting for the next listing", func() bool { return r.clk.Waiters() > 0 })
	if n := store.lists(); n != 1 {
		t.Fatalf("%d listings before GoneListEvery passed, want 1", n)
	}
	r.clk.Advance(lease.GoneListEvery / 2)
	if !<-done {
		t.Fatal("d3, listed GONE, is alive")
	}
	if n, g := store.lists(), store.count("d3"); n != 2 || g != 0 {
		t.Fatalf("d3: %d listings, %d record reads; want 2 listings, no read", n, g)
	}

	// A standby's promotion does not wait: half a period after the last
	// listing, its check reads the record at once.
	r.clk.Advance(lease.GoneListEvery / 2)
	dead("d4")
	if !k.NotAliveNow(r.ctx, "d4") {
		t.Fatal("d4, dead, is alive")
	}
	if n, g := store.lists(), store.count("d4"); n != 2 || g != 1 {
		t.Fatalf("d4 checked now: %d listings, %d record reads; want 2 listings (none more), 1 read", n, g)
	}
	r.clk.Advance(lease.GoneListEvery / 2)

	// A dead worker the index has not caught up with yet, and an alive
	// one: each read (after a listing that missed them).
	r.keeper("w2")
	r.clk.Advance(lease.GoneListEvery)
	if k.NotAlive(r.ctx, "w2") {
		t.Fatal("an alive worker is not alive")
	}
	if n, g := store.lists(), store.count("w2"); n != 3 || g != 1 {
		t.Fatalf("alive w2: %d listings, %d record reads; want 3 listings, 1 read", n, g)
	}
	r.keeper("w3")
	r.store.UpdateWorker("w3", func(rec *lease.WorkerRecord) { rec.State, rec.Epoch = schema.WorkerDead, rec.Epoch+1 })
	r.clk.Advance(lease.GoneListEvery)
	if !k.NotAlive(r.ctx, "w3") {
		t.Fatal("a dead worker missing from the listing is alive")
	}
	if g := store.count("w3"); g != 1 {
		t.Fatalf("dead w3 missing from the listing: %d record reads, want 1", g)
	}
}

// GoneListingDue: a need answered by a listing sent at or after it waits
// for none; one sent before waits until GoneListEvery after it.
func TestGoneListingDue(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		need, last, now int
		list            bool
		wait            time.Duration
	}{
		{need: 500, last: 500, now: 600, list: false},
		{need: 500, last: 700, now: 800, list: false},
		{need: 500, last: 0, now: 600, list: true, wait: 400 * time.Millisecond},
		{need: 1500, last: 0, now: 1500, list: true, wait: 0},
	} {
		list, wait := lease.GoneListingDue(at(c.need), at(c.last), at(c.now), time.Second)
		if list != c.list || wait != c.wait {
			t.Errorf("GoneListingDue(need %d, last %d, now %d) = %v %v, want %v %v", c.need, c.last, c.now, list, wait, c.list, c.wait)
		}
	}
	if list, wait := lease.GoneListingDue(at(5), time.Time{}, at(5), time.Second); !list || wait != 0 {
		t.Errorf("first listing: %v %v, want at once", list, wait)
	}
}

// A record whose heartbeat is older than half its TTL is quiet (a worker
// likely dead, not yet declared); a fresh one, or one without a TTL or a
// heartbeat time, is not.
func TestHeartbeatQuiet(t *testing.T) {
	now := t0.UnixMilli()
	rec := func(ageMs int64, ttl time.Duration) lease.WorkerRecord {
		return lease.WorkerRecord{ID: "w", State: schema.WorkerAlive, HeartbeatAtMs: now - ageMs, TTL: ttl}
	}
	for _, c := range []struct {
		r     lease.WorkerRecord
		quiet bool
	}{
		{rec(1000, 10*time.Second), false},
		{rec(5000, 10*time.Second), false},
		{rec(5001, 10*time.Second), true},
		{rec(12_000, 10*time.Second), true},
		{rec(12_000, 0), false},
		{lease.WorkerRecord{ID: "w", TTL: 10 * time.Second}, false},
	} {
		if got := lease.HeartbeatQuiet(c.r, now); got != c.quiet {
			t.Errorf("HeartbeatQuiet(heartbeat at %d, ttl %v) at %d = %v, want %v", c.r.HeartbeatAtMs, c.r.TTL, now, got, c.quiet)
		}
	}
}

// The alive count the claim budget is shared by leaves out a worker as
// soon as this Keeper sees it gone (here through its GONE listing), not
// at the next refresh.
func TestAliveWorkersLeavesOutTheGoneAtOnce(t *testing.T) {
	r := newRig(t)
	k, _ := r.keeper("w1")
	r.keeper("w2")
	r.keeper("w3")
	if err := k.RefreshWorkers(r.ctx); err != nil {
		t.Fatal(err)
	}
	if n := k.AliveWorkers(); n != 3 {
		t.Fatalf("%d alive after the refresh, want 3", n)
	}
	r.store.UpdateWorker("w3", func(rec *lease.WorkerRecord) {
		rec.State, rec.Epoch, rec.List = schema.WorkerDead, rec.Epoch+1, schema.WorkerListGone
	})
	if n := k.AliveWorkers(); n != 3 {
		t.Fatalf("%d alive before anything showed w3 dead, want 3 (no I/O)", n)
	}
	if !k.NotAlive(r.ctx, "w3") {
		t.Fatal("w3, listed GONE, is alive")
	}
	if n := k.AliveWorkers(); n != 2 {
		t.Fatalf("%d alive once w3 was seen dead, want 2", n)
	}
}
