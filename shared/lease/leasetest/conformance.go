// Package leasetest owns the store conformance suite: one set of tests that
// every lease.Store implementation (memstore, dynamostore) must pass, so the
// in-memory reference and the DynamoDB store cannot drift apart.
package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// Harness is one store under test plus the seeding it needs (the writes
// ingest makes in production).
type Harness struct {
	Store lease.Store
	// Put writes a whole item.
	Put func(t testing.TB, it lease.Item)
	// SetDesired changes desired_state, as ingest's stop/start does.
	SetDesired func(t testing.TB, id, state string)
	// Restart is ingest's start of a FAILED session: generation + 1,
	// failed_generation removed and the lease expiry set back to 0, under
	// the condition that the item is still FAILED (the store's own error
	// otherwise).
	Restart func(t testing.TB, id string) error
}

// Options size the suite.
type Options struct {
	// RaceRounds and Racers size the exactly-one-winner test (≥ 200 × 64 for
	// a real engine).
	RaceRounds, Racers int
}

var idSeq atomic.Int64

// NewID returns a connection id unique within the test binary.
func NewID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000_000, idSeq.Add(1))
}

// Started returns a fresh STARTED item that was never leased.
func Started(id string) lease.Item {
	return lease.Item{
		ConnectionID: id, DesiredState: schema.StateStarted, WSURL: "wss://feed.example/" + id + "?token=secret",
		Headers: map[string]string{"Authorization": "Bearer x"}, SeqField: "seq", Generation: 1,
		ExpiresAtMs: 0, LastSeq: lease.NoSeq,
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func mustGet(t testing.TB, s lease.Store, id string) lease.Item {
	t.Helper()
	it, err := s.Get(ctx(t), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return it
}

// acquired puts a fresh STARTED session (its id made from prefix) and
// acquires it for w1 with the given stale-before and expiry.
func acquired(t testing.TB, h Harness, prefix string, staleBeforeMs, expiresAtMs int64) (lease.Item, lease.Token) {
	t.Helper()
	id := NewID(prefix)
	h.Put(t, Started(id))
	it, err := h.Store.Acquire(ctx(t), id, "w1", staleBeforeMs, expiresAtMs)
	if err != nil {
		t.Fatalf("acquire %s: %v", id, err)
	}
	return it, lease.Token{ConnectionID: id, Owner: "w1", Epoch: it.Epoch}
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// Run runs the conformance suite; newHarness gives each subtest a harness
// (it may share one store: ids are unique).
func Run(t *testing.T, newHarness func(t *testing.T) Harness, opts Options) {
	if opts.RaceRounds == 0 {
		opts.RaceRounds = 200
	}
	if opts.Racers == 0 {
		opts.Racers = 64
	}
	const now = int64(1_800_000_000_000) // a fixed wall time in ms
	const ttl, skew = int64(10_000), int64(500)

	t.Run("AcquireNewSession", func(t *testing.T) {
		h := newHarness(t)
		id := NewID("acq")
		h.Put(t, Started(id))
		it, err := h.Store.Acquire(ctx(t), id, "w1", now-skew, now+ttl)
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		if it.Owner != "w1" || it.Epoch != 1 || it.ExpiresAtMs != now+ttl {
			t.Fatalf("acquired item = owner %q epoch %d exp %d; want w1, 1, %d", it.Owner, it.Epoch, it.ExpiresAtMs, now+ttl)
		}
		if it.WSURL != Started(id).WSURL || it.Headers["Authorization"] != "Bearer x" || it.LastSeq != lease.NoSeq || it.SeqField != "seq" {
			t.Fatalf("acquire must return the session: %+v", it)
		}
	})

	t.Run("AcquireRefusals", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.Store.Acquire(ctx(t), NewID("missing"), "w1", now-skew, now+ttl)
		wantErr(t, "acquire of a missing session", err, lease.ErrNotFound)

		stopped := NewID("stopped")
		it := Started(stopped)
		it.DesiredState = schema.StateStopped
		h.Put(t, it)
		_, err = h.Store.Acquire(ctx(t), stopped, "w1", now-skew, now+ttl)
		wantErr(t, "acquire of a stopped session", err, lease.ErrStopped)
		if got := mustGet(t, h.Store, stopped); got.DesiredState != schema.StateStopped || got.Epoch != 0 {
			t.Fatalf("a refused acquire changed the item: %+v", got)
		}

		live := NewID("live")
		h.Put(t, Started(live))
		if _, err := h.Store.Acquire(ctx(t), live, "w1", now-skew, now+ttl); err != nil {
			t.Fatal(err)
		}
		_, err = h.Store.Acquire(ctx(t), live, "w2", now+1000-skew, now+1000+ttl)
		wantErr(t, "acquire of a live lease", err, lease.ErrHeld)
	})

	t.Run("TakeoverOnlyAfterExpiryPlusSkew", func(t *testing.T) {
		h := newHarness(t)
		id := NewID("takeover")
		h.Put(t, Started(id))
		first, err := h.Store.Acquire(ctx(t), id, "w1", now-skew, now+ttl)
		if err != nil {
			t.Fatal(err)
		}
		exp := first.ExpiresAtMs
		// At exactly expiry + skew the lease is not yet takeable.
		later := exp + skew
		_, err = h.Store.Acquire(ctx(t), id, "w2", lease.StaleBeforeMs(time.UnixMilli(later), time.Duration(skew)*time.Millisecond), later+ttl)
		wantErr(t, "acquire at expiry+skew", err, lease.ErrHeld)
		later++
		it, err := h.Store.Acquire(ctx(t), id, "w2", lease.StaleBeforeMs(time.UnixMilli(later), time.Duration(skew)*time.Millisecond), later+ttl)
		if err != nil {
			t.Fatalf("acquire after expiry+skew: %v", err)
		}
		if it.Owner != "w2" || it.Epoch != first.Epoch+1 {
			t.Fatalf("takeover: owner %q epoch %d, want w2 epoch %d", it.Owner, it.Epoch, first.Epoch+1)
		}
	})

	t.Run("StaleOwnerIsFenced", func(t *testing.T) {
		h := newHarness(t)
		id := NewID("fence")
		h.Put(t, Started(id))
		a, err := h.Store.Acquire(ctx(t), id, "w1", now-skew, now+ttl)
		if err != nil {
			t.Fatal(err)
		}
		old := lease.Token{ConnectionID: id, Owner: "w1", Epoch: a.Epoch}
		// w1 is paused past expiry; w2 takes over.
		t2 := now + ttl + skew + 1
		b, err := h.Store.Acquire(ctx(t), id, "w2", t2-skew, t2+ttl)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.Store.Renew(ctx(t), old, t2, t2+ttl, 5)
		wantErr(t, "stale renew", err, lease.ErrLeaseLost)
		wantErr(t, "stale checkpoint", h.Store.Checkpoint(ctx(t), old, 5), lease.ErrLeaseLost)
		wantErr(t, "stale release", h.Store.Release(ctx(t), old, 5), lease.ErrLeaseLost)
		// Same owner name, old epoch (a restarted worker reusing its id): still fenced.
		_, err = h.Store.Renew(ctx(t), lease.Token{ConnectionID: id, Owner: "w2", Epoch: a.Epoch}, t2, t2+ttl, 5)
		wantErr(t, "renew with the right owner but an old epoch", err, lease.ErrLeaseLost)
		got := mustGet(t, h.Store, id)
		if got.Owner != "w2" || got.Epoch != b.Epoch || got.ExpiresAtMs != t2+ttl || got.LastSeq != lease.NoSeq {
			t.Fatalf("a fenced write changed the item: %+v", got)
		}
		// The new owner's writes go through.
		cur := lease.Token{ConnectionID: id, Owner: "w2", Epoch: b.Epoch}
		if _, err := h.Store.Renew(ctx(t), cur, t2+1, t2+1+ttl, 5); err != nil {
			t.Fatalf("renew by the new owner: %v", err)
		}
	})

	t.Run("RenewClassification", func(t *testing.T) {
		h := newHarness(t)
		id := NewID("renew")
		h.Put(t, Started(id))
		a, err := h.Store.Acquire(ctx(t), id, "w1", now-skew, now+ttl)
		if err != nil {
			t.Fatal(err)
		}
		tok := lease.Token{ConnectionID: id, Owner: "w1", Epoch: a.Epoch}
		// Past its stored expiry the holder may not renew.
		_, err = h.Store.Renew(ctx(t), tok, now+ttl+1, now+2*ttl, lease.NoSeq)
		wantErr(t, "renew after expiry", err, lease.ErrExpired)
		// Stopped: renew refuses, release still works and keeps the checkpoint.
		h.SetDesired(t, id, schema.StateStopped)
		_, err = h.Store.Renew(ctx(t), tok, now+1, now+1+ttl, 7)
		wantErr(t, "renew of a stopped session", err, lease.ErrStopped)
		if err := h.Store.Release(ctx(t), tok, 7); err != nil {
			t.Fatalf("release of a stopped session: %v", err)
		}
		got := mustGet(t, h.Store, id)
		if got.ExpiresAtMs != 0 || got.LastSeq != 7 || got.DesiredState != schema.StateStopped {
			t.Fatalf("after release: %+v", got)
		}
		_, err = h.Store.Renew(ctx(t), lease.Token{ConnectionID: NewID("gone"), Owner: "w1", Epoch: 1}, now, now+ttl, 1)
		wantErr(t, "renew of a missing session", err, lease.ErrNotFound)
	})

	t.Run("AmbiguousRenewRetriedKeepsLease", func(t *testing.T) {
		h := newHarness(t)
		id := NewID("ambiguous")
		h.Put(t, Started(id))
		a, err := h.Store.Acquire(ctx(t), id, "w1", now-skew, now+ttl)
		if err != nil {
			t.Fatal(err)
		}
		tok := lease.Token{ConnectionID: id, Owner: "w1", Epoch: a.Epoch}
		// The first attempt was applied but its reply was lost: the holder
		// retries the very same request, then renews again later.
		for i := 0; i < 2; i++ {
			if _, err := h.Store.Renew(ctx(t), tok, now+100, now+100+ttl, 3); err != nil {
				t.Fatalf("renew attempt %d: %v", i+1, err)
			}
		}
		it, err := h.Store.Renew(ctx(t), tok, now+3000, now+3000+ttl, 4)
		if err != nil {
			t.Fatalf("renew after an ambiguous one: %v", err)
		}
		if it.ExpiresAtMs != now+3000+ttl || it.LastSeq != 4 || it.Epoch != a.Epoch {
			t.Fatalf("after retries: %+v", it)
		}
		// An acquire retried after an ambiguous first attempt returns the lease too.
		id2 := NewID("ambiguous-acq")
		h.Put(t, Started(id2))
		first, err := h.Store.Acquire(ctx(t), id2, "w1", now-skew, now+ttl)
		if err != nil {
			t.Fatal(err)
		}
		again, err := h.Store.Acquire(ctx(t), id2, "w1", now-skew, now+ttl)
		if err != nil {
			t.Fatalf("retried acquire: %v", err)
		}
		if again.Epoch != first.Epoch {
			t.Fatalf("retried acquire bumped the epoch: %d then %d", first.Epoch, again.Epoch)
		}
	})

	t.Run("LastSeqIsMonotonic", func(t *testing.T) {
		h := newHarness(t)
		id := NewID("seq")
		h.Put(t, Started(id))
		a, err := h.Store.Acquire(ctx(t), id, "w1", now-skew, now+ttl)
		if err != nil {
			t.Fatal(err)
		}
		tok := lease.Token{ConnectionID: id, Owner: "w1", Epoch: a.Epoch}
		if err := h.Store.Checkpoint(ctx(t), tok, 10); err != nil {
			t.Fatal(err)
		}
		if err := h.Store.Checkpoint(ctx(t), tok, 10); err != nil {
			t.Fatalf("repeating a checkpoint: %v", err)
		}
		wantErr(t, "checkpoint backwards", h.Store.Checkpoint(ctx(t), tok, 9), lease.ErrSeqRegress)
		_, err = h.Store.Renew(ctx(t), tok, now+1, now+1+ttl, 5)
		wantErr(t, "renew with an older seq", err, lease.ErrSeqRegress)
		wantErr(t, "release with an older seq", h.Store.Release(ctx(t), tok, 2), lease.ErrSeqRegress)
		if got := mustGet(t, h.Store, id); got.LastSeq != 10 {
			t.Fatalf("last_seq = %d, want 10", got.LastSeq)
		}
		if err := h.Store.Release(ctx(t), tok, 12); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, h.Store, id)
		if got.LastSeq != 12 || got.ExpiresAtMs != 0 {
			t.Fatalf("after release: last_seq %d exp %d", got.LastSeq, got.ExpiresAtMs)
		}
		// The next owner resumes from the checkpoint, at once (released).
		b, err := h.Store.Acquire(ctx(t), id, "w2", now+2-skew, now+2+ttl)
		if err != nil {
			t.Fatalf("acquire after release: %v", err)
		}
		if b.LastSeq != 12 || b.Epoch != a.Epoch+1 {
			t.Fatalf("next owner sees last_seq %d epoch %d", b.LastSeq, b.Epoch)
		}
	})

	t.Run("Orphans", func(t *testing.T) {
		h := newHarness(t)
		prefix := NewID("orph")
		// 130 released/new STARTED, 5 live, 5 stopped: only the 130 are orphans.
		want := map[string]bool{}
		for i := 0; i < 140; i++ {
			it := Started(fmt.Sprintf("%s-%03d", prefix, i))
			switch {
			case i < 130:
				it.ExpiresAtMs = int64(i) // expired long ago; distinct and ordered
				want[it.ConnectionID] = true
			case i < 135:
				it.ExpiresAtMs = now + ttl
				it.Owner, it.Epoch = "w1", 1
			default:
				it.DesiredState = schema.StateStopped
			}
			h.Put(t, it)
		}
		got, err := h.Store.Orphans(ctx(t), 130, 0)
		if err != nil {
			t.Fatalf("orphans: %v", err)
		}
		seen := 0
		last := int64(-1)
		for _, c := range got {
			if c.ExpiresAtMs < last {
				t.Fatalf("orphans not ordered by expiry")
			}
			last = c.ExpiresAtMs
			if want[c.ConnectionID] {
				seen++
			} else if len(c.ConnectionID) > len(prefix) && c.ConnectionID[:len(prefix)] == prefix {
				t.Fatalf("%s is not an orphan", c.ConnectionID)
			}
		}
		if seen != 130 {
			t.Fatalf("found %d of 130 orphans across pages", seen)
		}
		limited, err := h.Store.Orphans(ctx(t), 130, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(limited) != 7 {
			t.Fatalf("limit 7 returned %d", len(limited))
		}
		// The limit keeps the longest expired (the store may read its
		// index in shards: the cut comes after the merge).
		for i, c := range limited {
			if c.ExpiresAtMs != got[i].ExpiresAtMs {
				t.Fatalf("limit 7: candidate %d expires at %d, the full list's at %d", i, c.ExpiresAtMs, got[i].ExpiresAtMs)
			}
		}
	})

	t.Run("FailedIsNeverAcquired", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "failed", now-skew, now+ttl)
		id := tok.ConnectionID
		if err := h.Store.NoteError(ctx(t), tok, "dial: i/o timeout", now+1); err != nil {
			t.Fatalf("note error: %v", err)
		}
		if got := mustGet(t, h.Store, id); got.LastError != "dial: i/o timeout" || got.LastErrorAtMs != now+1 || got.Failed() {
			t.Fatalf("after NoteError: %+v", got)
		}
		if err := h.Store.Fail(ctx(t), tok, 1, 4, "handshake refused: HTTP 401", now+2); err != nil {
			t.Fatalf("fail: %v", err)
		}
		got := mustGet(t, h.Store, id)
		if !got.Failed() || *got.FailedGeneration != got.Generation || got.LastError != "handshake refused: HTTP 401" ||
			got.LastErrorAtMs != now+2 || got.LastSeq != 4 || got.ExpiresAtMs != lease.FailedExpiresAtMs || got.DesiredState != schema.StateStarted {
			t.Fatalf("after Fail: %+v", got)
		}
		// Nobody acquires it, however late; the reconcilers' query (expiry
		// before now plus a look-ahead) does not list it.
		far := now + 365*24*3600*1000
		_, err := h.Store.Acquire(ctx(t), id, "w2", far, far+ttl)
		wantErr(t, "acquire of a FAILED session", err, lease.ErrFailed)
		orphans, err := h.Store.Orphans(ctx(t), far+ttl, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range orphans {
			if c.ConnectionID == id {
				t.Fatalf("a FAILED session is listed as an orphan: %+v", c)
			}
		}
		// A retried Fail (its first reply lost) still succeeds for the holder.
		if err := h.Store.Fail(ctx(t), tok, 1, 4, "handshake refused: HTTP 401", now+2); err != nil {
			t.Fatalf("retried fail: %v", err)
		}
	})

	t.Run("FailAndNoteErrorAreFenced", func(t *testing.T) {
		h := newHarness(t)
		_, old := acquired(t, h, "failfence", now-skew, now+ttl)
		id := old.ConnectionID
		t2 := now + ttl + skew + 1
		b, err := h.Store.Acquire(ctx(t), id, "w2", t2-skew, t2+ttl)
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "fail by a stale epoch", h.Store.Fail(ctx(t), old, 1, 1, "x", t2), lease.ErrLeaseLost)
		wantErr(t, "note error by a stale epoch", h.Store.NoteError(ctx(t), old, "x", t2), lease.ErrLeaseLost)
		other := lease.Token{ConnectionID: id, Owner: "w3", Epoch: b.Epoch}
		wantErr(t, "fail by another owner", h.Store.Fail(ctx(t), other, 1, 1, "x", t2), lease.ErrLeaseLost)
		wantErr(t, "note error by another owner", h.Store.NoteError(ctx(t), other, "x", t2), lease.ErrLeaseLost)
		got := mustGet(t, h.Store, id)
		if got.Failed() || got.LastError != "" || got.ExpiresAtMs != t2+ttl || got.Owner != "w2" {
			t.Fatalf("a fenced Fail or NoteError changed the item: %+v", got)
		}
		wantErr(t, "fail of a missing session", h.Store.Fail(ctx(t), lease.Token{ConnectionID: NewID("gone"), Owner: "w1", Epoch: 1}, 1, 1, "x", t2), lease.ErrNotFound)
	})

	t.Run("FailOfAnOlderGenerationWritesNothing", func(t *testing.T) {
		h := newHarness(t)
		a, tok := acquired(t, h, "failgen", now-skew, now+ttl)
		// A start changed the configuration while the holder dialed the old one.
		it := mustGet(t, h.Store, tok.ConnectionID)
		it.Generation = a.Generation + 1
		h.Put(t, it)
		wantErr(t, "fail of an older generation", h.Store.Fail(ctx(t), tok, a.Generation, lease.NoSeq, "handshake refused: HTTP 401", now+1), lease.ErrNewGeneration)
		got := mustGet(t, h.Store, tok.ConnectionID)
		if got.Failed() || got.FailedGeneration != nil || got.LastError != "" || got.ExpiresAtMs != now+ttl {
			t.Fatalf("a Fail of an older generation wrote: %+v", got)
		}
		// The holder releases instead: the new configuration gets its dial.
		if err := h.Store.Release(ctx(t), tok, lease.NoSeq); err != nil {
			t.Fatalf("release after the refused fail: %v", err)
		}
	})

	t.Run("StopWinsOverFailed", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "failstop", now-skew, now+ttl)
		id := tok.ConnectionID
		// A STOP lands while the holder is giving up: the Fail still
		// records the error, and the session is STOPPED, not FAILED.
		h.SetDesired(t, id, schema.StateStopped)
		if err := h.Store.Fail(ctx(t), tok, 1, lease.NoSeq, "handshake refused: HTTP 403", now+1); err != nil {
			t.Fatalf("fail after a stop: %v", err)
		}
		got := mustGet(t, h.Store, id)
		if got.DesiredState != schema.StateStopped || got.Failed() || got.LastError != "handshake refused: HTTP 403" {
			t.Fatalf("after stop then fail: %+v", got)
		}
		_, err := h.Store.Acquire(ctx(t), id, "w2", now+2*ttl, now+3*ttl)
		wantErr(t, "acquire of a stopped (once failed) session", err, lease.ErrStopped)
	})

	t.Run("StartClearsFailed", func(t *testing.T) {
		h := newHarness(t)
		a, tok := acquired(t, h, "failstart", now-skew, now+ttl)
		id := tok.ConnectionID
		if err := h.Store.Fail(ctx(t), tok, 1, 3, "address refused by policy", now+1); err != nil {
			t.Fatal(err)
		}
		if err := h.Restart(t, id); err != nil {
			t.Fatalf("restart of a FAILED session: %v", err)
		}
		got := mustGet(t, h.Store, id)
		if got.Failed() || got.FailedGeneration != nil || got.Generation != a.Generation+1 || got.ExpiresAtMs != 0 || got.LastSeq != 3 {
			t.Fatalf("after restart: %+v", got)
		}
		// A second restart finds it no longer FAILED: its condition fails,
		// so it can never clobber the lease the next owner takes.
		b, err := h.Store.Acquire(ctx(t), id, "w2", now+2-skew, now+2+ttl)
		if err != nil {
			t.Fatalf("acquire after restart: %v", err)
		}
		if b.Epoch != a.Epoch+1 || b.LastSeq != 3 {
			t.Fatalf("next owner: epoch %d last_seq %d", b.Epoch, b.LastSeq)
		}
		if err := h.Restart(t, id); err == nil {
			t.Fatal("restart of a session that is no longer FAILED succeeded")
		}
		if got := mustGet(t, h.Store, id); got.Owner != "w2" || got.ExpiresAtMs != now+2+ttl {
			t.Fatalf("a stale restart clobbered the live lease: %+v", got)
		}
	})

	t.Run("ExactlyOneWinner", func(t *testing.T) {
		h := newHarness(t)
		doubles, zeros := 0, 0
		for round := 0; round < opts.RaceRounds; round++ {
			id := NewID("race")
			it := Started(id)
			it.Owner, it.Epoch, it.ExpiresAtMs = "dead", 7, now-60_000 // expired long ago
			h.Put(t, it)
			var wins atomic.Int32
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make(chan error, opts.Racers)
			for r := 0; r < opts.Racers; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					<-start
					_, err := h.Store.Acquire(context.Background(), id, fmt.Sprintf("w%d", r), now-skew, now+ttl)
					switch {
					case err == nil:
						wins.Add(1)
					case !errors.Is(err, lease.ErrHeld):
						errs <- err
					}
				}(r)
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("round %d: unexpected acquire error: %v", round, err)
			}
			switch wins.Load() {
			case 1:
			case 0:
				zeros++
			default:
				doubles++
			}
			if got := mustGet(t, h.Store, id); got.Epoch != 8 {
				t.Fatalf("round %d: epoch %d after one acquire, want 8", round, got.Epoch)
			}
		}
		if doubles != 0 || zeros != 0 {
			t.Fatalf("%d rounds with several winners, %d with none, of %d", doubles, zeros, opts.RaceRounds)
		}
		t.Logf("%d rounds × %d racers: exactly one winner every round", opts.RaceRounds, opts.Racers)
	})

	t.Run("StopRacingAcquireNeverRevives", func(t *testing.T) {
		h := newHarness(t)
		rounds := opts.RaceRounds / 4
		if rounds < 10 {
			rounds = 10
		}
		for round := 0; round < rounds; round++ {
			id := NewID("stoprace")
			h.Put(t, Started(id))
			var wg sync.WaitGroup
			start := make(chan struct{})
			for r := 0; r < 16; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					<-start
					_, _ = h.Store.Acquire(context.Background(), id, fmt.Sprintf("w%d", r), now-skew, now+ttl)
				}(r)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				h.SetDesired(t, id, schema.StateStopped)
			}()
			close(start)
			wg.Wait()
			if got := mustGet(t, h.Store, id); got.DesiredState != schema.StateStopped {
				t.Fatalf("round %d: desired_state %q after a STOP raced acquires", round, got.DesiredState)
			}
			_, err := h.Store.Acquire(ctx(t), id, "late", now+ttl+skew+1-skew, now+2*ttl)
			wantErr(t, "acquire after stop", err, lease.ErrStopped)
		}
	})
}
