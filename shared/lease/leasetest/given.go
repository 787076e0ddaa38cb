package leasetest

import (
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// runGiven is the suite's part on a tenure its owner hands to one worker
// directly (lease.Given: a directed hand-off without a release), Run calls
// it: the receiver takes the session from the live tenure named, records
// the owner's final checkpoint as the resume point, fences the giver, keeps
// a standby that is not the receiver, and takes nothing a stop, another
// tenure or an older checkpoint makes it not the giver's to give.
func runGiven(t *testing.T, newHarness func(t *testing.T) Harness, opts Options) {
	acquireGiven := func(t *testing.T, h Harness, id, owner string, g lease.Given) (lease.Item, error) {
		t.Helper()
		var it lease.Item
		err := persist(func() (err error) { it, err = h.Store.Acquire(ctx(t), id, owner, lease.From{Given: &g}); return err })
		return it, err
	}

	t.Run("GivenTenureTakenWhileItsOwnerIsAlive", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "given", "w1")
		id := tok.ConnectionID
		if err := persist(func() error { return h.Store.Checkpoint(ctx(t), tok, 5) }); err != nil {
			t.Fatal(err)
		}
		it, err := acquireGiven(t, h, id, "w2", lease.Given{Token: tok, Seq: 9})
		if err != nil {
			t.Fatalf("acquire of the given tenure: %v", err)
		}
		if it.Owner != "w2" || !opts.epochAfter(it.Epoch, tok.Epoch) || it.LastSeq != 9 || it.ReleaseSeq != 9 {
			t.Fatalf("acquired item: %+v, want w2's after epoch %d, resuming after the given seq 9", it, tok.Epoch)
		}
		got := mustGet(t, h.Store, id)
		if got.Owner != "w2" || got.Epoch != it.Epoch || got.LastSeq != 9 {
			t.Fatalf("get after the given acquire: %+v", got)
		}
		// The giver is fenced like any tenure taken from it.
		wantErr(t, "the giver's checkpoint", h.Store.Checkpoint(ctx(t), tok, 10), lease.ErrLeaseLost)
		wantErr(t, "the giver's fallback hand-off", h.Store.Handoff(ctx(t), tok, 9, "w2", now), lease.ErrLeaseLost)
		// The same tenure given twice takes nothing the second time.
		_, err = h.Store.Acquire(ctx(t), id, "w3", lease.From{Given: &lease.Given{Token: tok, Seq: 9}})
		wantHeld(t, "a given tenure no longer the session's", err, lease.Token{ConnectionID: id, Owner: "w2", Epoch: it.Epoch})
		// Without a final checkpoint the stored resume point stays.
		t2 := lease.Token{ConnectionID: id, Owner: "w2", Epoch: it.Epoch}
		it, err = acquireGiven(t, h, id, "w1", lease.Given{Token: t2, Seq: lease.NoSeq})
		if err != nil || it.Owner != "w1" || it.LastSeq != 9 {
			t.Fatalf("acquire of a tenure given without a checkpoint: %+v %v", it, err)
		}
	})

	t.Run("GivenTenureRefusals", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "givenno", "w1")
		id := tok.ConnectionID
		stale := lease.Token{ConnectionID: id, Owner: "w1", Epoch: tok.Epoch - 1}
		_, err := h.Store.Acquire(ctx(t), id, "w2", lease.From{Given: &lease.Given{Token: stale, Seq: 3}})
		wantHeld(t, "an older tenure given", err, tok)
		// Released with a later checkpoint (the giver's fallback landed
		// first and a later tenure's checkpoint is stored): never behind it.
		if err := persist(func() error { return h.Store.Handoff(ctx(t), tok, 20, "w2", now) }); err != nil {
			t.Fatal(err)
		}
		_, err = h.Store.Acquire(ctx(t), id, "w2", lease.From{Given: &lease.Given{Token: tok, Seq: 19}})
		wantErr(t, "a given seq behind the stored release_seq", err, lease.ErrSeqRegress)
		// The giver's fallback release reserved it for the receiver, who
		// takes it given or not.
		it, err := acquireGiven(t, h, id, "w2", lease.Given{Token: tok, Seq: 20})
		if err != nil || it.Owner != "w2" || it.LastSeq != 20 {
			t.Fatalf("the receiver's given acquire after the giver's fallback: %+v %v", it, err)
		}
		// A stop wins over the hand-off.
		_, t2 := acquired(t, h, "givenno", "w1")
		h.SetDesired(t, t2.ConnectionID, schema.StateStopped)
		_, err = h.Store.Acquire(ctx(t), t2.ConnectionID, "w2", lease.From{Given: &lease.Given{Token: t2, Seq: 1}})
		wantErr(t, "a stopped session given", err, lease.ErrStopped)
		if got := mustGet(t, h.Store, t2.ConnectionID); got.Owner != "w1" || got.Epoch != t2.Epoch {
			t.Fatalf("a refused given acquire wrote: %+v", got)
		}
	})

	t.Run("GivenTenureKeepsTheStandbyOfAnotherWorker", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "givensb", "w1")
		id := tok.ConnectionID
		var st lease.StandbyToken
		if err := persist(func() error {
			it, err := h.Store.AssignStandby(ctx(t), id, "w3", 1, nil)
			st = lease.StandbyToken{ConnectionID: id, Worker: "w3", Epoch: it.StandbyEpoch}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// Given to another worker than the standby's: not a takeover the
		// standby is preferred for; the standby stands by for the receiver.
		it, err := acquireGiven(t, h, id, "w2", lease.Given{Token: tok, Seq: 4})
		if err != nil || it.Owner != "w2" || it.Standby != "w3" || it.StandbyEpoch != st.Epoch {
			t.Fatalf("given to a worker that is not the standby: %+v %v", it, err)
		}
		// Given to the standby's worker: its promotion.
		t2 := lease.Token{ConnectionID: id, Owner: "w2", Epoch: it.Epoch}
		var promoted lease.Item
		err = persist(func() (err error) {
			promoted, err = h.Store.Acquire(ctx(t), id, "w3", lease.From{Given: &lease.Given{Token: t2, Seq: 6}, Standby: &st})
			return err
		})
		if err != nil || promoted.Owner != "w3" || promoted.Standby != "" || promoted.LastSeq != 6 {
			t.Fatalf("given to the standby: %+v %v", promoted, err)
		}
	})
}
