package streamer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// batchQueue is a work queue whose batched publishes take a round trip
// each and are counted.
type batchQueue struct {
	idleQueue
	mu      sync.Mutex
	batches int
	sent    map[string]bool
}

func (q *batchQueue) PublishBatch(_ context.Context, ns []notify.Notification) []error {
	time.Sleep(5 * time.Millisecond)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.batches++
	for _, n := range ns {
		q.sent[n.ConnectionID] = true
	}
	return make([]error, len(ns))
}

// A takeover announces the sessions no receiver took all at once, batched,
// not one batch (a round trip) after another per session.
func TestTakeoverAnnouncesItsSessionsInFullBatches(t *testing.T) {
	q := &batchQueue{sent: map[string]bool{}}
	w := bareWorker(t, "w-announcer", memstore.New(), q, nil)
	const n = 200
	var cands []lease.Candidate
	for i := range n {
		cands = append(cands, lease.Candidate{ConnectionID: fmt.Sprintf("s-%03d", i), Prev: &lease.Token{ConnectionID: fmt.Sprintf("s-%03d", i), Owner: "w-dead", Epoch: 1}})
	}
	w.announceAll(context.Background(), zerolog.Nop(), cands)
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.sent) != n {
		t.Fatalf("%d of %d sessions announced", len(q.sent), n)
	}
	// Batched (one at a time, each session was a batch of its own): the
	// first batches go before the queue fills, so not all are full.
	if most := n / 2; q.batches > most {
		t.Fatalf("%d batches for %d sessions: want at most %d (of up to %d sessions)", q.batches, n, most, notify.MaxBatch)
	}
}

// A receiver that cannot take a takeover's part (here it is not running:
// it began to stop while the part waited) announces it on the work queue,
// since other workers' reconcile passes leave a dead worker's sessions to
// its takeover for lease.Config.GoneGrace; a move's it leaves to its
// sender.
func TestReceiverAnnouncesATakeoverPartItCannotTake(t *testing.T) {
	st := memstore.New()
	deadWorker(t, st, "w-dead")
	q := &batchQueue{sent: map[string]bool{}}
	w := bareWorker(t, "w-receiver", st, q, nil)
	w.takeHandedOff("s-part", &lease.Token{ConnectionID: "s-part", Owner: "w-dead", Epoch: 1}, time.Now())
	w.takeHandedOff("s-move", nil, time.Now())
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.sent["s-part"] || q.sent["s-move"] {
		t.Fatalf("announced %v: want the takeover's part only", q.sent)
	}
}

