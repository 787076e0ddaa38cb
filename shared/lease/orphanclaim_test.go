package lease_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// On the first sight of an unowned session exactly the first
// OrphanClaimers workers by rendezvous hashing of its id may try it (the
// ranking Watchers gives: one ranking, not a second copy), the same ones
// whichever worker asks; on a later sighting, anyone; with no alive list
// yet (before the first refresh), the asker alone counts and may.
func TestMayClaimUnownedFirstFewThenAnyone(t *testing.T) {
	var alive []string
	for i := range 100 {
		alive = append(alive, fmt.Sprintf("w-%03d", i))
	}
	for i := range 300 {
		id := fmt.Sprintf("s-%06d", i)
		var may []string
		for _, w := range alive {
			if lease.MayClaimUnowned(id, w, alive, false) {
				may = append(may, w)
			}
			if !lease.MayClaimUnowned(id, w, alive, true) {
				t.Fatalf("%s relisted: %s may not claim it; want anyone", id, w)
			}
		}
		want := lease.Watchers(id, alive, lease.OrphanClaimers)
		slices.Sort(want)
		if !slices.Equal(may, want) {
			t.Fatalf("%s on first sight: %v may claim it, want its first %d by rendezvous %v", id, may, lease.OrphanClaimers, want)
		}
	}
	if !lease.MayClaimUnowned("s-1", "w-new", nil, false) {
		t.Fatal("no alive list: the asker may not claim; want it may")
	}
	// A worker missing from its own (lagging) list ranks as if it were in it.
	for i := range 50 {
		id := fmt.Sprintf("s-%06d", i)
		top := lease.Watchers(id, append(slices.Clone(alive), "w-new"), lease.OrphanClaimers)
		if got := lease.MayClaimUnowned(id, "w-new", alive, false); got != slices.Contains(top, "w-new") {
			t.Fatalf("%s: w-new missing from alive may claim %v; ranked among %v", id, got, top)
		}
	}
}

