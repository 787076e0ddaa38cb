package leasetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// runLiveness: the liveness transitions: register, heartbeat (an ambiguous
// one retried), the death declaration and its fencing, the mailbox, leave
// and the DONE list, the fleet read.
func runLiveness(t *testing.T, newHarness func(t *testing.T) Harness, opts Options) {
	t.Run("RegisterAndHeartbeat", func(t *testing.T) {
		h := newHarness(t)
		w := register(t, h, "reg")
		wantErr(t, "register of an existing id", h.Store.Register(ctx(t), Worker(w)), lease.ErrWorkerExists)
		r := mustWorker(t, h.Store, w)
		// A boot id: the same process registering again (its first attempt
		// applied, its answer lost) is registered; another process with
		// the same worker id is refused.
		booted := Worker(NewID("boot"))
		booted.BootID = "boot-1"
		if err := h.Store.Register(ctx(t), booted); err != nil {
			t.Fatalf("register with a boot id: %v", err)
		}
		if err := h.Store.Register(ctx(t), booted); err != nil {
			t.Fatalf("the same process's register again (its first attempt applied): %v", err)
		}
		other := booted
		other.BootID = "boot-2"
		wantErr(t, "register of the id by another process", h.Store.Register(ctx(t), other), lease.ErrWorkerExists)
		if got := mustWorker(t, h.Store, booted.ID); got.BootID != "boot-1" {
			t.Fatalf("boot id %q after another process's register, want boot-1", got.BootID)
		}
		if r.ID != w || !r.Alive() || r.Epoch != 1 || r.HeartbeatSeq != 0 || r.TTL != 10*time.Second || r.List != schema.WorkerListAlive ||
			r.Capacity != 1000 || r.AdminAddr != "10.0.0.1:8081" || r.StartedAtMs != now || r.Host != "ip-10-0-0-1.ec2.internal" || r.Pid != 4242 {
			t.Fatalf("registered record: %+v", r)
		}
		got, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: 1, AtMs: now + 1000, Load: 7, Capacity: 900})
		if err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
		if got.HeartbeatSeq != 1 || got.HeartbeatAtMs != now+1000 || got.Load != 7 || got.Capacity != 900 || got.AdminAddr != "10.0.0.1:8081" || !got.Alive() || got.Epoch != 1 {
			t.Fatalf("heartbeat returned %+v", got)
		}
		got, err = h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: 2, AtMs: now + 2000, Load: 8, Capacity: 900, AdminAddr: "10.0.0.2:8081"})
		if err != nil || got.AdminAddr != "10.0.0.2:8081" {
			t.Fatalf("heartbeat with a new admin address: %+v %v", got, err)
		}
		if r := mustWorker(t, h.Store, w); r.HeartbeatSeq != 2 || r.Load != 8 {
			t.Fatalf("record after heartbeats: %+v", r)
		}
		_, err = h.Store.Heartbeat(ctx(t), NewID("nobody"), 1, lease.Heartbeat{Seq: 1})
		wantErr(t, "heartbeat of a missing worker", err, lease.ErrWorkerNotFound)
		_, err = h.Store.Heartbeat(ctx(t), w, 2, lease.Heartbeat{Seq: 3})
		wantErr(t, "heartbeat at another epoch", err, lease.ErrWorkerDead)
		_, err = h.Store.GetWorker(ctx(t), NewID("nobody"))
		wantErr(t, "get of a missing worker", err, lease.ErrWorkerNotFound)
		eventually(t, "a registered worker is not listed ALIVE", func() bool { return listed(t, h.Store, schema.WorkerListAlive)[w] })
	})

	t.Run("AmbiguousHeartbeatRetriedKeepsLiveness", func(t *testing.T) {
		h := newHarness(t)
		w := register(t, h, "ambiguous")
		// Attempt n is applied but its reply is lost; the retry carries n+1.
		if _, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: 1, AtMs: now + 1000}); err != nil {
			t.Fatal(err)
		}
		// The same attempt again (the SDK retrying one that was applied):
		// it finds its own beat, which counts.
		if r, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: 1, AtMs: now + 1000}); err != nil || r.HeartbeatSeq != 1 || !r.Alive() {
			t.Fatalf("the same heartbeat again: %+v %v", r, err)
		}
		got, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: 2, AtMs: now + 1100})
		if err != nil {
			t.Fatalf("retried heartbeat: %v", err)
		}
		if got.HeartbeatSeq != 2 || !got.Alive() {
			t.Fatalf("after the retry: %+v", got)
		}
		// A stale attempt arriving late (lower or equal counter) is refused,
		// transiently: the worker is not dead, and the counter stays.
		for _, seq := range []int64{1, 2} {
			_, err = h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: seq, AtMs: now + 900})
			if err == nil || !lease.IsTransient(err) || errors.Is(err, lease.ErrWorkerDead) {
				t.Fatalf("stale heartbeat %d: got %v, want a transient refusal", seq, err)
			}
		}
		if r := mustWorker(t, h.Store, w); r.HeartbeatSeq != 2 || r.HeartbeatAtMs != now+1100 || !r.Alive() {
			t.Fatalf("a stale heartbeat changed the record: %+v", r)
		}
		if _, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: 5, AtMs: now + 2000}); err != nil {
			t.Fatalf("the next heartbeat: %v", err)
		}
	})

	t.Run("DeclareDeadOnlyByTheCounterRule", func(t *testing.T) {
		h := newHarness(t)
		w := register(t, h, "live")
		if _, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: 1, AtMs: now + 1000}); err != nil {
			t.Fatal(err)
		}
		// The observer saw counter 0; the worker has heartbeated since.
		wantErr(t, "declare dead at an old counter", h.Store.DeclareDead(ctx(t), w, 1, 0, "obs", now+20_000), lease.ErrWorkerAlive)
		// Right counter, wrong epoch.
		wantErr(t, "declare dead at another epoch", h.Store.DeclareDead(ctx(t), w, 2, 1, "obs", now+20_000), lease.ErrWorkerAlive)
		if r := mustWorker(t, h.Store, w); !r.Alive() || r.Epoch != 1 || r.HeartbeatSeq != 1 {
			t.Fatalf("a refused declaration changed the record: %+v", r)
		}
		if err := h.Store.DeclareDead(ctx(t), w, 1, 1, "obs", now+20_000); err != nil {
			t.Fatalf("declare dead at the seen counter: %v", err)
		}
		r := mustWorker(t, h.Store, w)
		if r.State != schema.WorkerDead || r.Epoch != 2 || r.List != schema.WorkerListGone || r.DeclaredBy != "obs" || r.EndedAtMs != now+20_000 {
			t.Fatalf("declared record: %+v", r)
		}
		// The same declaration again (the SDK retrying one that was
		// applied) finds itself done.
		if err := h.Store.DeclareDead(ctx(t), w, 1, 1, "obs", now+20_000); err != nil {
			t.Fatalf("the same declaration again: %v", err)
		}
		// DEAD is terminal: another declaration, at either epoch, fails.
		wantErr(t, "second declaration", h.Store.DeclareDead(ctx(t), w, 1, 1, "obs2", now+21_000), lease.ErrWorkerDead)
		wantErr(t, "declaration at the new epoch", h.Store.DeclareDead(ctx(t), w, 2, 1, "obs2", now+21_000), lease.ErrWorkerDead)
		wantErr(t, "declare a missing worker", h.Store.DeclareDead(ctx(t), NewID("nobody"), 1, 0, "obs", now), lease.ErrWorkerNotFound)
		eventually(t, "a dead worker must be listed GONE, not ALIVE", func() bool {
			return !listed(t, h.Store, schema.WorkerListAlive)[w] && listed(t, h.Store, schema.WorkerListGone)[w]
		})
	})

	t.Run("DeadWorkerIsFenced", func(t *testing.T) {
		h := newHarness(t)
		d := register(t, h, "dead")
		_, old := acquired(t, h, "fenced", d)
		id := old.ConnectionID
		if err := h.Store.Checkpoint(ctx(t), old, 5); err != nil {
			t.Fatal(err)
		}
		if err := h.Store.DeclareDead(ctx(t), d, 1, 0, "obs", now+20_000); err != nil {
			t.Fatal(err)
		}
		_, err := h.Store.Heartbeat(ctx(t), d, 1, lease.Heartbeat{Seq: 1, AtMs: now + 21_000})
		wantErr(t, "heartbeat of a dead worker", err, lease.ErrWorkerDead)
		_, err = h.Store.Heartbeat(ctx(t), d, 2, lease.Heartbeat{Seq: 2, AtMs: now + 21_000})
		wantErr(t, "heartbeat of a dead worker at its new epoch", err, lease.ErrWorkerDead)
		wantErr(t, "leave of a dead worker", h.Store.Leave(ctx(t), d, 1, schema.WorkerListDone, now+21_000), lease.ErrWorkerDead)
		eventually(t, "the session is not listed under the dead worker", func() bool { return ownedBy(t, h.Store, d)[id].Epoch == old.Epoch })
		// A reconciler takes the session over from the dead tenure and
		// resumes from its last checkpoint.
		it, err := h.Store.Acquire(ctx(t), id, "w2", lease.From{Prev: &old})
		if err != nil {
			t.Fatalf("takeover: %v", err)
		}
		if it.Owner != "w2" || !opts.epochAfter(it.Epoch, old.Epoch) || it.LastSeq != 5 {
			t.Fatalf("takeover: %+v", it)
		}
		cur := lease.Token{ConnectionID: id, Owner: "w2", Epoch: it.Epoch}
		// The dead tenure can write nothing any more.
		wantErr(t, "dead tenure's checkpoint", h.Store.Checkpoint(ctx(t), old, 9), lease.ErrLeaseLost)
		wantErr(t, "dead tenure's release", h.Store.Release(ctx(t), old, 9), lease.ErrLeaseLost)
		wantErr(t, "dead tenure's release without checkpoint", h.Store.Release(ctx(t), old, lease.NoSeq), lease.ErrLeaseLost)
		wantErr(t, "dead tenure's fail", h.Store.Fail(ctx(t), old, 1, lease.NoSeq, "x", now), lease.ErrLeaseLost)
		wantErr(t, "dead tenure's note", h.Store.NoteError(ctx(t), old, 1, "x", now), lease.ErrLeaseLost)
		// Same owner name, old epoch: still fenced.
		wantErr(t, "right owner, old epoch", h.Store.Checkpoint(ctx(t), lease.Token{ConnectionID: id, Owner: "w2", Epoch: old.Epoch}, 9), lease.ErrLeaseLost)
		got := mustGet(t, h.Store, id)
		if got.Owner != "w2" || got.Epoch != cur.Epoch || got.LastSeq != 5 || got.LastError != "" || got.Failed() {
			t.Fatalf("fenced writes changed the session: %+v", got)
		}
		eventually(t, "the session is still listed under the dead owner", func() bool { _, ok := ownedBy(t, h.Store, d)[id]; return !ok })
		// A second takeover from the same dead tenure loses to the first.
		_, err = h.Store.Acquire(ctx(t), id, "w3", lease.From{Prev: &old})
		wantHeld(t, "second takeover", err, cur)
		if err := h.Store.Checkpoint(ctx(t), cur, 9); err != nil {
			t.Fatalf("the new owner's checkpoint: %v", err)
		}
	})

	t.Run("MailboxAndAcks", func(t *testing.T) {
		h := newHarness(t)
		w := register(t, h, "mbox")
		var ids []string
		for i := 0; i < 3; i++ {
			_, tok := acquired(t, h, "mail", w)
			ids = append(ids, tok.ConnectionID)
			h.SetDesired(t, tok.ConnectionID, schema.StateStopped)
		}
		rec, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: 1, AtMs: now})
		if err != nil {
			t.Fatal(err)
		}
		if m := slices.Sorted(slices.Values(rec.Mailbox)); !slices.Equal(m, slices.Sorted(slices.Values(ids))) {
			t.Fatalf("mailbox %v, want %v", rec.Mailbox, ids)
		}
		// Acks remove what they name (and an unknown id is harmless).
		rec, err = h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: 2, AtMs: now, Ack: []string{ids[0], "never-there"}})
		if err != nil {
			t.Fatal(err)
		}
		if m := slices.Sorted(slices.Values(rec.Mailbox)); !slices.Equal(m, slices.Sorted(slices.Values(ids[1:]))) {
			t.Fatalf("mailbox after ack %v, want %v", rec.Mailbox, ids[1:])
		}
		// An id acked twice in one heartbeat is no error (an invalid
		// request here would stop the worker's heartbeats for good).
		rec, err = h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: 3, AtMs: now, Ack: []string{ids[1], ids[2], ids[1]}})
		if err != nil || len(rec.Mailbox) != 0 {
			t.Fatalf("mailbox after acking all: %v %v", rec.Mailbox, err)
		}
		if r := mustWorker(t, h.Store, w); len(r.Mailbox) != 0 {
			t.Fatalf("stored mailbox %v", r.Mailbox)
		}
	})

	t.Run("LeaveListAndMarkDone", func(t *testing.T) {
		h := newHarness(t)
		left, gone, alive := register(t, h, "left"), register(t, h, "gone"), register(t, h, "alive")
		if err := h.Store.Leave(ctx(t), left, 1, schema.WorkerListDone, now+5000); err != nil {
			t.Fatalf("leave: %v", err)
		}
		// A retry after an ambiguous leave: already LEFT at that epoch.
		if err := h.Store.Leave(ctx(t), left, 1, schema.WorkerListDone, now+5000); err != nil {
			t.Fatalf("retried leave: %v", err)
		}
		wantErr(t, "leave at another epoch", h.Store.Leave(ctx(t), alive, 2, schema.WorkerListDone, now), lease.ErrWorkerDead)
		wantErr(t, "leave of a missing worker", h.Store.Leave(ctx(t), NewID("nobody"), 1, schema.WorkerListDone, now), lease.ErrWorkerNotFound)
		if err := h.Store.Leave(ctx(t), gone, 1, schema.WorkerListGone, now+5000); err != nil {
			t.Fatalf("leave owning sessions: %v", err)
		}
		r := mustWorker(t, h.Store, left)
		if r.State != schema.WorkerLeft || r.List != schema.WorkerListDone || r.EndedAtMs != now+5000 || r.Epoch != 1 {
			t.Fatalf("left record: %+v", r)
		}
		_, err := h.Store.Heartbeat(ctx(t), left, 1, lease.Heartbeat{Seq: 1})
		wantErr(t, "heartbeat after leave", err, lease.ErrWorkerDead)
		wantErr(t, "declare a left worker dead", h.Store.DeclareDead(ctx(t), left, 1, 0, "obs", now), lease.ErrWorkerDead)
		eventually(t, "the lists do not show alive ALIVE, gone GONE and left DONE", func() bool {
			a, g, d := listed(t, h.Store, schema.WorkerListAlive), listed(t, h.Store, schema.WorkerListGone), listed(t, h.Store, schema.WorkerListDone)
			return a[alive] && !a[left] && !a[gone] && g[gone] && !g[left] && d[left] && !d[gone]
		})
		limited, err := h.Store.ListWorkers(ctx(t), schema.WorkerListAlive, 1)
		if err != nil || len(limited) != 1 {
			t.Fatalf("list with limit 1: %v %v", limited, err)
		}
		wantErr(t, "mark an alive worker done", h.Store.MarkDone(ctx(t), alive), lease.ErrWorkerAlive)
		wantErr(t, "mark a missing worker done", h.Store.MarkDone(ctx(t), NewID("nobody")), lease.ErrWorkerNotFound)
		if err := h.Store.MarkDone(ctx(t), gone); err != nil {
			t.Fatalf("mark done: %v", err)
		}
		eventually(t, "a record marked done is not listed DONE only", func() bool {
			return !listed(t, h.Store, schema.WorkerListGone)[gone] && listed(t, h.Store, schema.WorkerListDone)[gone]
		})
		if r := mustWorker(t, h.Store, gone); r.State != schema.WorkerLeft || r.List != schema.WorkerListDone {
			t.Fatalf("marked record: %+v", r)
		}
		// Two reconcilers may both decide a record is done: the second
		// MarkDone finds it DONE and leaves it so.
		if err := h.Store.MarkDone(ctx(t), gone); err != nil {
			t.Fatalf("mark a done record done again: %v", err)
		}
		if r := mustWorker(t, h.Store, gone); r.State != schema.WorkerLeft || r.List != schema.WorkerListDone || r.EndedAtMs != now+5000 {
			t.Fatalf("record marked done twice: %+v", r)
		}
		dead := register(t, h, "dead")
		if err := h.Store.DeclareDead(ctx(t), dead, 1, 0, "obs", now+7000); err != nil {
			t.Fatal(err)
		}
		if err := h.Store.MarkDone(ctx(t), dead); err != nil {
			t.Fatalf("mark a dead worker done: %v", err)
		}
		if r := mustWorker(t, h.Store, dead); r.State != schema.WorkerDead || r.List != schema.WorkerListDone || r.Epoch != 2 {
			t.Fatalf("dead record marked done: %+v", r)
		}
	})

	t.Run("GetWorkersReadsTheFleet", func(t *testing.T) {
		h := newHarness(t)
		a, b := register(t, h, "fleet"), register(t, h, "fleet")
		if _, err := h.Store.Heartbeat(ctx(t), a, 1, lease.Heartbeat{Seq: 1, AtMs: now, Load: 5, Capacity: 10, Draining: true, MovesPerMin: 3}); err != nil {
			t.Fatal(err)
		}
		// Eventually consistent: a read may miss a write it follows.
		var recs []lease.WorkerRecord
		eventually(t, "get workers does not show both records with the heartbeat", func() bool {
			var err error
			recs, err = h.Store.GetWorkers(ctx(t), []string{a, b, NewID("nobody")})
			if err != nil {
				t.Fatalf("get workers: %v", err)
			}
			return len(recs) == 2 && slices.ContainsFunc(recs, func(r lease.WorkerRecord) bool { return r.ID == a && r.HeartbeatSeq == 1 })
		})
		for _, r := range recs {
			if r.ID == a && (r.Load != 5 || r.Capacity != 10 || !r.Draining || r.MovesPerMin != 3) {
				t.Fatalf("record of %s: %+v", a, r)
			}
			if r.ID == b && (r.Draining || r.Load != 0) {
				t.Fatalf("record of %s: %+v", b, r)
			}
		}
	})
}
