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
	// keyed acquires a fresh STARTED session for owner, its tenure keyed
	// with a secret (as the Keeper's acquires are), and returns the given
	// tenure that owner could hand on with seq.
	keyed := func(t *testing.T, h Harness, prefix, owner string, seq int64) lease.Given {
		t.Helper()
		id := NewID(prefix)
		h.Put(t, Started(id))
		secret := "secret-" + id
		var it lease.Item
		err := persist(func() (err error) {
			it, err = h.Store.Acquire(ctx(t), id, owner, lease.From{Key: lease.TenureKeyOf(secret)})
			return err
		})
		if err != nil {
			t.Fatalf("acquire %s: %v", id, err)
		}
		if it.TenureKey != lease.TenureKeyOf(secret) {
			t.Fatalf("acquired item's tenure key %q, want %q", it.TenureKey, lease.TenureKeyOf(secret))
		}
		return lease.Given{Token: lease.Token{ConnectionID: id, Owner: owner, Epoch: it.Epoch}, Seq: seq, Secret: secret}
	}
	// acquireGiven is the receiver's acquire of g, its own tenure keyed
	// with secret.
	acquireGiven := func(t *testing.T, h Harness, owner string, g lease.Given, secret string) (lease.Item, error) {
		t.Helper()
		var it lease.Item
		err := persist(func() (err error) {
			it, err = h.Store.Acquire(ctx(t), g.Token.ConnectionID, owner, lease.From{Given: &g, Key: lease.TenureKeyOf(secret)})
			return err
		})
		return it, err
	}

	t.Run("GivenTenureTakenWhileItsOwnerIsAlive", func(t *testing.T) {
		h := newHarness(t)
		g := keyed(t, h, "given", "w1", 9)
		tok, id := g.Token, g.Token.ConnectionID
		if err := persist(func() error { return h.Store.Checkpoint(ctx(t), tok, 5) }); err != nil {
			t.Fatal(err)
		}
		it, err := acquireGiven(t, h, "w2", g, "secret-w2")
		if err != nil {
			t.Fatalf("acquire of the given tenure: %v", err)
		}
		if it.Owner != "w2" || !opts.epochAfter(it.Epoch, tok.Epoch) || it.LastSeq != 9 || it.ReleaseSeq != 9 || it.TenureKey != lease.TenureKeyOf("secret-w2") {
			t.Fatalf("acquired item: %+v, want w2's after epoch %d, resuming after the given seq 9, keyed with w2's secret", it, tok.Epoch)
		}
		got := mustGet(t, h.Store, id)
		if got.Owner != "w2" || got.Epoch != it.Epoch || got.LastSeq != 9 {
			t.Fatalf("get after the given acquire: %+v", got)
		}
		// The giver is fenced like any tenure taken from it.
		wantErr(t, "the giver's checkpoint", h.Store.Checkpoint(ctx(t), tok, 10), lease.ErrLeaseLost)
		wantErr(t, "the giver's fallback hand-off", h.Store.Handoff(ctx(t), tok, 9, "w2", now), lease.ErrLeaseLost)
		w2 := lease.Token{ConnectionID: id, Owner: "w2", Epoch: it.Epoch}
		// The same tenure given twice takes nothing the second time.
		_, err = h.Store.Acquire(ctx(t), id, "w3", lease.From{Given: &g})
		wantHeld(t, "a given tenure no longer the session's", err, w2)
		// w2's tenure with the secret of w1's: not given.
		_, err = h.Store.Acquire(ctx(t), id, "w3", lease.From{Given: &lease.Given{Token: w2, Seq: 9, Secret: g.Secret}})
		wantHeld(t, "a tenure named with another tenure's secret", err, w2)
		// Without a final checkpoint the stored resume point stays; an
		// acquire without a key leaves none to give with.
		var again lease.Item
		err = persist(func() (err error) {
			again, err = h.Store.Acquire(ctx(t), id, "w1", lease.From{Given: &lease.Given{Token: w2, Seq: lease.NoSeq, Secret: "secret-w2"}})
			return err
		})
		if err != nil || again.Owner != "w1" || again.LastSeq != 9 || again.TenureKey != "" {
			t.Fatalf("acquire of a tenure given without a checkpoint, keyed with nothing: %+v %v", again, err)
		}
		w1 := lease.Token{ConnectionID: id, Owner: "w1", Epoch: again.Epoch}
		_, err = h.Store.Acquire(ctx(t), id, "w2", lease.From{Given: &lease.Given{Token: w1, Seq: 9}})
		wantHeld(t, "a tenure acquired without a key, given", err, w1)
	})

	t.Run("GivenTenureRefusals", func(t *testing.T) {
		h := newHarness(t)
		g := keyed(t, h, "givenno", "w1", 3)
		tok, id := g.Token, g.Token.ConnectionID
		_, err := h.Store.Acquire(ctx(t), id, "w2", lease.From{Given: &lease.Given{Token: tok, Seq: 3, Secret: "a guess"}})
		wantHeld(t, "a live tenure named without its secret (a peer's bug, or anyone reaching the admin port)", err, tok)
		stale := g
		stale.Token.Epoch--
		_, err = h.Store.Acquire(ctx(t), id, "w2", lease.From{Given: &stale})
		wantHeld(t, "an older tenure given", err, tok)
		if got := mustGet(t, h.Store, id); got.Owner != "w1" || got.Epoch != tok.Epoch {
			t.Fatalf("a refused given acquire wrote: %+v", got)
		}
		// Released with a later checkpoint (the giver's fallback landed
		// first): never behind it.
		if err := persist(func() error { return h.Store.Handoff(ctx(t), tok, 20, "w2", now) }); err != nil {
			t.Fatal(err)
		}
		behind := g
		behind.Seq = 19
		_, err = h.Store.Acquire(ctx(t), id, "w2", lease.From{Given: &behind})
		wantErr(t, "a given seq behind the stored release_seq", err, lease.ErrSeqRegress)
		// The giver's fallback release reserved it for the receiver, who
		// takes it given or not.
		g.Seq = 20
		it, err := acquireGiven(t, h, "w2", g, "secret-w2")
		if err != nil || it.Owner != "w2" || it.LastSeq != 20 {
			t.Fatalf("the receiver's given acquire after the giver's fallback: %+v %v", it, err)
		}
		// A stop wins over the hand-off.
		g2 := keyed(t, h, "givenno", "w1", 1)
		h.SetDesired(t, g2.Token.ConnectionID, schema.StateStopped)
		_, err = h.Store.Acquire(ctx(t), g2.Token.ConnectionID, "w2", lease.From{Given: &g2})
		wantErr(t, "a stopped session given", err, lease.ErrStopped)
		if got := mustGet(t, h.Store, g2.Token.ConnectionID); got.Owner != "w1" || got.Epoch != g2.Token.Epoch {
			t.Fatalf("a refused given acquire wrote: %+v", got)
		}
	})

	t.Run("GivenTenureKeepsTheStandbyOfAnotherWorker", func(t *testing.T) {
		h := newHarness(t)
		g := keyed(t, h, "givensb", "w1", 4)
		id := g.Token.ConnectionID
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
		it, err := acquireGiven(t, h, "w2", g, "secret-w2")
		if err != nil || it.Owner != "w2" || it.Standby != "w3" || it.StandbyEpoch != st.Epoch {
			t.Fatalf("given to a worker that is not the standby: %+v %v", it, err)
		}
		// Given to the standby's worker: its promotion.
		g2 := lease.Given{Token: lease.Token{ConnectionID: id, Owner: "w2", Epoch: it.Epoch}, Seq: 6, Secret: "secret-w2"}
		var promoted lease.Item
		err = persist(func() (err error) {
			promoted, err = h.Store.Acquire(ctx(t), id, "w3", lease.From{Given: &g2, Standby: &st})
			return err
		})
		if err != nil || promoted.Owner != "w3" || promoted.Standby != "" || promoted.LastSeq != 6 {
			t.Fatalf("given to the standby: %+v %v", promoted, err)
		}
	})
}
