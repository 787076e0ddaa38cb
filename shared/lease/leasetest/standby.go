package leasetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// runStandby is the suite's part on the hot standby: its assignment,
// fencing, drop, promotion and replacement, and what the other writes leave
// of it (Run calls it).
func runStandby(t *testing.T, newHarness func(t *testing.T) Harness, opts Options) {
	// assign makes worker the standby of id (the call under test when its
	// answer is checked; a setup call here, persisted).
	assign := func(t *testing.T, h Harness, id, worker string, gen int64, prev *lease.StandbyToken) (lease.Item, lease.StandbyToken) {
		t.Helper()
		var it lease.Item
		err := persist(func() (err error) { it, err = h.Store.AssignStandby(ctx(t), id, worker, gen, prev); return err })
		if err != nil {
			t.Fatalf("assign standby %s to %s: %v", id, worker, err)
		}
		return it, lease.StandbyToken{ConnectionID: id, Worker: worker, Epoch: it.StandbyEpoch}
	}
	// drop drops t, which must end it: on a store that applies a write and
	// still answers an error (Ambiguous), a retry of a drop that applied
	// finds it lost, which the dropper treats as done.
	drop := func(t *testing.T, h Harness, st lease.StandbyToken, refusedGen int64, reason string) {
		t.Helper()
		err := h.Store.DropStandby(ctx(t), st, refusedGen, reason, now)
		if err != nil && !(opts.Ambiguous && errors.Is(err, lease.ErrStandbyLost)) {
			t.Fatalf("drop standby %s: %v", st, err)
		}
		if got := mustGet(t, h.Store, st.ConnectionID); got.Standby != "" || got.StandbyEpoch != st.Epoch {
			t.Fatalf("after the drop of %s: standby %q epoch %d", st, got.Standby, got.StandbyEpoch)
		}
	}
	wantStandby := func(t *testing.T, what string, err error, cur lease.StandbyToken) {
		t.Helper()
		var se *lease.StandbyHeldError
		if !errors.As(err, &se) || !errors.Is(err, lease.ErrStandbyHeld) {
			t.Fatalf("%s: got error %v, want a *StandbyHeldError", what, err)
		}
		if se.Standby != cur {
			t.Fatalf("%s: StandbyHeldError names %v, want %v", what, se.Standby, cur)
		}
	}

	t.Run("StandbyAssignAndReassign", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "sbassign", "w1")
		id := tok.ConnectionID
		it, err := h.Store.AssignStandby(ctx(t), id, "w2", 1, nil)
		if err != nil {
			t.Fatalf("assign: %v", err)
		}
		if it.Standby != "w2" || !opts.epochAfter(it.StandbyEpoch, 0) || it.Owner != "w1" || it.Epoch != tok.Epoch || it.Generation != 1 {
			t.Fatalf("assigned item: %+v", it)
		}
		got := mustGet(t, h.Store, id)
		if got.Standby != "w2" || got.StandbyEpoch != it.StandbyEpoch || got.Owner != "w1" || got.Epoch != tok.Epoch {
			t.Fatalf("get after the assignment: %+v", got)
		}
		// The same worker again (its standby connection redialed, or an
		// assignment retried): a new standby epoch.
		again, err := h.Store.AssignStandby(ctx(t), id, "w2", 1, nil)
		if err != nil || again.Standby != "w2" || !opts.epochAfter(again.StandbyEpoch, it.StandbyEpoch) {
			t.Fatalf("re-assignment: %+v %v", again, err)
		}
		cur := lease.StandbyToken{ConnectionID: id, Worker: "w2", Epoch: again.StandbyEpoch}
		// Another worker is refused while w2 stands by, naming it; so is
		// one whose prev is an older assignment of w2.
		_, err = h.Store.AssignStandby(ctx(t), id, "w3", 1, nil)
		wantStandby(t, "assignment while another standby holds it", err, cur)
		stale := lease.StandbyToken{ConnectionID: id, Worker: "w2", Epoch: it.StandbyEpoch}
		_, err = h.Store.AssignStandby(ctx(t), id, "w3", 1, &stale)
		wantStandby(t, "replacement of a stale assignment", err, cur)
		// Replacing the current one (its worker seen not alive).
		rep, err := h.Store.AssignStandby(ctx(t), id, "w3", 1, &cur)
		if err != nil || rep.Standby != "w3" || !opts.epochAfter(rep.StandbyEpoch, cur.Epoch) {
			t.Fatalf("replacement of %s: %+v %v", cur, rep, err)
		}
		if got := mustGet(t, h.Store, id); got.Standby != "w3" || got.StandbyEpoch != rep.StandbyEpoch || got.Owner != "w1" || got.Epoch != tok.Epoch {
			t.Fatalf("get after the replacement: %+v", got)
		}
	})

	t.Run("StandbyAssignRefusals", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.Store.AssignStandby(ctx(t), NewID("missing"), "w2", 1, nil)
		wantErr(t, "assignment on a missing session", err, lease.ErrNotFound)

		unowned := NewID("sbunowned")
		h.Put(t, Started(unowned))
		_, err = h.Store.AssignStandby(ctx(t), unowned, "w2", 1, nil)
		wantErr(t, "assignment on an unowned session", err, lease.ErrNoOwner)

		_, tok := acquired(t, h, "sbrefuse", "w1")
		_, err = h.Store.AssignStandby(ctx(t), tok.ConnectionID, "w1", 1, nil)
		wantErr(t, "assignment of the owner", err, lease.ErrOwnStandby)
		_, err = h.Store.AssignStandby(ctx(t), tok.ConnectionID, "w2", 2, nil)
		wantErr(t, "assignment at another generation", err, lease.ErrNewGeneration)
		if got := mustGet(t, h.Store, tok.ConnectionID); got.Standby != "" || got.StandbyEpoch != 0 {
			t.Fatalf("refused assignments wrote: %+v", got)
		}

		_, stopped := acquired(t, h, "sbstopped", "w1")
		h.SetDesired(t, stopped.ConnectionID, schema.StateStopped)
		_, err = h.Store.AssignStandby(ctx(t), stopped.ConnectionID, "w2", 1, nil)
		wantErr(t, "assignment on a stopped session", err, lease.ErrStopped)

		_, failed := acquired(t, h, "sbfailed", "w1")
		if err := persist(func() error { return h.Store.Fail(ctx(t), failed, 1, lease.NoSeq, "handshake refused: HTTP 401", now) }); err != nil {
			t.Fatal(err)
		}
		_, err = h.Store.AssignStandby(ctx(t), failed.ConnectionID, "w2", 1, nil)
		wantErr(t, "assignment on a FAILED session", err, lease.ErrFailed)
	})

	t.Run("StandbyDropIsFenced", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "sbdrop", "w1")
		id := tok.ConnectionID
		_, first := assign(t, h, id, "w2", 1, nil)
		_, second := assign(t, h, id, "w2", 1, nil)
		wantErr(t, "drop of an older assignment", h.Store.DropStandby(ctx(t), first, 0, "stale", now), lease.ErrStandbyLost)
		other := lease.StandbyToken{ConnectionID: id, Worker: "w3", Epoch: second.Epoch}
		wantErr(t, "drop by another worker", h.Store.DropStandby(ctx(t), other, 0, "", now), lease.ErrStandbyLost)
		if got := mustGet(t, h.Store, id); got.Standby != "w2" || got.StandbyEpoch != second.Epoch || got.StandbyError != "" {
			t.Fatalf("fenced drops wrote: %+v", got)
		}
		long := "standby connection closed by the source: " + strings.Repeat("é", lease.MaxStandbyError)
		drop(t, h, second, 0, long)
		got := mustGet(t, h.Store, id)
		if got.StandbyError != lease.StandbyReason(long) || len(got.StandbyError) > lease.MaxStandbyError ||
			!strings.HasPrefix(got.StandbyError, "standby connection closed") || got.StandbyRefusedGen != 0 || got.Owner != "w1" || got.Epoch != tok.Epoch {
			t.Fatalf("after the drop: %+v", got)
		}
		// Dropped already (a retry after the drop applied): lost, i.e. done.
		wantErr(t, "drop of a dropped standby", h.Store.DropStandby(ctx(t), second, 0, "again", now), lease.ErrStandbyLost)
		wantErr(t, "drop on a missing session", h.Store.DropStandby(ctx(t), lease.StandbyToken{ConnectionID: NewID("gone"), Worker: "w2", Epoch: 1}, 0, "", now), lease.ErrNotFound)
		// The next assignment goes above the dropped epoch and clears the error.
		it, next := assign(t, h, id, "w3", 1, nil)
		if !opts.epochAfter(next.Epoch, second.Epoch) || it.StandbyError != "" || mustGet(t, h.Store, id).StandbyError != "" {
			t.Fatalf("assignment after a drop: %+v", it)
		}
	})

	t.Run("StandbyRefusedUntilANewGeneration", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "sbrefused", "w1")
		id := tok.ConnectionID
		_, st := assign(t, h, id, "w2", 1, nil)
		drop(t, h, st, 1, "source closed the owner's connection when the standby's opened (one connection policy)")
		if got := mustGet(t, h.Store, id); got.StandbyRefusedGen != 1 || got.StandbyError == "" {
			t.Fatalf("after a refused drop: %+v", got)
		}
		for _, w := range []string{"w2", "w3"} {
			_, err := h.Store.AssignStandby(ctx(t), id, w, 1, nil)
			wantErr(t, "assignment at the refused generation by "+w, err, lease.ErrStandbyRefused)
		}
		// A new generation (another configuration) may get one again; the
		// start leaves the standby attributes as they were.
		if h.SetSpec != nil {
			h.SetSpec(t, id, Started(id).Spec+" ")
		} else {
			it := mustGet(t, h.Store, id)
			it.Generation++
			h.Put(t, it)
		}
		got := mustGet(t, h.Store, id)
		if got.Generation != 2 || got.StandbyRefusedGen != 1 || got.StandbyEpoch != st.Epoch || got.Owner != "w1" {
			t.Fatalf("after a new generation: %+v", got)
		}
		_, err := h.Store.AssignStandby(ctx(t), id, "w2", 1, nil)
		wantErr(t, "assignment at the old generation", err, lease.ErrNewGeneration)
		if it, _ := assign(t, h, id, "w2", 2, nil); it.Standby != "w2" || !opts.epochAfter(it.StandbyEpoch, st.Epoch) {
			t.Fatalf("assignment at the new generation: %+v", it)
		}
	})

	t.Run("StandbyPromotedByItsTakeover", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "sbpromote", "w1")
		id := tok.ConnectionID
		_, st := assign(t, h, id, "w2", 1, nil)
		stored := mustGet(t, h.Store, id).Spec
		// The standby names the configuration it dialed with (From.Spec):
		// the promoted item carries the session's, the same.
		it, err := h.Store.Acquire(ctx(t), id, "w2", lease.From{Prev: &tok, Standby: &st, Spec: stored})
		if err != nil {
			t.Fatalf("promotion: %v", err)
		}
		if it.Owner != "w2" || !opts.epochAfter(it.Epoch, tok.Epoch) || it.Standby != "" || it.StandbyEpoch != st.Epoch {
			t.Fatalf("promoted item: %+v", it)
		}
		if it.Spec != stored {
			t.Fatalf("promoted item's spec %q, want the session's %q", it.Spec, stored)
		}
		if got := mustGet(t, h.Store, id); got.Owner != "w2" || got.Epoch != it.Epoch || got.Standby != "" || got.StandbyEpoch != st.Epoch {
			t.Fatalf("get after the promotion: %+v", got)
		}
		// The promotion retried after it applied (its reply lost) is its
		// owner's acquire again.
		again, err := h.Store.Acquire(ctx(t), id, "w2", lease.From{Prev: &tok, Standby: &st})
		if err != nil || again.Owner != "w2" || !opts.epochAfter(again.Epoch, it.Epoch) {
			t.Fatalf("promotion retried: %+v %v", again, err)
		}
		// The old standby epoch is fenced: w2 may stand by again only with
		// a new assignment.
		wantErr(t, "drop of the promoted standby", h.Store.DropStandby(ctx(t), st, 0, "", now), lease.ErrStandbyLost)
		_, err = h.Store.AssignStandby(ctx(t), id, "w2", 1, nil)
		wantErr(t, "the new owner standing by for itself", err, lease.ErrOwnStandby)

		// A promotion with an assignment that is no longer the standby
		// takes nothing.
		_, tok2 := acquired(t, h, "sbpromote", "w1")
		_, old := assign(t, h, tok2.ConnectionID, "w2", 1, nil)
		_, cur := assign(t, h, tok2.ConnectionID, "w2", 1, nil)
		_, err = h.Store.Acquire(ctx(t), tok2.ConnectionID, "w2", lease.From{Prev: &tok2, Standby: &old})
		wantErr(t, "promotion with a stale assignment", err, lease.ErrStandbyLost)
		if got := mustGet(t, h.Store, tok2.ConnectionID); got.Owner != "w1" || got.Epoch != tok2.Epoch || got.Standby != "w2" || got.StandbyEpoch != cur.Epoch {
			t.Fatalf("a refused promotion wrote: %+v", got)
		}
		// The standby's worker acquiring without naming its standby (it
		// lost track of it) is its promotion all the same: a worker is
		// never its own session's standby. A configuration it names that
		// is not the session's is not what the acquire returns.
		it, err = h.Store.Acquire(ctx(t), tok2.ConnectionID, "w2", lease.From{Prev: &tok2, Spec: `{"ws_url":"wss://stale.invalid/"}`})
		if err != nil || it.Owner != "w2" || it.Standby != "" {
			t.Fatalf("takeover by the standby's worker without its token: %+v %v", it, err)
		}
		if want := mustGet(t, h.Store, tok2.ConnectionID).Spec; it.Spec != want {
			t.Fatalf("acquire naming another configuration returned spec %q, want the session's %q", it.Spec, want)
		}
	})

	t.Run("StandbyIsTheTakeoversPreferredReceiver", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "sbprefer", "w1")
		id := tok.ConnectionID
		_, st := assign(t, h, id, "w2", 1, nil)
		_, err := h.Store.Acquire(ctx(t), id, "w3", lease.From{Prev: &tok})
		wantStandby(t, "takeover by another worker while the standby stands by", err, st)
		_, err = h.Store.Acquire(ctx(t), id, "w3", lease.From{Prev: &tok, StandbyGone: "w9"})
		wantStandby(t, "takeover bypassing another worker than the standby", err, st)
		if got := mustGet(t, h.Store, id); got.Owner != "w1" || got.Epoch != tok.Epoch || got.Standby != "w2" {
			t.Fatalf("refused takeovers wrote: %+v", got)
		}
		// The standby's worker seen not alive: the takeover removes it.
		it, err := h.Store.Acquire(ctx(t), id, "w3", lease.From{Prev: &tok, StandbyGone: "w2"})
		if err != nil || it.Owner != "w3" || !opts.epochAfter(it.Epoch, tok.Epoch) || it.Standby != "" || it.StandbyEpoch != st.Epoch {
			t.Fatalf("takeover bypassing a gone standby: %+v %v", it, err)
		}
		if got := mustGet(t, h.Store, id); got.Standby != "" || got.Owner != "w3" {
			t.Fatalf("get after the takeover: %+v", got)
		}
		wantErr(t, "drop of the bypassed standby", h.Store.DropStandby(ctx(t), st, 0, "", now), lease.ErrStandbyLost)
	})

	t.Run("StandbyKeptByOwnerWritesAndUnownedAcquires", func(t *testing.T) {
		h := newHarness(t)
		_, tok := acquired(t, h, "sbkeep", "w1")
		id := tok.ConnectionID
		_, st := assign(t, h, id, "w2", 1, nil)
		keeps := func(what string) {
			t.Helper()
			if got := mustGet(t, h.Store, id); got.Standby != "w2" || got.StandbyEpoch != st.Epoch {
				t.Fatalf("%s touched the standby: %+v", what, got)
			}
		}
		if err := persist(func() error { return h.Store.Checkpoint(ctx(t), tok, 5) }); err != nil {
			t.Fatal(err)
		}
		keeps("a checkpoint")
		if err := persist(func() error { return h.Store.NoteError(ctx(t), tok, 1, "dial: i/o timeout", now) }); err != nil {
			t.Fatal(err)
		}
		keeps("a noted error")
		if err := persist(func() error { return h.Store.Release(ctx(t), tok, 6) }); err != nil {
			t.Fatal(err)
		}
		keeps("a release")
		// An unowned session's acquire keeps the standby: it stands by for
		// the new owner; so does one naming a standby gone that is not
		// taking anything over.
		it, err := h.Store.Acquire(ctx(t), id, "w3", lease.From{StandbyGone: "w2"})
		if err != nil || it.Owner != "w3" || it.Standby != "w2" || it.LastSeq != 6 {
			t.Fatalf("acquire of the released session: %+v %v", it, err)
		}
		keeps("an unowned session's acquire")
		t3 := lease.Token{ConnectionID: id, Owner: "w3", Epoch: it.Epoch}
		if err := persist(func() error { return h.Store.Handoff(ctx(t), t3, 7, "w4", now) }); err != nil {
			t.Fatal(err)
		}
		keeps("a hand-off")
		it, err = h.Store.Acquire(ctx(t), id, "w4", lease.From{})
		if err != nil || it.Owner != "w4" || it.Standby != "w2" {
			t.Fatalf("acquire by the hand-off's receiver: %+v %v", it, err)
		}
		keeps("a hand-off's acquire")
		// A hand-off to the standby's worker is its promotion.
		t4 := lease.Token{ConnectionID: id, Owner: "w4", Epoch: it.Epoch}
		if err := persist(func() error { return h.Store.Handoff(ctx(t), t4, 8, "w2", now) }); err != nil {
			t.Fatal(err)
		}
		keeps("a hand-off to the standby")
		it, err = h.Store.Acquire(ctx(t), id, "w2", lease.From{Standby: &st})
		if err != nil || it.Owner != "w2" || it.Standby != "" || it.LastSeq != 8 {
			t.Fatalf("the standby's acquire of its hand-off: %+v %v", it, err)
		}

		_, ft := acquired(t, h, "sbkeep", "w1")
		_, fst := assign(t, h, ft.ConnectionID, "w2", 1, nil)
		if err := persist(func() error { return h.Store.Fail(ctx(t), ft, 1, lease.NoSeq, "handshake refused: HTTP 403", now) }); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, h.Store, ft.ConnectionID); got.Standby != "w2" || got.StandbyEpoch != fst.Epoch || !got.Failed() {
			t.Fatalf("a fail touched the standby: %+v", got)
		}
	})

	t.Run("WorkerZoneRecorded", func(t *testing.T) {
		h := newHarness(t)
		id := NewID("zone")
		rec := Worker(id)
		rec.Zone = "eu-west-1b"
		if err := persist(func() error { return h.Store.Register(ctx(t), rec) }); err != nil && !errors.Is(err, lease.ErrWorkerExists) {
			t.Fatal(err)
		}
		if got := mustWorker(t, h.Store, id); got.Zone != "eu-west-1b" {
			t.Fatalf("record read back: zone %q", got.Zone)
		}
		eventually(t, "get workers does not show the zone", func() bool {
			recs, err := h.Store.GetWorkers(ctx(t), []string{id})
			if err != nil {
				t.Fatalf("get workers: %v", err)
			}
			return slices.ContainsFunc(recs, func(r lease.WorkerRecord) bool { return r.Zone == "eu-west-1b" })
		})
	})
}
