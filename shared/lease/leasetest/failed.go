package leasetest

import (
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// runFailed: fAILED sessions: never acquired, errors noted with their
// generation and tenure, fenced, and a STOP or a start over them.
func runFailed(t *testing.T, newHarness func(t *testing.T) Harness, opts Options) {
	t.Run("FailedIsNeverAcquired", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "failed", "w1")
		id := tok.ConnectionID
		if err := h.Store.NoteError(ctx(t), tok, 1, "dial: i/o timeout", now+1); err != nil {
			t.Fatalf("note error: %v", err)
		}
		if got := mustGet(t, h.Store, id); got.LastError != "dial: i/o timeout" || got.LastErrorAtMs != now+1 || got.Failed() || got.Owner != "w1" ||
			got.LastErrorGen != 1 || got.LastErrorEpoch != tok.Epoch {
			t.Fatalf("after NoteError: %+v", got)
		}
		if err := h.Store.Fail(ctx(t), tok, 1, 4, "handshake refused: HTTP 401", now+2); err != nil {
			t.Fatalf("fail: %v", err)
		}
		got := mustGet(t, h.Store, id)
		if !got.Failed() || *got.FailedGeneration != got.Generation || got.LastError != "handshake refused: HTTP 401" ||
			got.LastErrorAtMs != now+2 || got.LastSeq != 4 || got.Owner != "" || got.DesiredState != schema.StateStarted ||
			got.LastErrorGen != 1 || got.LastErrorEpoch != tok.Epoch {
			t.Fatalf("after Fail: %+v", got)
		}
		_, err := h.Store.Acquire(ctx(t), id, "w2", lease.From{})
		wantErr(t, "acquire of a FAILED session", err, lease.ErrFailed)
		_, err = h.Store.Acquire(ctx(t), id, "w2", lease.From{Prev: &tok})
		wantErr(t, "takeover of a FAILED session", err, lease.ErrFailed)
		eventually(t, "a FAILED session is listed unowned", func() bool { return !unowned(t, h.Store)[id] })
		eventually(t, "a FAILED session is listed under its former owner", func() bool { _, ok := ownedBy(t, h.Store, "w1")[id]; return !ok })
		// A Fail retried after it applied (its reply lost) finds itself
		// written, and is done; another Fail of the ended tenure is refused.
		if err := h.Store.Fail(ctx(t), tok, 1, 4, "handshake refused: HTTP 401", now+2); err != nil {
			t.Fatalf("fail retried after it applied: %v", err)
		}
		wantErr(t, "another fail of the ended tenure", h.Store.Fail(ctx(t), tok, 1, 4, "another reason", now+3), lease.ErrLeaseLost)
	})

	// last_error carries the generation and the tenure it was seen in, so
	// that a reader tells an error of an earlier tenure from a live one: a
	// takeover keeps the old tenure's error (and its epoch) until the new
	// owner records one of its own.
	t.Run("NoteErrorRecordsGenerationAndEpoch", func(t *testing.T) {
		h := newHarness(t)
		_, old := acquired(t, h, "noteepoch", "w1")
		id := old.ConnectionID
		if err := h.Store.NoteError(ctx(t), old, 1, "handshake refused: HTTP 400", now); err != nil {
			t.Fatalf("note error: %v", err)
		}
		b, err := h.Store.Acquire(ctx(t), id, "w2", lease.From{Prev: &old})
		if err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, h.Store, id)
		if got.Epoch != b.Epoch || got.Epoch <= old.Epoch || got.LastError != "handshake refused: HTTP 400" ||
			got.LastErrorGen != 1 || got.LastErrorEpoch != old.Epoch {
			t.Fatalf("after a takeover, want the old tenure's error at epoch %d: %+v", old.Epoch, got)
		}
		cur := lease.Token{ConnectionID: id, Owner: "w2", Epoch: b.Epoch}
		if err := h.Store.NoteError(ctx(t), cur, 1, "dial: i/o timeout", now+1); err != nil {
			t.Fatalf("note error: %v", err)
		}
		if got := mustGet(t, h.Store, id); got.LastError != "dial: i/o timeout" || got.LastErrorGen != 1 || got.LastErrorEpoch != b.Epoch {
			t.Fatalf("after the new tenure's note, want its epoch %d: %+v", b.Epoch, got)
		}
	})

	t.Run("FailAndNoteErrorAreFenced", func(t *testing.T) {
		h := newHarness(t)
		_, old := acquired(t, h, "failfence", "w1")
		id := old.ConnectionID
		b, err := h.Store.Acquire(ctx(t), id, "w2", lease.From{Prev: &old})
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "fail by a stale epoch", h.Store.Fail(ctx(t), old, 1, lease.NoSeq, "x", now), lease.ErrLeaseLost)
		wantErr(t, "note error by a stale epoch", h.Store.NoteError(ctx(t), old, 1, "x", now), lease.ErrLeaseLost)
		other := lease.Token{ConnectionID: id, Owner: "w3", Epoch: b.Epoch}
		wantErr(t, "fail by another owner", h.Store.Fail(ctx(t), other, 1, lease.NoSeq, "x", now), lease.ErrLeaseLost)
		wantErr(t, "note error by another owner", h.Store.NoteError(ctx(t), other, 1, "x", now), lease.ErrLeaseLost)
		got := mustGet(t, h.Store, id)
		if got.Failed() || got.LastError != "" || got.Owner != "w2" || got.Epoch != b.Epoch {
			t.Fatalf("a fenced Fail or NoteError changed the item: %+v", got)
		}
		gone := lease.Token{ConnectionID: NewID("gone"), Owner: "w1", Epoch: 1}
		wantErr(t, "fail of a missing session", h.Store.Fail(ctx(t), gone, 1, lease.NoSeq, "x", now), lease.ErrNotFound)
		wantErr(t, "note error of a missing session", h.Store.NoteError(ctx(t), gone, 1, "x", now), lease.ErrNotFound)
	})

	t.Run("FailOfAnOlderGenerationWritesNothing", func(t *testing.T) {
		h := newHarness(t)
		a, tok := acquired(t, h, "failgen", "w1")
		// A start changed the configuration while the holder dialed the old one.
		it := mustGet(t, h.Store, tok.ConnectionID)
		it.Generation = a.Generation + 1
		h.Put(t, it)
		wantErr(t, "fail of an older generation", h.Store.Fail(ctx(t), tok, a.Generation, lease.NoSeq, "handshake refused: HTTP 401", now+1), lease.ErrNewGeneration)
		got := mustGet(t, h.Store, tok.ConnectionID)
		if got.Failed() || got.FailedGeneration != nil || got.LastError != "" || got.Owner != "w1" {
			t.Fatalf("a Fail of an older generation wrote: %+v", got)
		}
		// The holder releases instead: the new configuration gets its dial.
		if err := h.Store.Release(ctx(t), tok, lease.NoSeq); err != nil {
			t.Fatalf("release after the refused fail: %v", err)
		}
		eventually(t, "the released session is not listed unowned", func() bool { return unowned(t, h.Store)[tok.ConnectionID] })
	})

	t.Run("StopWinsOverFailed", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "failstop", "w1")
		id := tok.ConnectionID
		// A STOP lands while the holder is giving up: the Fail still
		// records the error, and the session is STOPPED, not FAILED.
		h.SetDesired(t, id, schema.StateStopped)
		if err := h.Store.Fail(ctx(t), tok, 1, lease.NoSeq, "handshake refused: HTTP 403", now+1); err != nil {
			t.Fatalf("fail after a stop: %v", err)
		}
		got := mustGet(t, h.Store, id)
		if got.DesiredState != schema.StateStopped || got.Failed() || got.LastError != "handshake refused: HTTP 403" || got.Owner != "" {
			t.Fatalf("after stop then fail: %+v", got)
		}
		_, err := h.Store.Acquire(ctx(t), id, "w2", lease.From{})
		wantErr(t, "acquire of a stopped (once failed) session", err, lease.ErrStopped)
	})

	t.Run("StartClearsFailed", func(t *testing.T) {
		h := newHarness(t)
		a, tok := acquired(t, h, "failstart", "w1")
		id := tok.ConnectionID
		if err := h.Store.Fail(ctx(t), tok, 1, 3, "address refused by policy", now+1); err != nil {
			t.Fatal(err)
		}
		if err := h.Restart(t, id); err != nil {
			t.Fatalf("restart of a FAILED session: %v", err)
		}
		got := mustGet(t, h.Store, id)
		if got.Failed() || got.FailedGeneration != nil || got.Generation != a.Generation+1 || got.Owner != "" || got.LastSeq != 3 {
			t.Fatalf("after restart: %+v", got)
		}
		eventually(t, "a restarted session is not listed unowned", func() bool { return unowned(t, h.Store)[id] })
		b, err := h.Store.Acquire(ctx(t), id, "w2", lease.From{})
		if err != nil {
			t.Fatalf("acquire after restart: %v", err)
		}
		if !opts.epochAfter(b.Epoch, a.Epoch) || b.LastSeq != 3 || b.Generation != a.Generation+1 {
			t.Fatalf("next owner: %+v", b)
		}
		// A second restart finds it no longer FAILED: its condition fails,
		// so it can never clobber the tenure the next owner took.
		if err := h.Restart(t, id); err == nil {
			t.Fatal("restart of a session that is no longer FAILED succeeded")
		}
		if got := mustGet(t, h.Store, id); got.Owner != "w2" || got.Epoch != b.Epoch {
			t.Fatalf("a stale restart clobbered the tenure: %+v", got)
		}
	})
}
