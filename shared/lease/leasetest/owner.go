package leasetest

import (
	"errors"
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// runOwnerWrites: the owner's writes: the checkpoint, the release of a
// stopped session, a reconciler's disown, the directed hand-off.
func runOwnerWrites(t *testing.T, newHarness func(t *testing.T) Harness, opts Options) {
	t.Run("CheckpointNeverGoesBackwards", func(t *testing.T) {
		h := newHarness(t)
		a, tok := acquired(t, h, "seq", "w1")
		id := tok.ConnectionID
		if err := h.Store.Checkpoint(ctx(t), tok, lease.NoSeq); err != nil {
			t.Fatalf("checkpoint of nothing: %v", err)
		}
		if err := h.Store.Checkpoint(ctx(t), tok, 10); err != nil {
			t.Fatal(err)
		}
		if err := h.Store.Checkpoint(ctx(t), tok, 10); err != nil {
			t.Fatalf("repeating a checkpoint: %v", err)
		}
		wantErr(t, "checkpoint backwards", h.Store.Checkpoint(ctx(t), tok, 5), lease.ErrSeqRegress)
		if got := mustGet(t, h.Store, id); got.LastSeq != 10 || got.Owner != "w1" {
			t.Fatalf("after refused writes: %+v", got)
		}
		if err := h.Store.Release(ctx(t), tok, 12); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, h.Store, id)
		if got.LastSeq != 12 || got.Owner != "" || got.Epoch != a.Epoch {
			t.Fatalf("after release: %+v", got)
		}
		eventually(t, "a released STARTED session is not listed unowned", func() bool { return unowned(t, h.Store)[id] })
		// A release retried after it applied (its reply lost) is done; one
		// with a later checkpoint than the one recorded is not.
		if err := h.Store.Release(ctx(t), tok, 12); err != nil {
			t.Fatalf("release retried after it applied: %v", err)
		}
		if err := h.Store.Release(ctx(t), tok, lease.NoSeq); err != nil {
			t.Fatalf("release without checkpoint retried after it applied: %v", err)
		}
		wantErr(t, "release of an ended tenure with a later checkpoint", h.Store.Release(ctx(t), tok, 13), lease.ErrLeaseLost)
		// The next owner resumes from the checkpoint at once.
		b, err := h.Store.Acquire(ctx(t), id, "w2", lease.From{})
		if err != nil {
			t.Fatalf("acquire after release: %v", err)
		}
		if b.LastSeq != 12 || !opts.epochAfter(b.Epoch, a.Epoch) {
			t.Fatalf("next owner sees last_seq %d epoch %d", b.LastSeq, b.Epoch)
		}
		wantErr(t, "old tenure's checkpoint", h.Store.Checkpoint(ctx(t), tok, 20), lease.ErrLeaseLost)
		wantErr(t, "checkpoint of a session never acquired", h.Store.Checkpoint(ctx(t), lease.Token{ConnectionID: NewID("never"), Owner: "w1", Epoch: 1}, 1), lease.ErrLeaseLost)
		if got := mustGet(t, h.Store, id); got.LastSeq != 12 {
			t.Fatalf("last_seq %d, want 12", got.LastSeq)
		}
		// The release's final checkpoint (release_seq, on the session item)
		// never goes backwards either.
		tb := lease.Token{ConnectionID: id, Owner: "w2", Epoch: b.Epoch}
		wantErr(t, "release below the stored release_seq", h.Store.Release(ctx(t), tb, 11), lease.ErrSeqRegress)
		wantErr(t, "fail below the stored release_seq", h.Store.Fail(ctx(t), tb, 1, 11, "x", now), lease.ErrSeqRegress)
		if got := mustGet(t, h.Store, id); got.LastSeq != 12 || got.Owner != "w2" || got.Failed() {
			t.Fatalf("after refused releases: %+v", got)
		}
		// A checkpoint past the release_seq, then a takeover from a dead
		// owner: it resumes after the larger of the two.
		if err := h.Store.Checkpoint(ctx(t), tb, 40); err != nil {
			t.Fatalf("checkpoint by the tenure after a release: %v", err)
		}
		c3, err := h.Store.Acquire(ctx(t), id, "w3", lease.From{Prev: &tb})
		if err != nil || c3.LastSeq != 40 || !opts.epochAfter(c3.Epoch, b.Epoch) {
			t.Fatalf("takeover after a checkpoint past release_seq: %+v %v", c3, err)
		}
		wantErr(t, "dead tenure's checkpoint after the takeover", h.Store.Checkpoint(ctx(t), tb, 50), lease.ErrLeaseLost)
		t3 := lease.Token{ConnectionID: id, Owner: "w3", Epoch: c3.Epoch}
		if err := h.Store.Release(ctx(t), t3, 41); err != nil {
			t.Fatal(err)
		}
		if d, err := h.Store.Acquire(ctx(t), id, "w4", lease.From{}); err != nil || d.LastSeq != 41 {
			t.Fatalf("acquire after the second release: %+v %v", d, err)
		}
		// A seeded checkpoint of an earlier tenure is what a takeover resumes from.
		seeded := NewID("seeded")
		it := Started(seeded)
		it.Owner, it.Epoch, it.LastSeq = "gone-worker", 4, 77
		h.Put(t, it)
		c, err := h.Store.Acquire(ctx(t), seeded, "w2", lease.From{Prev: &lease.Token{ConnectionID: seeded, Owner: "gone-worker", Epoch: 4}})
		if err != nil || c.LastSeq != 77 || !opts.epochAfter(c.Epoch, 4) {
			t.Fatalf("takeover of a seeded tenure: %+v %v", c, err)
		}
	})

	t.Run("ReleaseOfAStoppedSession", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "relstop", "w1")
		h.SetDesired(t, tok.ConnectionID, schema.StateStopped)
		if err := h.Store.NoteError(ctx(t), tok, 1, "closing", now); err != nil {
			t.Fatalf("note error on a stopped session: %v", err)
		}
		if err := h.Store.Release(ctx(t), tok, 7); err != nil {
			t.Fatalf("release of a stopped session: %v", err)
		}
		got := mustGet(t, h.Store, tok.ConnectionID)
		if got.Owner != "" || got.LastSeq != 7 || got.DesiredState != schema.StateStopped || got.LastError != "closing" {
			t.Fatalf("after release: %+v", got)
		}
		eventually(t, "a released stopped session is listed unowned", func() bool { return !unowned(t, h.Store)[tok.ConnectionID] })
		eventually(t, "a released session is still listed under its owner", func() bool { _, ok := ownedBy(t, h.Store, "w1")[tok.ConnectionID]; return !ok })
		// Started again: unowned, and its next owner resumes at 7.
		h.SetDesired(t, tok.ConnectionID, schema.StateStarted)
		eventually(t, "a started unowned session is not listed unowned", func() bool { return unowned(t, h.Store)[tok.ConnectionID] })
		it, err := h.Store.Acquire(ctx(t), tok.ConnectionID, "w2", lease.From{})
		if err != nil || it.LastSeq != 7 || !opts.epochAfter(it.Epoch, tok.Epoch) {
			t.Fatalf("acquire after restart: %+v %v", it, err)
		}
		wantErr(t, "release of a missing session", h.Store.Release(ctx(t), lease.Token{ConnectionID: NewID("gone"), Owner: "w1", Epoch: 1}, lease.NoSeq), lease.ErrNotFound)
	})

	// Disown: a reconciler clears the owner of a stopped session whose
	// owner it saw not alive (it died before releasing), so that the next
	// start puts it in by_unowned; only that tenure, only while not STARTED.
	t.Run("DisownOfAStoppedSession", func(t *testing.T) {
		h := newHarness(t)
		w := NewID("disowned")
		_, tok := acquired(t, h, "disown", w)
		// Each index lags on its own (DynamoDB updates every GSI
		// asynchronously): by_owner catching up below says nothing of
		// by_unowned, which must first have taken in the acquire.
		eventually(t, "an acquired session is still listed unowned", func() bool { return !unowned(t, h.Store)[tok.ConnectionID] })
		if err := h.Store.Checkpoint(ctx(t), tok, 9); err != nil {
			t.Fatal(err)
		}
		h.SetDesired(t, tok.ConnectionID, schema.StateStopped)
		if err := h.Store.Disown(ctx(t), tok); err != nil {
			t.Fatalf("disown of a stopped session: %v", err)
		}
		got := mustGet(t, h.Store, tok.ConnectionID)
		if got.Owner != "" || got.Epoch != tok.Epoch || got.LastSeq != 9 || got.DesiredState != schema.StateStopped {
			t.Fatalf("after disown: %+v", got)
		}
		if err := h.Store.Disown(ctx(t), tok); err != nil {
			t.Fatalf("disown again (a retry of an applied attempt): %v", err)
		}
		eventually(t, "a disowned session is still listed under its dead owner", func() bool { _, ok := ownedBy(t, h.Store, w)[tok.ConnectionID]; return !ok })
		// Like a released stopped session: by_unowned settles on its own
		// lag (on the model a lagging index may still answer an older
		// image), so the check waits for it as ReleaseOfAStoppedSession's.
		eventually(t, "a disowned STOPPED session is listed unowned", func() bool { return !unowned(t, h.Store)[tok.ConnectionID] })
		// Started again: a start of a session without owner, in by_unowned;
		// the next tenure resumes at the checkpoint, above the dead epoch.
		h.SetDesired(t, tok.ConnectionID, schema.StateStarted)
		eventually(t, "a disowned session started again is not listed unowned", func() bool { return unowned(t, h.Store)[tok.ConnectionID] })
		it, err := h.Store.Acquire(ctx(t), tok.ConnectionID, "w2", lease.From{})
		if err != nil || it.LastSeq != 9 || !opts.epochAfter(it.Epoch, tok.Epoch) {
			t.Fatalf("acquire after the restart: %+v %v", it, err)
		}
		// Only that tenure: not a newer one, not another owner's.
		wantErr(t, "disown of an older tenure", h.Store.Disown(ctx(t), tok), lease.ErrLeaseLost)
		h.SetDesired(t, tok.ConnectionID, schema.StateStopped)
		wantErr(t, "disown naming another owner", h.Store.Disown(ctx(t), lease.Token{ConnectionID: tok.ConnectionID, Owner: w, Epoch: it.Epoch}), lease.ErrLeaseLost)
		if got := mustGet(t, h.Store, tok.ConnectionID); got.Owner != "w2" || got.Epoch != it.Epoch {
			t.Fatalf("refused disowns changed the session: %+v", got)
		}
		// Never a STARTED session (a start landed first): that one is taken
		// over from the tenure the refusal names.
		_, stok := acquired(t, h, "disown-started", w)
		wantHeld(t, "disown of a started session", h.Store.Disown(ctx(t), stok), stok)
		if got := mustGet(t, h.Store, stok.ConnectionID); got.Owner != w || got.Epoch != stok.Epoch {
			t.Fatalf("a refused disown changed the started session: %+v", got)
		}
		wantErr(t, "disown of a missing session", h.Store.Disown(ctx(t), lease.Token{ConnectionID: NewID("gone"), Owner: w, Epoch: 1}), lease.ErrNotFound)
	})

	t.Run("DirectedHandoff", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "handoff", "w1")
		if err := h.Store.Handoff(ctx(t), tok, 11, "w2", now); err != nil {
			t.Fatalf("hand off: %v", err)
		}
		got := mustGet(t, h.Store, tok.ConnectionID)
		if got.Owner != "" || got.HandoffTo != "w2" || got.HandoffAtMs != now || got.LastSeq != 11 {
			t.Fatalf("after the hand-off: %+v", got)
		}
		if err := h.Store.Handoff(ctx(t), tok, 11, "w2", now); err != nil {
			t.Fatalf("hand-off retried after it applied: %v", err)
		}
		eventually(t, "a handed-off session is not listed unowned (nobody could take it after the bound)", func() bool { return unowned(t, h.Store)[tok.ConnectionID] })
		// Reserved for w2: a third worker is refused, naming the receiver.
		_, err := h.Store.Acquire(ctx(t), tok.ConnectionID, "w3", lease.From{})
		var re *lease.ReservedError
		if !errors.As(err, &re) || re.To != "w2" || re.AtMs != now || !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("acquire by a third worker: %v, want a *ReservedError for w2", err)
		}
		_, err = h.Store.Acquire(ctx(t), tok.ConnectionID, "w3", lease.From{Bypass: "w9"})
		if !errors.As(err, &re) {
			t.Fatalf("acquire bypassing another worker: %v, want a *ReservedError", err)
		}
		// The receiver takes it, and the reservation is gone with its acquire.
		it, err := h.Store.Acquire(ctx(t), tok.ConnectionID, "w2", lease.From{})
		if err != nil || !opts.epochAfter(it.Epoch, tok.Epoch) || it.LastSeq != 11 || it.HandoffTo != "" {
			t.Fatalf("acquire by the receiver: %+v %v", it, err)
		}
		t2 := lease.Token{ConnectionID: tok.ConnectionID, Owner: "w2", Epoch: it.Epoch}
		if err := h.Store.Release(ctx(t), t2, 12); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, h.Store, tok.ConnectionID); got.HandoffTo != "" {
			t.Fatalf("a plain release left a reservation: %+v", got)
		}
		// A receiver that never came: anyone bypassing it may take it.
		if err := h.Store.Handoff(ctx(t), lease.Token{ConnectionID: tok.ConnectionID, Owner: "w2", Epoch: it.Epoch}, 12, "w4", now); !errors.Is(err, lease.ErrLeaseLost) {
			t.Fatalf("hand-off of a released tenure: %v, want ErrLeaseLost", err)
		}
		_, t3 := acquired(t, h, "handoff", "w1")
		if err := h.Store.Handoff(ctx(t), t3, lease.NoSeq, "w4", now); err != nil {
			t.Fatal(err)
		}
		if it, err := h.Store.Acquire(ctx(t), t3.ConnectionID, "w3", lease.From{Bypass: "w4"}); err != nil || it.Owner != "w3" {
			t.Fatalf("acquire bypassing the receiver: %+v %v", it, err)
		}
		// A stopped session is released without a reservation.
		_, t4 := acquired(t, h, "handoff", "w1")
		h.SetDesired(t, t4.ConnectionID, schema.StateStopped)
		if err := h.Store.Handoff(ctx(t), t4, lease.NoSeq, "w2", now); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, h.Store, t4.ConnectionID); got.Owner != "" || got.HandoffTo != "" {
			t.Fatalf("hand-off of a stopped session: %+v", got)
		}
		eventually(t, "a stopped session handed off is listed unowned", func() bool { return !unowned(t, h.Store)[t4.ConnectionID] })
	})
}
