// Package leasetest owns the store conformance suite: one set of tests that
// every lease.Store implementation (memstore, dynamostore) must pass, so the
// in-memory reference and the DynamoDB store cannot drift apart.
package leasetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// Put writes a whole session as ingest (and earlier tenures) would
	// have: the session item, in the unowned index while STARTED, not
	// FAILED and without owner, with its checkpoint (last_seq) when
	// LastSeq is not NoSeq.
	Put func(t testing.TB, it lease.Item)
	// SetDesired is ingest's stop or start of an existing session: a stop
	// takes it out of the unowned index and, when it has an owner, puts
	// its id in the owner's mailbox (while the owner is ALIVE); a start of
	// a session without owner puts it back in the unowned index.
	SetDesired func(t testing.TB, id, state string)
	// Restart is ingest's start of a FAILED session: generation + 1,
	// failed_generation removed, back in the unowned index, under the
	// condition that the item is still FAILED (an error otherwise).
	Restart func(t testing.TB, id string) error
	// SetSpec is ingest's start of a STARTED session with another
	// configuration: spec replaced, generation + 1 (the superseded spec item,
	// on a store that keeps one, deleted). Nil: RunSpec's cases that need it
	// fail.
	SetSpec func(t testing.TB, id, spec string)
	// PutInline is Put as an older ingest wrote the session: the spec
	// inline in the session item. Nil: the store has one layout (Put).
	PutInline func(t testing.TB, it lease.Item)
	// Racer, when set, is the store racer r of the exactly-one-winner test
	// acquires through: another worker's, with a client of its own (and so
	// the SDK's retry budget of its own, as every worker has). Nil: Store.
	Racer func(r int) lease.Store
}

// Options size the suite.
type Options struct {
	// RaceRounds and Racers size the exactly-one-winner test (≥ 200 × 64).
	RaceRounds, Racers int
	// Ambiguous says that the store's engine may apply a write and still
	// answer with an error (DynamoDB's 500 after the write, a lost reply),
	// which the SDK retries. A retried acquire whose first attempt applied
	// is a new tenure of the same owner (see AcquireNewSession), so an
	// acquire's epoch may be more than one above the tenure before it.
	Ambiguous bool
	// BeforeRace, when set, runs before each round of the exactly-one-winner
	// test with the session's id, so that a harness can add a fault to the
	// round (a model of DynamoDB making the key hot).
	BeforeRace func(round int, id string)
}

// epochAfter is whether epoch is the one an acquire after a tenure at prev
// gets: prev+1, or more on an ambiguous store.
func (o Options) epochAfter(epoch, prev int64) bool {
	return epoch == prev+1 || (o.Ambiguous && epoch > prev+1)
}

var idSeq atomic.Int64

// NewID returns a connection (or worker) id unique within the test binary.
func NewID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000_000, idSeq.Add(1))
}

// Started returns a fresh STARTED item that was never owned.
func Started(id string) lease.Item {
	return lease.Item{
		ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1,
		// The stores carry the spec as it is, never reading it.
		Spec:            `{"ws_url":"wss://feed.example/` + id + `?token=secret","headers":{"Authorization":"Bearer x"},"idle_timeout":"1h"}`,
		CheckpointEvery: 5 * time.Second, LastSeq: lease.NoSeq,
	}
}

// Worker returns the record a worker registers with (ALIVE, epoch 1).
func Worker(id string) lease.WorkerRecord {
	return lease.WorkerRecord{
		ID: id, State: schema.WorkerAlive, Epoch: 1, HeartbeatSeq: 0, HeartbeatAtMs: now, TTL: 10 * time.Second,
		Load: 0, Capacity: 1000, AdminAddr: "10.0.0.1:8081", List: schema.WorkerListAlive, StartedAtMs: now,
		Host: "ip-10-0-0-1.ec2.internal", Pid: 4242,
	}
}

const now = int64(1_800_000_000_000) // a fixed wall time in ms

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

func mustWorker(t testing.TB, s lease.Store, id string) lease.WorkerRecord {
	t.Helper()
	r, err := s.GetWorker(ctx(t), id)
	if err != nil {
		t.Fatalf("get worker %s: %v", id, err)
	}
	return r
}

