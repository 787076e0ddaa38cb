// Package leasetest owns the store conformance suite: one set of tests that
// every lease.Store implementation (memstore, dynamostore) must pass, so the
// in-memory reference and the DynamoDB store cannot drift apart.
package leasetest

import (
	"context"
	"errors"
	"fmt"
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
	runAcquire(t, newHarness, opts)
	runLiveness(t, newHarness, opts)
	runIndexes(t, newHarness, opts)
	runOwnerWrites(t, newHarness, opts)
	runFailed(t, newHarness, opts)
}
