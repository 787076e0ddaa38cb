package leasetest

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// BigSpec is a stored configuration with an Authorization header of
// headerBytes bytes (the cost benchmark's is 1,024): a session item that
// held it inline would be billed 2 write units a write.
func BigSpec(id string, headerBytes int) string {
	return `{"ws_url":"wss://feed.example/` + id + `","headers":{"Authorization":"Bearer ` + strings.Repeat("x", headerBytes) + `"}}`
}

// RunSpec is the conformance suite of the session's configuration: the
// stores keep it out of the session item (dynamostore: a spec item of its
// own), and an acquire and a Get still return it; a start that changes it
// is seen by the next acquire and Get; a session stored the older way
// (inline) still works.
func RunSpec(t *testing.T, newHarness func(t *testing.T) Harness) {
	acquire := func(t *testing.T, h Harness, id, owner string, from lease.From) lease.Item {
		t.Helper()
		var it lease.Item
		err := persist(func() (err error) { it, err = h.Store.Acquire(ctx(t), id, owner, from); return err })
		if err != nil {
			t.Fatalf("acquire %s by %s: %v", id, owner, err)
		}
		return it
	}
	release := func(t *testing.T, h Harness, tok lease.Token) {
		t.Helper()
		if err := persist(func() error { return h.Store.Release(ctx(t), tok, lease.NoSeq) }); err != nil {
			t.Fatalf("release %s: %v", tok, err)
		}
	}

	t.Run("AcquiredWithItsSpec", func(t *testing.T) {
		h := newHarness(t)
		id := NewID("spec")
		want := Started(id)
		want.Spec = BigSpec(id, 1024)
		h.Put(t, want)
		it := acquire(t, h, id, "w1", lease.From{})
		if it.Spec != want.Spec || it.Generation != 1 || it.CheckpointEvery != want.CheckpointEvery {
			t.Fatalf("acquired: spec %d bytes (want %d), generation %d, checkpoint every %s", len(it.Spec), len(want.Spec), it.Generation, it.CheckpointEvery)
		}
		if got := mustGet(t, h.Store, id); got.Spec != want.Spec || got.Owner != "w1" || got.Epoch != it.Epoch {
			t.Fatalf("get after acquire: spec %d bytes (want %d), owner %q epoch %d", len(got.Spec), len(want.Spec), got.Owner, got.Epoch)
		}
	})

	t.Run("NewGenerationSeenByGetAndNextAcquire", func(t *testing.T) {
		h := newHarness(t)
		if h.SetSpec == nil {
			t.Fatal("the harness has no SetSpec")
		}
		id := NewID("respec")
		first := Started(id)
		first.Spec = BigSpec(id, 1024)
		h.Put(t, first)
		it := acquire(t, h, id, "w1", lease.From{})
		second := BigSpec(id, 900) + " "
		h.SetSpec(t, id, second)
		got := mustGet(t, h.Store, id)
		if got.Spec != second || got.Generation != 2 || got.Owner != "w1" {
			t.Fatalf("get after a new configuration: spec %d bytes (want %d), generation %d, owner %q", len(got.Spec), len(second), got.Generation, got.Owner)
		}
		release(t, h, lease.Token{ConnectionID: id, Owner: "w1", Epoch: it.Epoch})
		again := acquire(t, h, id, "w2", lease.From{})
		if again.Spec != second || again.Generation != 2 {
			t.Fatalf("next acquire: spec %d bytes (want %d), generation %d", len(again.Spec), len(second), again.Generation)
		}
		// And back to the first configuration (a new generation again).
		h.SetSpec(t, id, first.Spec)
		if got := mustGet(t, h.Store, id); got.Spec != first.Spec || got.Generation != 3 {
			t.Fatalf("get after the first configuration again: spec %d bytes, generation %d", len(got.Spec), got.Generation)
		}
	})

	t.Run("GetHeadIsGetWithoutTheSpec", func(t *testing.T) {
		h := newHarness(t)
		put := h.Put
		if h.PutInline != nil {
			put = h.PutInline
		}
		for i, p := range []func(testing.TB, lease.Item){h.Put, put} {
			id := NewID("head")
			want := Started(id)
			want.Spec = BigSpec(id, 1024)
			p(t, want)
			it := acquire(t, h, id, "w1", lease.From{})
			tok := lease.Token{ConnectionID: id, Owner: "w1", Epoch: it.Epoch}
			if err := h.Store.Checkpoint(ctx(t), tok, 42); err != nil {
				t.Fatal(err)
			}
			steps := []string{"after a checkpoint"}
			if h.SetSpec != nil {
				h.SetSpec(t, id, want.Spec+" ")
				steps = append(steps, "after a new configuration")
			}
			for _, step := range steps {
				full := mustGet(t, h.Store, id)
				head, err := lease.GetHead(ctx(t), h.Store, id)
				if err != nil {
					t.Fatalf("item %d, %s: get head: %v", i, step, err)
				}
				if head.Spec != "" {
					t.Fatalf("item %d, %s: the head has a spec (%d bytes)", i, step, len(head.Spec))
				}
				full.Spec = ""
				if !reflect.DeepEqual(head, full) {
					t.Fatalf("item %d, %s: get head\n%+v\nwant get's without the spec\n%+v", i, step, head, full)
				}
			}
		}
		if _, err := lease.GetHead(ctx(t), h.Store, NewID("missing")); !errors.Is(err, lease.ErrNotFound) {
			t.Fatalf("get head of a missing session: %v, want ErrNotFound", err)
		}
	})

	t.Run("InlineSpecStillWorks", func(t *testing.T) {
		h := newHarness(t)
		put := h.Put
		if h.PutInline != nil {
			put = h.PutInline
		}
		id := NewID("inline")
		want := Started(id)
		want.Spec = BigSpec(id, 1024)
		put(t, want)
		if got := mustGet(t, h.Store, id); got.Spec != want.Spec || got.Generation != 1 {
			t.Fatalf("get of an inline item: spec %d bytes (want %d), generation %d", len(got.Spec), len(want.Spec), got.Generation)
		}
		it := acquire(t, h, id, "w1", lease.From{})
		if it.Spec != want.Spec {
			t.Fatalf("acquire of an inline item: spec %d bytes, want %d", len(it.Spec), len(want.Spec))
		}
		release(t, h, lease.Token{ConnectionID: id, Owner: "w1", Epoch: it.Epoch})
		if h.SetSpec != nil {
			// A start over an inline item moves it to a spec item.
			h.SetSpec(t, id, want.Spec+" ")
			again := acquire(t, h, id, "w2", lease.From{})
			if again.Spec != want.Spec+" " || again.Generation != 2 {
				t.Fatalf("acquire after a start over an inline item: spec %d bytes, generation %d", len(again.Spec), again.Generation)
			}
		}
	})
}