func register(t testing.TB, h Harness, prefix string) string {
	t.Helper()
	id := NewID(prefix)
	tries := 0
	err := persist(func() error {
		tries++
		err := h.Store.Register(ctx(t), Worker(id))
		if tries > 1 && errors.Is(err, lease.ErrWorkerExists) {
			return nil // an earlier attempt applied, its answer lost
		}
		return err
	})
	if err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	return id
}

// persist runs a setup call (not the behaviour under test) again while it
// fails with an error that is none of the store's answers (lease's typed
// errors, throttling aside), up to 5 times: on a store whose engine loses
// requests and replies (the DynamoDB model: 3 % of attempts), the SDK's 3
// attempts all meet one about once in 37,000 calls, and the suite's
// thousands of setup calls failed a CI run on it. Each call persisted is
// one a worker would make again (a register, an acquire, a checkpoint at
// the same seq, a heartbeat or a declaration repeated: the suite shows
// each repeat answered as the first).
func persist(call func() error) error {
	var err error
	for range 5 {
		if err = call(); err == nil || !transient(err) {
			return err
		}
	}
	return err
}

// transient: err is not one of the store's answers (a lost request or
// reply, a timeout) or is a throttle.
func transient(err error) bool {
	if errors.Is(err, lease.ErrThrottled) {
		return true
	}
	for _, answer := range []error{lease.ErrNotFound, lease.ErrStopped, lease.ErrHeld, lease.ErrLeaseLost, lease.ErrSeqRegress,
		lease.ErrUntrusted, lease.ErrReleased, lease.ErrFailed, lease.ErrNewGeneration, lease.ErrWorkerDead,
		lease.ErrWorkerNotFound, lease.ErrWorkerExists, lease.ErrWorkerAlive, lease.ErrStandbyHeld, lease.ErrStandbyLost,
		lease.ErrStandbyRefused, lease.ErrNoOwner, lease.ErrOwnStandby} {
		if errors.Is(err, answer) {
			return false
		}
	}
	return true
}

// acquired puts a fresh STARTED session (its id made from prefix) and
// acquires it for owner.
func acquired(t testing.TB, h Harness, prefix, owner string) (lease.Item, lease.Token) {
	t.Helper()
	id := NewID(prefix)
	h.Put(t, Started(id))
	var it lease.Item
	err := persist(func() (err error) { it, err = h.Store.Acquire(ctx(t), id, owner, lease.From{}); return err })
	if err != nil {
		t.Fatalf("acquire %s: %v", id, err)
	}
	return it, lease.Token{ConnectionID: id, Owner: owner, Epoch: it.Epoch}
}

func wantErr(t testing.TB, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func wantHeld(t testing.TB, what string, err error, cur lease.Token) {
	t.Helper()
	var he *lease.HeldError
	if !errors.As(err, &he) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("%s: got error %v, want a *HeldError", what, err)
	}
	if he.Current != cur {
		t.Fatalf("%s: HeldError names %v, want %v", what, he.Current, cur)
	}
}

func unowned(t testing.TB, s lease.Store) map[string]bool {
	t.Helper()
	ids, err := s.Unowned(ctx(t), 0)
	if err != nil {
		t.Fatalf("unowned: %v", err)
	}
	out := map[string]bool{}
	for _, id := range ids {
		if out[id] {
			t.Fatalf("unowned lists %s twice", id)
		}
		out[id] = true
	}
	return out
}

func ownedBy(t testing.TB, s lease.Store, owner string) map[string]lease.Owned {
	t.Helper()
	got, err := s.OwnedBy(ctx(t), owner, 0)
	if err != nil {
		t.Fatalf("owned by %s: %v", owner, err)
	}
	out := map[string]lease.Owned{}
	for _, o := range got {
		out[o.ConnectionID] = o
	}
	return out
}