// bareWorker is a Worker made by New and never run (its keeper not
// registered), logging nowhere, its sink discarding; q may be nil (no work
// queue), mod adjusts the configuration.
func bareWorker(t *testing.T, id string, st lease.Store, q WorkQueue, mod func(*Config)) *Worker {
	t.Helper()
	cfg := DefaultConfig()
	cfg.WorkerID = id
	if mod != nil {
		mod(&cfg)
	}
	log := zerolog.Nop()
	w, err := New(cfg, Deps{Store: st, Queue: q, Handler: sink.Discard, Logger: &log, Metrics: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// deadWorker registers worker id on st, has it acquire sessions, and
// declares it dead.
func deadWorker(t *testing.T, st *memstore.Store, id string, sessions ...string) {
	t.Helper()
	ctx := context.Background()
	k, err := lease.NewKeeper(st, clock.Real{}, lease.DefaultConfig(id), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		if _, err := k.Acquire(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := st.GetWorker(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeclareDead(ctx, id, rec.Epoch, rec.HeartbeatSeq, "w-declarer", time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
}

// failQueue is a work queue whose publishes all fail, and whose first
// receive brings a start notification (for a session that does not exist).
type failQueue struct {
	idleQueue
	received atomic.Bool
}

func (q *failQueue) Receive(context.Context, int) ([]notify.Message, error) {
	if q.received.Swap(true) {
		return nil, nil
	}
	return []notify.Message{{MessageID: "m-1", Notification: notify.Notification{Type: schema.NotifyStart, ConnectionID: "s-none", Generation: 1}}}, nil
}

func (*failQueue) PublishBatch(_ context.Context, ns []notify.Notification) []error {
	errs := make([]error, len(ns))
	for i := range errs {
		errs[i] = errors.New("queue down")
	}
	return errs
}

// graceRig is a declarer (w-declarer, on st wrapped by wrap, with the
// failQueue) of w-dead, which owned s-1 and s-2, once its consumer has
// received a start (the grace applies: lease.Config.Flowing), and what its
// reconcile passes list (listed checks that they list none yet).
func graceRig(t *testing.T, wrap func(*memstore.Store) lease.Store, running bool) (w *Worker, listed func() int) {
	t.Helper()
	ctx := context.Background()
	st := memstore.New()
	for _, id := range []string{"s-1", "s-2"} {
		st.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq})
	}
	deadWorker(t, st, "w-dead", "s-1", "s-2")
	w = bareWorker(t, "w-declarer", wrap(st), &failQueue{}, nil)
	if running {
		if err := w.keeper.Register(ctx); err != nil {
			t.Fatal(err)
		}
		w.mu.Lock()
		w.state = stateRunning
		w.mu.Unlock()
	}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.consumer.Run(cctx) }()
	testwait.Eventually(t, 5*time.Second, "a start notification received", w.consumer.ReceivedStart)
	stop()
	<-done
	listed = func() int {
		t.Helper()
		cands, err := w.keeper.Orphans(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(cands)
	}
	if n := listed(); n != 0 {
		t.Fatalf("listed %d of a worker just declared dead: want none within the grace", n)
	}
	return w, listed
}

// A takeover that could not announce the sessions no receiver took ends
// the grace in its own worker (lease.Config.GoneGrace): its reconcile
// passes list them at once instead of 2 minutes later.
func TestTakeoverThatCannotAnnounceEndsTheGrace(t *testing.T) {
	w, listed := graceRig(t, func(st *memstore.Store) lease.Store { return st }, false)
	w.takeover(context.Background(), "w-dead")
	if n := listed(); n != 2 {
		t.Fatalf("listed %d after a takeover that could not announce them: want both", n)
	}
}

// throttledAcquires refuses every acquire as throttled.
type throttledAcquires struct {
	*memstore.Store
	acquires atomic.Int64
}

func (s *throttledAcquires) Acquire(context.Context, string, string, lease.From) (lease.Item, error) {
	s.acquires.Add(1)
	return lease.Item{}, lease.ErrThrottled
}

// A takeover whose claims of its own part fail (a throttled table) ends
// the grace in its own worker: its reconcile passes list those sessions at
// once, paced like any claim, instead of after the grace.
func TestTakeoverWhoseOwnClaimsFailEndsTheGrace(t *testing.T) {
	var ts *throttledAcquires
	w, listed := graceRig(t, func(st *memstore.Store) lease.Store { ts = &throttledAcquires{Store: st}; return ts }, true)
	w.takeover(context.Background(), "w-dead")
	if n := ts.acquires.Load(); n < 2 {
		t.Fatalf("%d acquires: want its own part's two claims tried", n)
	}
	if n := listed(); n != 2 {
		t.Fatalf("listed %d after its own claims failed: want both", n)
	}
}

// firstListingTimesOut is throttledAcquires whose first listing of
// w-dead's sessions outlives its deadline.
type firstListingTimesOut struct {
	throttledAcquires
	listings atomic.Int64
}

func (s *firstListingTimesOut) OwnedBy(ctx context.Context, owner string, limit int) ([]lease.Owned, error) {
	if owner == "w-dead" && s.listings.Add(1) == 1 {
		return nil, context.DeadlineExceeded
	}
	return s.Store.OwnedBy(ctx, owner, limit)
}

// A takeover whose listing of the dead worker's sessions fails once lists
// them again and goes on (its own part claimed here), instead of leaving
// them to this worker's reconcile passes alone.
func TestTakeoverListsAgainAfterAFailedListing(t *testing.T) {
	var fs *firstListingTimesOut
	w, _ := graceRig(t, func(st *memstore.Store) lease.Store {
		fs = &firstListingTimesOut{throttledAcquires: throttledAcquires{Store: st}}
		return fs
	}, true)
	w.takeover(context.Background(), "w-dead")
	if n := fs.listings.Load(); n != 2 {
		t.Fatalf("%d listings of w-dead's sessions: want the failed one and one more", n)
	}
	if n := fs.acquires.Load(); n < 2 {
		t.Fatalf("%d acquires: want its part's two claims tried after the second listing", n)
	}
}

// A worker that left with sessions the table still says are its (a flush
// or a release that failed at shutdown) announces the STARTED ones: no
// takeover does for a worker that left.
func TestLeaverAnnouncesTheSessionsItStillOwns(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	for _, id := range []string{"s-left", "s-stopped"} {
		st.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq})
	}
	q := &batchQueue{sent: map[string]bool{}}
	w := bareWorker(t, "w-leaver", st, q, nil)
	if err := w.keeper.Register(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s-left", "s-stopped"} {
		if _, err := w.keeper.Acquire(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	st.Update("s-stopped", func(it *lease.Item) { it.DesiredState = schema.StateStopped })
	if err := w.keeper.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	w.announceLeftovers(ctx)
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.sent["s-left"] || q.sent["s-stopped"] {
		t.Fatalf("announced %v: want the started session only", q.sent)
	}
}
