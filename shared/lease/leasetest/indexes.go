package leasetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// runIndexes: the listings: the indexes within their lag bound, by_unowned
// and by_owner.
func runIndexes(t *testing.T, newHarness func(t *testing.T) Harness, opts Options) {
	// The indexes may lag the table (DynamoDB's global secondary indexes are
	// eventually consistent), but within lease.Config.IndexLagBound of a
	// write they show it: the assumption a GONE worker's move to DONE rests
	// on (lease.MayMarkDone). A store (or a model of DynamoDB in front of
	// one) that breaks it fails here.
	t.Run("IndexesShowWritesWithinTheLagBound", func(t *testing.T) {
		h := newHarness(t)
		within := func(what string, ok func() bool) { t.Helper(); eventually(t, what+": not in the index", ok) }
		w := register(t, h, "lagged")
		_, tok := acquired(t, h, "lag", w)
		within("an acquire in by_owner", func() bool { _, ok := ownedBy(t, h.Store, w)[tok.ConnectionID]; return ok })
		within("an acquire out of by_unowned", func() bool { return !unowned(t, h.Store)[tok.ConnectionID] })
		if err := h.Store.Release(ctx(t), tok, lease.NoSeq); err != nil {
			t.Fatal(err)
		}
		within("a release out of by_owner", func() bool { _, ok := ownedBy(t, h.Store, w)[tok.ConnectionID]; return !ok })
		within("a release in by_unowned", func() bool { return unowned(t, h.Store)[tok.ConnectionID] })
		if err := h.Store.DeclareDead(ctx(t), w, 1, 0, "obs", now); err != nil {
			t.Fatal(err)
		}
		within("a death in the GONE list", func() bool { return listed(t, h.Store, schema.WorkerListGone)[w] })
		if err := h.Store.MarkDone(ctx(t), w); err != nil {
			t.Fatal(err)
		}
		within("a done record in the DONE list", func() bool {
			return listed(t, h.Store, schema.WorkerListDone)[w] && !listed(t, h.Store, schema.WorkerListGone)[w]
		})
	})

	t.Run("UnownedAndOwnedBy", func(t *testing.T) {
		h := newHarness(t)
		w := NewID("owner")
		var fresh, owned, released []string
		for i := 0; i < 12; i++ {
			id := NewID("idx")
			h.Put(t, Started(id))
			fresh = append(fresh, id)
		}
		for i := 0; i < 12; i++ {
			_, tok := acquired(t, h, "idx-owned", w)
			owned = append(owned, tok.ConnectionID)
		}
		for i := 0; i < 3; i++ {
			_, tok := acquired(t, h, "idx-released", w)
			if err := h.Store.Release(ctx(t), tok, lease.NoSeq); err != nil {
				t.Fatal(err)
			}
			released = append(released, tok.ConnectionID)
		}
		_, ftok := acquired(t, h, "idx-failed", w)
		if err := h.Store.Fail(ctx(t), ftok, 1, lease.NoSeq, "x", now); err != nil {
			t.Fatal(err)
		}
		stopped := NewID("idx-stopped")
		h.Put(t, Started(stopped))
		h.SetDesired(t, stopped, schema.StateStopped)
		// An owned session stopped stays owned (its owner releases it).
		_, stok := acquired(t, h, "idx-owned-stopped", w)
		h.SetDesired(t, stok.ConnectionID, schema.StateStopped)

		eventually(t, "the new and released sessions are not listed unowned, or the owned, FAILED and stopped ones are", func() bool {
			u := unowned(t, h.Store)
			for _, id := range append(slices.Clone(fresh), released...) {
				if !u[id] {
					return false
				}
			}
			for _, id := range append(slices.Clone(owned), ftok.ConnectionID, stopped, stok.ConnectionID) {
				if u[id] {
					return false
				}
			}
			return true
		})
		limited, err := h.Store.Unowned(ctx(t), 5)
		if err != nil || len(limited) != 5 {
			t.Fatalf("unowned with limit 5: %v %v", limited, err)
		}
		var ob map[string]lease.Owned
		eventually(t, fmt.Sprintf("owned by %s: not the %d owned sessions and the stopped one", w, len(owned)), func() bool {
			ob = ownedBy(t, h.Store, w)
			for _, id := range owned {
				if _, ok := ob[id]; !ok {
					return false
				}
			}
			return len(ob) == len(owned)+1 && ob[stok.ConnectionID].DesiredState == schema.StateStopped
		})
		for _, id := range owned {
			if o := ob[id]; o.Owner != w || !opts.epochAfter(o.Epoch, 0) || o.DesiredState != schema.StateStarted || o.Generation != 1 {
				t.Fatalf("owned entry %s: %+v", id, o)
			}
		}
		if o := ob[stok.ConnectionID]; o.DesiredState != schema.StateStopped {
			t.Fatalf("the stopped owned session's entry: %+v", o)
		}
		page, err := h.Store.OwnedBy(ctx(t), w, 4)
		if err != nil || len(page) != 4 {
			t.Fatalf("owned by with limit 4: %v %v", page, err)
		}
		if got, err := h.Store.OwnedBy(ctx(t), NewID("nobody"), 0); err != nil || len(got) != 0 {
			t.Fatalf("owned by nobody: %v %v", got, err)
		}
		// A store that lists into its caller's array (the audit's,
		// lease.OwnedByAppender) lists what OwnedBy does, after what the
		// array holds.
		if a, ok := h.Store.(lease.OwnedByAppender); ok {
			all, err := h.Store.OwnedBy(ctx(t), w, 0)
			if err != nil {
				t.Fatal(err)
			}
			head := lease.Owned{Token: lease.Token{ConnectionID: NewID("head")}}
			got, err := a.AppendOwnedBy(ctx(t), []lease.Owned{head}, w)
			if err != nil || len(got) != len(all)+1 || got[0] != head || !slices.Equal(got[1:], all) {
				t.Fatalf("append owned by %s after one entry: %v %v; want it, then %v", w, got, err, all)
			}
		}
		// A start of the stopped, unowned session puts it back.
		h.SetDesired(t, stopped, schema.StateStarted)
		eventually(t, "a restarted unowned session is not listed unowned", func() bool { return unowned(t, h.Store)[stopped] })
	})
}