// eventually waits until ok holds, for at most lease's IndexLagBound: the
// indexes (Unowned, OwnedBy, ListWorkers) and GetWorkers' eventually
// consistent reads may lag the table, as DynamoDB's do, but not longer.
func eventually(t testing.TB, what string, ok func() bool) {
	t.Helper()
	bound := lease.DefaultConfig("x").IndexLagBound
	deadline := time.Now().Add(bound)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s (waited %s, the bound on index lag)", what, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func listed(t testing.TB, s lease.Store, list string) map[string]bool {
	t.Helper()
	ids, err := s.ListWorkers(ctx(t), list, 0)
	if err != nil {
		t.Fatalf("list workers %s: %v", list, err)
	}
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
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
	runStandby(t, newHarness, opts)
	runGiven(t, newHarness, opts)

	t.Run("AcquireNewSession", func(t *testing.T) {
		h := newHarness(t)
		id := NewID("acq")
		h.Put(t, Started(id))
		eventually(t, "a new STARTED session is not listed as unowned", func() bool { return unowned(t, h.Store)[id] })
		it, err := h.Store.Acquire(ctx(t), id, "w1", lease.From{})
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		want := Started(id)
		if it.Owner != "w1" || !opts.epochAfter(it.Epoch, 0) || it.LastSeq != lease.NoSeq {
			t.Fatalf("acquired item = owner %q epoch %d last_seq %d; want w1, 1, none", it.Owner, it.Epoch, it.LastSeq)
		}
		if it.Spec != want.Spec || it.Generation != 1 ||
			it.CheckpointEvery != want.CheckpointEvery || it.DesiredState != schema.StateStarted {
			t.Fatalf("acquire must return the session: %+v", it)
		}
		eventually(t, "an acquired session is still listed as unowned", func() bool { return !unowned(t, h.Store)[id] })
		var o lease.Owned
		eventually(t, "an acquired session is not listed under its owner", func() bool { var ok bool; o, ok = ownedBy(t, h.Store, "w1")[id]; return ok })
		if o.Owner != "w1" || o.Epoch != it.Epoch || o.DesiredState != schema.StateStarted || o.Generation != 1 {
			t.Fatalf("owned by w1: %+v", o)
		}
		// Acquiring one's own session again (an acquire retried after an
		// ambiguous attempt) is a new tenure.
		again, err := h.Store.Acquire(ctx(t), id, "w1", lease.From{})
		if err != nil {
			t.Fatalf("re-acquire by the owner: %v", err)
		}
		if !opts.epochAfter(again.Epoch, it.Epoch) || again.Owner != "w1" {
			t.Fatalf("re-acquire: %+v", again)
		}
		if got := mustGet(t, h.Store, id); got.Owner != "w1" || got.Epoch != again.Epoch || got.LastSeq != lease.NoSeq {
			t.Fatalf("get after acquires: %+v", got)
		}
	})

	t.Run("AcquireRefusals", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.Store.Acquire(ctx(t), NewID("missing"), "w1", lease.From{})
		wantErr(t, "acquire of a missing session", err, lease.ErrNotFound)
		_, err = h.Store.Get(ctx(t), NewID("missing"))
		wantErr(t, "get of a missing session", err, lease.ErrNotFound)

		stopped := NewID("stopped")
		it := Started(stopped)
		it.DesiredState = schema.StateStopped
		h.Put(t, it)
		_, err = h.Store.Acquire(ctx(t), stopped, "w1", lease.From{})
		wantErr(t, "acquire of a stopped session", err, lease.ErrStopped)
		if got := mustGet(t, h.Store, stopped); got.DesiredState != schema.StateStopped || got.Epoch != 0 || got.Owner != "" {
			t.Fatalf("a refused acquire changed the item: %+v", got)
		}

		failed := NewID("failed")
		it = Started(failed)
		gen := it.Generation
		it.FailedGeneration, it.LastError = &gen, "handshake refused: HTTP 401"
		h.Put(t, it)
		_, err = h.Store.Acquire(ctx(t), failed, "w1", lease.From{})
		wantErr(t, "acquire of a FAILED session", err, lease.ErrFailed)

		_, tok := acquired(t, h, "held", "w1")
		_, err = h.Store.Acquire(ctx(t), tok.ConnectionID, "w2", lease.From{})
		wantHeld(t, "acquire of an owned session", err, tok)
		// A prev that is not the current tenure does not take it over.
		for _, prev := range []lease.Token{{ConnectionID: tok.ConnectionID, Owner: "w1", Epoch: tok.Epoch - 1}, {ConnectionID: tok.ConnectionID, Owner: "w3", Epoch: tok.Epoch}} {
			_, err = h.Store.Acquire(ctx(t), tok.ConnectionID, "w2", lease.From{Prev: &prev})
			wantHeld(t, fmt.Sprintf("acquire with a stale prev %v", prev), err, tok)
		}
		if got := mustGet(t, h.Store, tok.ConnectionID); got.Owner != "w1" || got.Epoch != tok.Epoch {
			t.Fatalf("refused acquires changed the item: %+v", got)
		}
	})

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

	t.Run("ExactlyOneWinnerFromADeadWorker", func(t *testing.T) {
		h := newHarness(t)
		racer := func(int) lease.Store { return h.Store }
		if h.Racer != nil {
			racer = h.Racer
		}
		doubles, zeros := 0, 0
		start := time.Now()
		for round := 0; round < opts.RaceRounds; round++ {
			d := register(t, h, "d")
			_, prev := acquired(t, h, "race", d)
			id := prev.ConnectionID
			if err := persist(func() error { return h.Store.Checkpoint(ctx(t), prev, int64(round)) }); err != nil {
				t.Fatal(err)
			}
			if err := persist(func() error {
				_, err := h.Store.Heartbeat(ctx(t), d, 1, lease.Heartbeat{Seq: 1, AtMs: now})
				return err
			}); err != nil {
				t.Fatal(err)
			}
			// Its heartbeats stopped at counter 1: an observer declares it.
			if err := persist(func() error { return h.Store.DeclareDead(ctx(t), d, 1, 1, "obs", now+20_000) }); err != nil {
				t.Fatalf("round %d: declare dead: %v", round, err)
			}
			var (
				mu      sync.Mutex
				winners []lease.Item
				losers  []error
				wg      sync.WaitGroup
			)
			if opts.BeforeRace != nil {
				opts.BeforeRace(round, id)
			}
			gate := make(chan struct{})
			for r := 0; r < opts.Racers; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					<-gate
					// A transient refusal (throttled, unavailable) is no
					// answer: the racer tries again, as a worker's next
					// reconcile pass would, until it wins or is told who did
					// (for up to 30 s: a count of tries ran out on a hot
					// key whose few units a second 64 racers share).
					var (
						it  lease.Item
						err error
					)
					giveUp := time.Now().Add(30 * time.Second)
					for try := 0; ; try++ {
						it, err = racer(r).Acquire(context.Background(), id, fmt.Sprintf("a%d", r), lease.From{Prev: &prev})
						if !lease.IsTransient(err) || time.Now().After(giveUp) {
							break
						}
						time.Sleep(time.Duration(10+min(try, 19)*10) * time.Millisecond)
					}
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						winners = append(winners, it)
					} else {
						losers = append(losers, err)
					}
				}(r)
			}
			close(gate)
			wg.Wait()
			switch len(winners) {
			case 1:
			case 0:
				zeros++
				t.Errorf("round %d: no winner: %v", round, losers)
				continue
			default:
				doubles++
				t.Errorf("round %d: %d winners", round, len(winners))
				continue
			}
			w := winners[0]
			cur := lease.Token{ConnectionID: id, Owner: w.Owner, Epoch: w.Epoch}
			if !opts.epochAfter(w.Epoch, prev.Epoch) || w.LastSeq != int64(round) {
				t.Fatalf("round %d: winner %+v, want epoch %d last_seq %d", round, w, prev.Epoch+1, round)
			}
			for _, err := range losers {
				// A loser may have met the winner's first attempt of a
				// retried acquire (an ambiguous store): the same owner at
				// an epoch between.
				var he *lease.HeldError
				if opts.Ambiguous && errors.As(err, &he) && he.Current.Owner == cur.Owner && he.Current.Epoch > prev.Epoch && he.Current.Epoch <= cur.Epoch {
					continue
				}
				wantHeld(t, fmt.Sprintf("round %d: loser", round), err, cur)
			}
			if got := mustGet(t, h.Store, id); got.Owner != cur.Owner || got.Epoch != cur.Epoch {
				t.Fatalf("round %d: item %+v after the race, want %v", round, got, cur)
			}
		}
		if doubles != 0 || zeros != 0 {
			t.Fatalf("%d rounds with several winners, %d with none, of %d", doubles, zeros, opts.RaceRounds)
		}
		t.Logf("%d rounds × %d racers taking over a dead worker's session: exactly one winner every round (%s)", opts.RaceRounds, opts.Racers, time.Since(start).Round(time.Millisecond))
	})

	t.Run("StopAgainstAcquire", func(t *testing.T) {
		h := newHarness(t)
		rounds := max(opts.RaceRounds/4, 10)
		racers := make([]string, 4)
		for i := range racers {
			racers[i] = register(t, h, "stopper")
		}
		won, stoppedFirst := 0, 0
		for round := 0; round < rounds; round++ {
			id := NewID("stoprace")
			h.Put(t, Started(id))
			var (
				mu   sync.Mutex
				wins []string
				errs []error
				wg   sync.WaitGroup
			)
			gate := make(chan struct{})
			for _, w := range racers {
				wg.Add(1)
				go func(w string) {
					defer wg.Done()
					<-gate
					_, err := h.Store.Acquire(context.Background(), id, w, lease.From{})
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						wins = append(wins, w)
					} else {
						errs = append(errs, err)
					}
				}(w)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				h.SetDesired(t, id, schema.StateStopped)
			}()
			close(gate)
			wg.Wait()
			got := mustGet(t, h.Store, id)
			if got.DesiredState != schema.StateStopped {
				t.Fatalf("round %d: desired_state %q after a STOP raced acquires", round, got.DesiredState)
			}
			for _, err := range errs {
				if !errors.Is(err, lease.ErrStopped) && !errors.Is(err, lease.ErrHeld) {
					t.Fatalf("round %d: acquire error %v, want ErrStopped or ErrHeld", round, err)
				}
			}
			switch len(wins) {
			case 0:
				// The stop landed first: nobody owns it.
				stoppedFirst++
				if got.Owner != "" {
					t.Fatalf("round %d: owner %q without a successful acquire", round, got.Owner)
				}
				// On an ambiguous store a racer may have held it unawares
				// (its acquire applied, the reply lost, the retry refused)
				// when the stop landed, which then told it; the store ended
				// that tenure, and the worker acks an entry for a session it
				// does not hold.
				for _, w := range racers {
					if rec := mustWorker(t, h.Store, w); slices.Contains(rec.Mailbox, id) {
						if !opts.Ambiguous {
							t.Fatalf("round %d: the stop was put in %s's mailbox, though no acquire won", round, w)
						}
						if _, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: time.Now().UnixNano(), AtMs: now, Ack: []string{id}}); err != nil {
							t.Fatal(err)
						}
					}
				}
			case 1:
				// The acquire landed first: the stop found the owner and told
				// it through its mailbox.
				won++
				w := wins[0]
				if got.Owner != w {
					t.Fatalf("round %d: owner %q, the winner was %s", round, got.Owner, w)
				}
				rec, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: time.Now().UnixNano(), AtMs: now})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(rec.Mailbox, id) {
					t.Fatalf("round %d: the stop of %s is not in its owner's mailbox %v", round, id, rec.Mailbox)
				}
				// The owner releases the stopped session: it is not unowned-STARTED.
				if err := h.Store.Release(ctx(t), lease.Token{ConnectionID: id, Owner: w, Epoch: got.Epoch}, 3); err != nil {
					t.Fatalf("round %d: release of the stopped session: %v", round, err)
				}
				if _, err := h.Store.Heartbeat(ctx(t), w, 1, lease.Heartbeat{Seq: time.Now().UnixNano(), AtMs: now, Ack: []string{id}}); err != nil {
					t.Fatal(err)
				}
				if after := mustGet(t, h.Store, id); after.Owner != "" || after.LastSeq != 3 || after.DesiredState != schema.StateStopped {
					t.Fatalf("round %d: after release: %+v", round, after)
				}
			default:
				t.Fatalf("round %d: %d winners", round, len(wins))
			}
			_, err := h.Store.Acquire(ctx(t), id, "late", lease.From{})
			wantErr(t, "acquire after stop", err, lease.ErrStopped)
			eventually(t, fmt.Sprintf("round %d: a stopped session is listed as unowned", round), func() bool { return !unowned(t, h.Store)[id] })
		}
		for _, w := range racers {
			rec := mustWorker(t, h.Store, w)
			if len(rec.Mailbox) != 0 {
				t.Fatalf("acks left %s's mailbox %v", w, rec.Mailbox)
			}
		}
		t.Logf("%d rounds: %d acquires won before the stop, %d stops first", rounds, won, stoppedFirst)
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
		// A start of the stopped, unowned session puts it back.
		h.SetDesired(t, stopped, schema.StateStarted)
		eventually(t, "a restarted unowned session is not listed unowned", func() bool { return unowned(t, h.Store)[stopped] })
	})

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
