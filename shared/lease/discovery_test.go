package lease_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// setDesired writes a stop or a start of session id as ingest does: the
// desired state (a start also bumps the generation), never the owner; the
// store derives by_unowned from the item (a STARTED session without owner).
func (r *rig) setDesired(id, state string) {
	r.store.Update(id, func(it *lease.Item) {
		if state == schema.StateStarted {
			it.Generation++
		}
		it.DesiredState = state
	})
}

// declareDead has wb declare wa dead, as its watcher would after the TTL.
func (r *rig) declareDead(id, by string) {
	r.t.Helper()
	rec, err := r.store.GetWorker(r.ctx, id)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.store.DeclareDead(r.ctx, id, rec.Epoch, rec.HeartbeatSeq, by, r.clk.Now().UnixMilli()); err != nil {
		r.t.Fatal(err)
	}
}

func candidateIDs(cands []lease.Candidate) []string {
	var ids []string
	for _, c := range cands {
		ids = append(ids, c.ConnectionID)
	}
	return ids
}

// Issue 35, finding 5: worker wa owns session s, s is stopped, and wa dies
// before releasing it. No takeover moves a STOPPED session, so the
// reconcilers must clear its owner (Disown); otherwise its by_owner entry
// keeps wa's record GONE until the record expires a day later, and a
// restart after that (ingest's has-owner branch: no unowned_shard, the
// mailbox of a worker that no longer exists) whose notification is lost is
// found by no reconciler.
func TestSessionRestartedAfterItsOwnerDiedWhileStoppedIsFound(t *testing.T) {
	r := newRig(t, started("s"))
	a, _ := r.keeper("wa")
	b, _ := r.keeper("wb")
	r.acquire(a, "s")
	r.setDesired("s", schema.StateStopped)
	r.declareDead("wa", "wb")

	// wb reconciles across the index lag bound.
	for range 3 {
		if _, err := b.Orphans(r.ctx, 10); err != nil {
			t.Fatalf("orphans: %v", err)
		}
		r.step(b.Config().IndexLagBound/2, []*lease.Keeper{b}, nil)
	}
	rec, _ := r.store.GetWorker(r.ctx, "wa")
	listBeforeExpiry := rec.List
	// A day later the ended record expires (the table's TTL).
	r.store.ExpireWorker("wa")
	r.setDesired("s", schema.StateStarted) // its notification is lost

	cands, err := b.Orphans(r.ctx, 10)
	if err != nil {
		t.Fatalf("orphans: %v", err)
	}
	it, _ := r.store.Get(r.ctx, "s")
	if !slices.Contains(candidateIDs(cands), "s") {
		t.Fatalf("restarted session s not found by reconciliation: candidates %v; s owned by %q at epoch %d (%s); wa's record was %s before it expired",
			candidateIDs(cands), it.Owner, it.Epoch, it.DesiredState, listBeforeExpiry)
	}
	if listBeforeExpiry != schema.WorkerListDone {
		t.Fatalf("wa's record, owning only a cleared stopped session past the bound: %s, want DONE", listBeforeExpiry)
	}
	h, err := b.Acquire(r.ctx, "s", nil)
	if err != nil {
		t.Fatalf("acquire of the restarted session: %v", err)
	}
	if h.Epoch() != 2 {
		t.Fatalf("epoch %d after the dead tenure's 1", h.Epoch())
	}
}

// Issue 35, finding 5: by_owner has no sort key, so a limited by_owner page
// of a dead worker may hold only stopped entries: the reconciler must read
// to the end and reach the STARTED session behind them (here the store
// answers in id order, the stopped ids first).
func TestOrphansReachesAStartedSessionBehindStoppedOnes(t *testing.T) {
	items := []lease.Item{started("z-started")}
	for i := range 12 {
		items = append(items, started(fmt.Sprintf("a-stopped-%02d", i)))
	}
	r := newRig(t, items...)
	a, _ := r.keeper("wa")
	b, _ := r.keeper("wb")
	for _, it := range items {
		r.acquire(a, it.ConnectionID)
		if it.ConnectionID != "z-started" {
			r.setDesired(it.ConnectionID, schema.StateStopped)
		}
	}
	r.declareDead("wa", "wb")
	cands, err := b.Orphans(r.ctx, 10)
	if err != nil {
		t.Fatalf("orphans: %v", err)
	}
	if len(cands) != 1 || cands[0].ConnectionID != "z-started" || cands[0].Prev == nil || cands[0].Prev.Owner != "wa" {
		t.Fatalf("orphans of a dead worker with 12 stopped sessions before a started one: %v, want z-started from wa", candidateIDs(cands))
	}
	// The same pass cleared the stopped ones.
	owned, err := r.store.OwnedBy(r.ctx, "wa", 0)
	if err != nil || len(owned) != 1 {
		t.Fatalf("wa's sessions after the pass: %+v %v", owned, err)
	}
}

// The audit lists into the array of the listing its caller passes back
// (the worker's last pass's, Keeper.Audit): a steady audit allocates no
// array of its own (a by_owner listing is 64 B per held session, every
// AuditEvery), only its deadline.
func TestAuditListsIntoItsLastListing(t *testing.T) {
	var items []lease.Item
	for i := range 300 {
		it := started(fmt.Sprintf("s-%03d", i))
		it.Owner, it.Epoch = "w1", 1
		items = append(items, it)
	}
	r := newRig(t, items...)
	k, _ := r.keeper("w1")
	owned, err := k.Audit(r.ctx, nil)
	if err != nil || len(owned) != len(items) {
		t.Fatalf("audit: %d entries, %v; want %d", len(owned), err, len(items))
	}
	first := &owned[0]
	allocs := testing.AllocsPerRun(20, func() {
		if owned, err = k.Audit(r.ctx, owned); err != nil || len(owned) != len(items) {
			t.Fatalf("audit: %d entries, %v; want %d", len(owned), err, len(items))
		}
	})
	if &owned[0] != first {
		t.Fatal("the audit listed into an array of its own, not its last listing's")
	}
	if allocs > 4 {
		t.Fatalf("an audit of %d sessions into its last listing: %.0f allocations, want only its deadline's (context.WithTimeout: 4)", len(items), allocs)
	}
}

