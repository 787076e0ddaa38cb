package lease_test

import (
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// reconcile is one reconcile pass of k: Orphans, then an acquire of every
// candidate (the worker's claim.Reconciler without its rate limit).
func (r *rig) reconcile(k *lease.Keeper) {
	r.t.Helper()
	cands, err := k.Orphans(r.ctx, 100)
	if err != nil {
		r.t.Fatalf("orphans: %v", err)
	}
	for _, c := range cands {
		_, _ = k.Acquire(r.ctx, c.ConnectionID, c.Prev)
	}
}

// deadWithLaggingIndex: wa acquires session a while by_owner lags
// ownerLag behind the table, and freezes; wb declares it dead and
// reconciles every 5 s for horizon. It returns a's item at the end.
func deadWithLaggingIndex(t *testing.T, ownerLag, horizon time.Duration) (lease.Item, *rig) {
	r := newRig(t, started("a"))
	a, _ := r.keeper("wa")
	b, bobs := r.keeper("wb")
	r.refresh(a, b)
	r.store.SetIndexLag(r.clk, memstore.IndexLag{Owner: ownerLag})
	r.acquire(a, "a")
	cfg := b.Config()
	// wa freezes now: only wb runs (heartbeats, watches, reconciles).
	sinceReconcile := time.Duration(0)
	for elapsed := time.Duration(0); elapsed < horizon; elapsed += cfg.WatchEvery() {
		r.step(cfg.WatchEvery(), []*lease.Keeper{b}, []*lease.Keeper{b})
		if sinceReconcile += cfg.WatchEvery(); sinceReconcile >= 5*time.Second && bobs.diedCount() > 0 {
			sinceReconcile = 0
			r.reconcile(b)
		}
	}
	if bobs.diedCount() == 0 {
		t.Fatal("wa never declared dead")
	}
	it, err := r.store.Get(r.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	return it, r
}

// Issue 24: a session a worker acquired just before it died is missing from
// its by_owner query while the index lags. The GONE record must not move to
// DONE on that empty answer: once the index shows the session (here 20 s
// after the acquire, within IndexLagBound) it is taken over, never left
// owned by the dead worker; then, the bound passed, the record is DONE.
func TestDeadWorkersSessionIsTakenOverThoughTheIndexLags(t *testing.T) {
	it, r := deadWithLaggingIndex(t, 20*time.Second, 90*time.Second)
	rec, _ := r.store.GetWorker(r.ctx, "wa")
	if it.Owner != "wb" {
		t.Fatalf("session a is owned by %q (dead worker wa's record: %s, %s), want it taken over by wb", it.Owner, rec.State, rec.List)
	}
	if rec.List != schema.WorkerListDone {
		t.Fatalf("wa's record after its session moved and the bound passed: %s", rec.List)
	}
}

// Beyond the bound (by_owner 45 s behind, the bound 30 s) the record moves
// to DONE with the session still owned by the dead worker; the sweep of
// DONE records (DoneSweepEvery) finds it once the index shows it.
func TestSweepOfDoneRecordsFindsWhatAnIndexLaggingBeyondTheBoundHid(t *testing.T) {
	cfg := lease.DefaultConfig("x")
	if cfg.IndexLagBound >= 45*time.Second {
		t.Fatalf("the test's lag must exceed the bound %s", cfg.IndexLagBound)
	}
	it, r := deadWithLaggingIndex(t, 45*time.Second, cfg.DoneSweepEvery()+time.Minute)
	if it.Owner != "wb" {
		t.Fatalf("session a is owned by %q a sweep period after the index showed it, want wb", it.Owner)
	}
	if rec, _ := r.store.GetWorker(r.ctx, "wa"); rec.List != schema.WorkerListDone {
		t.Fatalf("wa's record: %s, want DONE", rec.List)
	}
}

// MayMarkDone: an empty answer counts only from a query sent the bound
// after the worker was first seen gone.
func TestMayMarkDone(t *testing.T) {
	seen := t0
	const bound = 30 * time.Second
	for _, c := range []struct {
		sent  time.Duration
		owned int
		want  bool
	}{
		{0, 0, false}, {bound - time.Millisecond, 0, false}, {bound, 0, true}, {time.Hour, 0, true}, {time.Hour, 1, false}, {bound, 3, false},
	} {
		if got := lease.MayMarkDone(seen, seen.Add(c.sent), c.owned, bound); got != c.want {
			t.Errorf("MayMarkDone(query sent %s after first seen gone, %d owned) = %v, want %v", c.sent, c.owned, got, c.want)
		}
	}
}

// A worker that has just registered is missing from the ALIVE list while
// by_worker_list lags: it must still watch the others (AliveView adds it),
// so a worker that stops heartbeating is declared dead a TTL after, not a
// refresh later. Found by chaos on the DynamoDB model (a zombie's only
// survivor was 3 s old).
func TestANewWorkerWatchesThoughTheListLags(t *testing.T) {
	r := newRig(t)
	old, _ := r.keeper("old")
	r.refresh(old)
	r.store.SetIndexLag(r.clk, memstore.IndexLag{WorkerList: 2 * time.Second})
	fresh, obs := r.keeper("fresh")
	r.refresh(fresh)
	if got := fresh.Targets(); len(got) != 1 || got[0] != "old" {
		t.Fatalf("the new worker watches %v, want [old]: it is not yet listed ALIVE itself", got)
	}
	cfg := fresh.Config()
	// old stops heartbeating; only fresh runs.
	for elapsed := time.Duration(0); elapsed <= cfg.TTL+cfg.WatchEvery(); elapsed += cfg.WatchEvery() {
		r.step(cfg.WatchEvery(), []*lease.Keeper{fresh}, []*lease.Keeper{fresh})
	}
	if obs.diedCount() != 1 {
		t.Fatalf("old declared dead %d times within TTL + a watch interval of its last heartbeat, want once", obs.diedCount())
	}
	if got := lease.AliveView("me", []string{"a", "gone"}, func(id string) bool { return id == "gone" }); len(got) != 2 || got[0] != "a" || got[1] != "me" {
		t.Fatalf("AliveView: %v, want [a me]", got)
	}
}