// A listing marks each unowned session Relisted when an earlier listing of
// the same Keeper showed it unowned too, and MayClaim answers by the rule
// for it (a dead worker's session, always).
func TestOrphansMarksSessionsListedBefore(t *testing.T) {
	r := newRig(t, started("a"))
	k, _ := r.keeper("wa")
	r.refresh(k)
	first, err := k.Orphans(r.ctx, 10)
	if err != nil || len(first) != 1 || first[0].Relisted {
		t.Fatalf("first listing %+v, %v: want a, not relisted", first, err)
	}
	r.store.Put(started("b"))
	second, err := k.Orphans(r.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range second {
		got[c.ConnectionID] = c.Relisted
		if !k.MayClaim(c) && c.Relisted {
			t.Fatalf("%s relisted but MayClaim false", c.ConnectionID)
		}
	}
	if len(got) != 2 || !got["a"] || got["b"] {
		t.Fatalf("second listing relisted %v, want a true, b false", got)
	}
	// Alone in the fleet, wa ranks first for anything.
	if !k.MayClaim(lease.Candidate{ConnectionID: "b"}) {
		t.Fatal("the only alive worker may not claim a fresh orphan")
	}
	if !k.MayClaim(lease.Candidate{ConnectionID: "c", Prev: &lease.Token{ConnectionID: "c", Owner: "w-dead", Epoch: 1}}) {
		t.Fatal("a dead worker's session may not be claimed")
	}
}

// Issue 37: with UnownedGrace (a worker that consumes the work queue), a
// session is Fresh on every listing within the grace of the first that
// showed it (a kicked pass's included), and MayClaim leaves it to the fast
// path; the first listing past the grace is its first claimable sight
// (not Relisted: the rendezvous rule applies to it), a later one relists
// it. A session first seen later is fresh on its own clock.
func TestFreshUnownedLeftToTheFastPathForTheGrace(t *testing.T) {
	r := newRig(t, started("a"))
	k := r.graceKeeper(t)
	list := func(step time.Duration) map[string]lease.Candidate {
		t.Helper()
		r.clk.Advance(step)
		cands, err := k.Orphans(r.ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]lease.Candidate{}
		for _, c := range cands {
			out[c.ConnectionID] = c
		}
		return out
	}
	want := func(when string, got map[string]lease.Candidate, id string, fresh, relisted bool) {
		t.Helper()
		c, ok := got[id]
		if !ok {
			t.Fatalf("%s: %s not listed (%v)", when, id, got)
		}
		if c.Fresh != fresh || c.Relisted != relisted || k.MayClaim(c) == fresh {
			t.Fatalf("%s: %s fresh %v relisted %v may claim %v; want fresh %v relisted %v may claim %v",
				when, id, c.Fresh, c.Relisted, k.MayClaim(c), fresh, relisted, !fresh)
		}
	}
	want("first sight", list(0), "a", true, false)
	want("a kicked pass 1 s later", list(time.Second), "a", true, false)
	r.store.Put(started("b"))
	got := list(1500 * time.Millisecond) // 2.5 s after a's first sight
	want("a at the grace", got, "a", false, false)
	want("b on first sight", got, "b", true, false)
	got = list(5 * time.Second)
	want("a on the next pass", got, "a", false, true)
	want("b on its next pass", got, "b", false, false)
}

// A session the Keeper acquires is no orphan of its listings any more: its
// sighting is forgotten (a worker at capacity lists nothing, so it would
// otherwise stay), and when it is unowned again (released), its next
// listing is a first sight, fresh for the grace, not a relisting of the
// orphan it was before the claim.
func TestAClaimForgetsTheSessionsSighting(t *testing.T) {
	r := newRig(t, started("a"))
	k := r.graceKeeper(t)
	list := func(step time.Duration) lease.Candidate {
		t.Helper()
		r.clk.Advance(step)
		cands, err := k.Orphans(r.ctx, 10)
		if err != nil || len(cands) != 1 || cands[0].ConnectionID != "a" {
			t.Fatalf("listing: %+v %v", cands, err)
		}
		return cands[0]
	}
	if c := list(0); !c.Fresh {
		t.Fatalf("first sight: %+v", c)
	}
	if c := list(5 * time.Second); c.Fresh || !c.Seen {
		t.Fatalf("past the grace, listed again: %+v", c)
	}
	h, err := k.Acquire(r.ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Release(r.ctx, h); err != nil {
		t.Fatal(err)
	}
	if c := list(time.Second); !c.Fresh || c.Relisted || c.Seen {
		t.Fatalf("unowned again after this Keeper's tenure: %+v, want a first sight", c)
	}
}

// graceKeeper is a registered Keeper "wa" that consumes the work queue
// (UnownedGrace 2.5 s), its alive list read.
func (r *rig) graceKeeper(t *testing.T) *lease.Keeper {
	t.Helper()
	cfg := lease.DefaultConfig("wa")
	cfg.UnownedGrace = 2500 * time.Millisecond
	k, err := lease.NewKeeper(r.store, r.clk, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.refresh(k)
	return k
}

// Each worker visits the GONE list in its own order (GoneOrder), a
// permutation of it the same on every call: the survivors of a lost AZ
// start at different dead workers instead of all at the list's first, and
// no dead worker is the first of many more survivors than an even spread
// gives it.
func TestGoneOrderSpreadsTheSurvivorsOverTheDead(t *testing.T) {
	var dead []string
	for i := range 334 {
		dead = append(dead, fmt.Sprintf("w-%03d", 3*i))
	}
	firsts := map[string]int{}
	for i := range 666 {
		self := fmt.Sprintf("w-%03d", 3*(i/2)+1+i%2)
		order := slices.Clone(dead)
		lease.GoneOrder(self, order)
		again := slices.Clone(dead)
		slices.Reverse(again)
		lease.GoneOrder(self, again)
		if !slices.Equal(order, again) {
			t.Fatalf("%s: two orders of one list: %v and %v", self, order[:5], again[:5])
		}
		sorted := slices.Clone(order)
		slices.Sort(sorted)
		if !slices.Equal(sorted, dead) {
			t.Fatalf("%s: the order is not a permutation of the GONE list", self)
		}
		firsts[order[0]]++
	}
	// 666 survivors over 334 dead: 2 each on average; a list in one
	// order for everyone gives one of them all 666.
	most := 0
	for _, n := range firsts {
		most = max(most, n)
	}
	if len(firsts) < 200 || most > 12 {
		t.Fatalf("first visits spread over %d of 334 dead workers, at most %d on one: want them spread (the same order everywhere puts 666 on one)", len(firsts), most)
	}
}
