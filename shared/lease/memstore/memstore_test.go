package memstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
)

func TestConformance(t *testing.T) {
	s := memstore.New()
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		return leasetest.InMemoryHarness(s)
	}, leasetest.Options{RaceRounds: 200, Racers: 64})
}

// With SetIndexLag each index answers from the table as it was its lag ago
// on the store's clock; the consistent reads (Get, GetWorker) never lag.
func TestIndexLag(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	s := memstore.New()
	s.Put(leasetest.Started("old"))
	s.Put(leasetest.Started("a"))
	if err := s.Register(ctx, leasetest.Worker("w")); err != nil {
		t.Fatal(err)
	}
	s.SetIndexLag(clk, memstore.IndexLag{Owner: 10 * time.Second, Unowned: 5 * time.Second, WorkerList: 2 * time.Second})
	owned := func(owner string) []string {
		got, err := s.OwnedBy(ctx, owner, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, o := range got {
			ids = append(ids, o.ConnectionID)
		}
		return ids
	}
	unowned := func() []string {
		ids, err := s.Unowned(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	listed := func(list string) []string {
		ids, err := s.ListWorkers(ctx, list, 0)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	// Writes before SetIndexLag are indexed.
	if got := unowned(); !slices.Equal(got, []string{"a", "old"}) {
		t.Fatalf("unowned before any lagged write: %v", got)
	}
	if got := listed(schema.WorkerListAlive); !slices.Equal(got, []string{"w"}) {
		t.Fatalf("alive before any lagged write: %v", got)
	}
	if _, err := s.Acquire(ctx, "a", "w", lease.From{}); err != nil {
		t.Fatal(err)
	}
	if it, _ := s.Get(ctx, "a"); it.Owner != "w" {
		t.Fatalf("a consistent read lags: %+v", it)
	}
	if err := s.DeclareDead(ctx, "w", 1, 0, "obs", 0); err != nil {
		t.Fatal(err)
	}
	if got := owned("w"); len(got) != 0 {
		t.Fatalf("by_owner shows an acquire at once: %v", got)
	}
	if got := listed(schema.WorkerListGone); len(got) != 0 {
		t.Fatalf("by_worker_list shows a death at once: %v", got)
	}
	clk.Advance(2 * time.Second)
	if got := listed(schema.WorkerListGone); !slices.Equal(got, []string{"w"}) {
		t.Fatalf("GONE after the list's lag: %v", got)
	}
	if got := unowned(); !slices.Equal(got, []string{"a", "old"}) {
		t.Fatalf("by_unowned 2 s after the acquire: %v", got)
	}
	clk.Advance(3 * time.Second)
	if got := unowned(); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("by_unowned after its lag: %v", got)
	}
	if got := owned("w"); len(got) != 0 {
		t.Fatalf("by_owner 5 s after the acquire: %v", got)
	}
	clk.Advance(5 * time.Second)
	if got := owned("w"); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("by_owner after its lag: %v", got)
	}
	// A lag episode ends: the indexes are current again.
	if _, err := s.Acquire(ctx, "old", "w2", lease.From{}); err != nil {
		t.Fatal(err)
	}
	s.SetIndexLag(nil, memstore.IndexLag{})
	if got := owned("w2"); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("by_owner without lag: %v", got)
	}
}

// The memory store keeps the configuration in the item (it need not split
// it): the spec suite holds all the same.
func TestSpecConformance(t *testing.T) {
	s := memstore.New()
	leasetest.RunSpec(t, func(*testing.T) leasetest.Harness { return leasetest.InMemoryHarness(s) })
}

// The worker's audit lists its sessions every AuditEvery: OwnedBy
// allocates one array of the listing's size, however many sessions the
// owner holds, and sorts it in place (appending to a growing array
// allocated about five times the listing, the capacity bench's largest
// steady allocation per session).
func TestOwnedByAllocatesOneArray(t *testing.T) {
	ctx := context.Background()
	s := ownedStore(3000)
	got, err := s.OwnedBy(ctx, "w", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2000 || cap(got) != 2000 {
		t.Fatalf("%d owned (cap %d), want 2000 (cap 2000)", len(got), cap(got))
	}
	if !slices.IsSortedFunc(got, func(a, b lease.Owned) int { return strings.Compare(a.ConnectionID, b.ConnectionID) }) {
		t.Fatal("not sorted by connection id")
	}
	for _, o := range got {
		if o.Owner != "w" || o.Epoch != 1 || o.DesiredState != schema.StateStarted {
			t.Fatalf("entry %+v", o)
		}
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = s.OwnedBy(ctx, "w", 0) }); n > 1 {
		t.Fatalf("OwnedBy of 2,000 sessions: %.0f allocations, want 1", n)
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = s.OwnedBy(ctx, "nobody", 0) }); n != 0 {
		t.Fatalf("OwnedBy of none: %.0f allocations, want 0", n)
	}
}

// The audit lists into its last pass's array (lease.OwnedByAppender):
// with the room, AppendOwnedBy allocates nothing, appends after what dst
// holds, and lists what OwnedBy does.
func TestAppendOwnedByReusesItsArray(t *testing.T) {
	ctx := context.Background()
	s := ownedStore(300)
	want, err := s.OwnedBy(ctx, "w", 0)
	if err != nil {
		t.Fatal(err)
	}
	head := lease.Owned{Token: lease.Token{ConnectionID: "zz-head"}}
	buf := make([]lease.Owned, 1, 1+len(want))
	buf[0] = head
	got, err := s.AppendOwnedBy(ctx, buf, "w")
	if err != nil {
		t.Fatal(err)
	}
	if &got[0] != &buf[0] || got[0] != head || !slices.Equal(got[1:], want) {
		t.Fatalf("AppendOwnedBy: %d entries (first %+v), want dst's array, its entry, then OwnedBy's %d", len(got), got[0], len(want))
	}
	if n := testing.AllocsPerRun(20, func() { got, _ = s.AppendOwnedBy(ctx, got[:0], "w") }); n != 0 {
		t.Fatalf("AppendOwnedBy of %d sessions into room for them: %.0f allocations, want 0", len(want), n)
	}
}

// ownedStore holds n started sessions in a shuffled order, two in three
// owned by "w" at epoch 1, the others by "other".
func ownedStore(n int) *memstore.Store {
	s := memstore.New()
	for i := range n {
		it := leasetest.Started(fmt.Sprintf("s-%05d", (i*7919)%n))
		it.Owner, it.Epoch = "w", 1
		if i%3 == 0 {
			it.Owner = "other"
		}
		s.Put(it)
	}
	return s
}