// A dead worker's sessions are left to its takeover for GoneGrace after a
// Keeper first knows it gone: its reconcile listings show none of them,
// then all; EndGoneGrace (the takeover could not place them all) shows them
// at once, to that Keeper only.
func TestGoneWorkersSessionsLeftToItsTakeoverForTheGrace(t *testing.T) {
	r := newRig(t, started("s1"), started("s2"))
	a, _ := r.keeper("wa")
	r.acquire(a, "s1")
	r.acquire(a, "s2")
	const grace = 2 * time.Minute
	withGrace := func(c *lease.Config) { c.GoneGrace = grace }
	b, _ := r.keeperWith("wb", withGrace)
	c, _ := r.keeperWith("wc", withGrace)
	r.declareDead("wa", "wb")
	listed := func(k *lease.Keeper) []string {
		t.Helper()
		cands, err := k.Orphans(r.ctx, 10)
		if err != nil {
			t.Fatalf("orphans: %v", err)
		}
		ids := candidateIDs(cands)
		slices.Sort(ids)
		return ids
	}
	if got := listed(b); len(got) != 0 {
		t.Fatalf("listed %v of a worker just declared dead: want none within the grace", got)
	}
	_ = listed(c) // c first knows wa gone now
	r.clk.Advance(grace / 2)
	b.EndGoneGrace("wa")
	if got := listed(b); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("listed %v after its takeover ended the grace: want s1 and s2", got)
	}
	if got := listed(c); len(got) != 0 {
		t.Fatalf("another worker listed %v within its grace: want none", got)
	}
	r.clk.Advance(grace / 2)
	if got := listed(c); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("listed %v at the grace's end: want s1 and s2", got)
	}
	// Without a grace (the default): at once.
	d, _ := r.keeper("wd")
	if got := listed(d); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("listed %v without a grace: want s1 and s2", got)
	}
	// With a grace while the work queue is quiet (Config.Flowing false:
	// nobody is announcing sessions): at once; while it flows: none.
	flowing := false
	e, _ := r.keeperWith("we", func(c *lease.Config) { c.GoneGrace, c.Flowing = grace, func() bool { return flowing } })
	if got := listed(e); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("listed %v with the work queue quiet: want s1 and s2", got)
	}
	flowing = true
	if got := listed(e); len(got) != 0 {
		t.Fatalf("listed %v with the work queue flowing, within the grace: want none", got)
	}
}

// The grace lasts past GoneGrace, up to GoneGraceMax, while the work queue
// brings announced tenures (Config.Announcing), and only then: the
// announcements of a mass death are taken over minutes.
func TestGoneGraceLastsWhileAnnouncementsAreTaken(t *testing.T) {
	r := newRig(t, started("s1"))
	a, _ := r.keeper("wa")
	r.acquire(a, "s1")
	const grace, max = 2 * time.Minute, 5 * time.Minute
	announcing := true
	b, _ := r.keeperWith("wb", func(c *lease.Config) {
		c.GoneGrace, c.GoneGraceMax = grace, max
		c.Flowing = func() bool { return true }
		c.Announcing = func() bool { return announcing }
	})
	r.declareDead("wa", "wb")
	listed := func() []string {
		t.Helper()
		cands, err := b.Orphans(r.ctx, 10)
		if err != nil {
			t.Fatalf("orphans: %v", err)
		}
		return candidateIDs(cands)
	}
	if got := listed(); len(got) != 0 {
		t.Fatalf("listed %v just after the death: want none", got)
	}
	r.clk.Advance(grace + time.Second)
	if got := listed(); len(got) != 0 {
		t.Fatalf("listed %v past GoneGrace while announcements are taken: want none", got)
	}
	announcing = false
	if got := listed(); !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("listed %v past GoneGrace with no announcement taken: want s1", got)
	}
	announcing = true
	r.clk.Advance(max - grace)
	if got := listed(); !slices.Equal(got, []string{"s1"}) {
		t.Fatalf("listed %v at GoneGraceMax while announcements are still taken: want s1", got)
	}
}

func TestGoneGraceHolds(t *testing.T) {
	const grace, max = 2 * time.Minute, 5 * time.Minute
	for _, c := range []struct {
		known               time.Duration
		flowing, announcing bool
		want                bool
	}{
		{time.Minute, true, false, true},
		{time.Minute, false, false, false},
		{time.Minute, false, true, true},
		{grace, true, false, false},
		{grace, true, true, true},
		{max - time.Nanosecond, false, true, true},
		{max, true, true, false},
	} {
		if got := lease.GoneGraceHolds(c.known, grace, max, c.flowing, c.announcing); got != c.want {
			t.Errorf("GoneGraceHolds(%s, flowing %v, announcing %v) = %v, want %v", c.known, c.flowing, c.announcing, got, c.want)
		}
	}
	// Without a max (or one below the grace), no extension.
	if lease.GoneGraceHolds(grace, grace, 0, true, true) {
		t.Error("GoneGraceHolds extended the grace without a max")
	}
}
