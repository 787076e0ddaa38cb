package streamer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
)

func TestTableHealth(t *testing.T) {
	var h tableHealth
	t0 := time.Unix(1_800_000_000, 0)
	const stale = 10 * time.Second
	if err := h.check(t0, stale); err == nil {
		t.Fatal("healthy before any call answered")
	}
	h.record(t0, nil)
	if err := h.check(t0.Add(time.Second), stale); err != nil {
		t.Fatalf("after an answer: %v", err)
	}
	h.record(t0, fmt.Errorf("acquire: %w", lease.ErrHeld))
	if err := h.check(t0, stale); err != nil {
		t.Fatalf("a failed condition is an answer: %v", err)
	}
	h.record(t0, context.DeadlineExceeded)
	if err := h.check(t0, stale); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("after a timeout: %v", err)
	}
	h.record(t0, nil)
	if err := h.check(t0.Add(stale+time.Second), stale); err == nil || !strings.Contains(err.Error(), "no table call") {
		t.Fatalf("stale answer: %v", err)
	}
}

// callCountingStore counts the calls that reach the store.
type callCountingStore struct {
	lease.Store
	calls atomic.Int64
}

func (s *callCountingStore) Get(ctx context.Context, id string) (lease.Item, error) {
	s.calls.Add(1)
	return s.Store.Get(ctx, id)
}

func (s *callCountingStore) GetWorker(ctx context.Context, id string) (lease.WorkerRecord, error) {
	s.calls.Add(1)
	return s.Store.GetWorker(ctx, id)
}

func (s *callCountingStore) Heartbeat(ctx context.Context, id string, epoch int64, hb lease.Heartbeat) (lease.WorkerRecord, error) {
	s.calls.Add(1)
	return s.Store.Heartbeat(ctx, id, epoch, hb)
}

// TestReadyzReadsNoTable: the readiness check reads the outcome of the
// worker's own last store call and makes none of its own.
func TestReadyzReadsNoTable(t *testing.T) {
	st := &callCountingStore{Store: memstore.New()}
	w, err := New(testConfig("ready-worker"), Deps{Store: st, Handler: &recSink{by: map[string][]delivery{}}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := w.keeper.Register(context.Background()); err != nil { // as Run does
		t.Fatal(err)
	}
	before := st.calls.Load()
	for range 50 {
		checks, _ := w.ready(context.Background(), now)
		if checks["table"] != "ok" {
			t.Fatalf("table check %q", checks["table"])
		}
	}
	if n := st.calls.Load() - before; n != 0 {
		t.Fatalf("50 readiness checks made %d store calls", n)
	}
}

// The worker's wrapper of its table keeps the table's listing into the
// audit's array reachable (lease.OwnedByAppender): without it every audit
// listed into an array of its own, 64 B a held session every AuditEvery.
func TestWrappedTableListsIntoTheAuditsArray(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	for i := range 100 {
		it := lease.Item{ConnectionID: fmt.Sprintf("s-%03d", i), DesiredState: schema.StateStarted, Spec: `{"ws_url":"ws://x.invalid/"}`, Generation: 1, Owner: "w", Epoch: 1}
		inner.Put(it)
	}
	var wrapped lease.Store = withSummary(healthStore{Store: inner, health: &tableHealth{}, now: time.Now}, inner)
	if _, ok := wrapped.(lease.OwnedByAppender); !ok {
		t.Fatal("the wrapped table hides its OwnedByAppender")
	}
	owned, err := lease.AppendOwnedBy(ctx, wrapped, nil, "w")
	if err != nil || len(owned) != 100 {
		t.Fatalf("listing: %d entries, %v; want 100", len(owned), err)
	}
	if n := testing.AllocsPerRun(20, func() { owned, _ = lease.AppendOwnedBy(ctx, wrapped, owned[:0], "w") }); n != 0 {
		t.Fatalf("a listing into the last one's array: %.0f allocations, want 0", n)
	}
}

// headCounting counts the session reads of the table it wraps, with and
// without the spec.
type headCounting struct {
	*memstore.Store
	gets, heads int
}

func (s *headCounting) Get(ctx context.Context, id string) (lease.Item, error) {
	s.gets++
	return s.Store.Get(ctx, id)
}

func (s *headCounting) GetHead(ctx context.Context, id string) (lease.Item, error) {
	s.heads++
	return s.Store.GetHead(ctx, id)
}

// The worker's wrapper of its table keeps the table's lease.HeadReader
// reachable: a standby's backstop check reads the session item alone, not
// its spec item too (one read unit instead of two on DynamoDB).
func TestWrappedTableReadsTheHeadAlone(t *testing.T) {
	inner := &headCounting{Store: memstore.New()}
	inner.Put(lease.Item{ConnectionID: "s", DesiredState: schema.StateStarted, Spec: `{"ws_url":"ws://x.invalid/"}`, Generation: 1})
	var wrapped lease.Store = withSummary(healthStore{Store: inner, health: &tableHealth{}, now: time.Now}, inner)
	it, err := lease.GetHead(context.Background(), wrapped, "s")
	if err != nil || it.Spec != "" || it.Generation != 1 {
		t.Fatalf("head: spec %q, generation %d, %v", it.Spec, it.Generation, err)
	}
	if inner.heads != 1 || inner.gets != 0 {
		t.Fatalf("the table read %d heads and %d whole sessions, want 1 and 0", inner.heads, inner.gets)
	}
}
