package claim

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeQueue struct {
	mu       sync.Mutex
	batches  [][]notify.Message
	maxAsked []int
	deleted  []string
	requeued []string
	// deleteCalls counts Delete calls (a receive's handled messages are
	// deleted in one).
	deleteCalls int
	fail        error
}

func (q *fakeQueue) Receive(ctx context.Context, max int) ([]notify.Message, error) {
	q.mu.Lock()
	q.maxAsked = append(q.maxAsked, max)
	if q.fail != nil {
		err := q.fail
		q.mu.Unlock()
		return nil, err
	}
	if len(q.batches) > 0 {
		b := q.batches[0]
		q.batches = q.batches[1:]
		q.mu.Unlock()
		return b, nil
	}
	q.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (q *fakeQueue) Delete(_ context.Context, ms ...notify.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleteCalls++
	for _, m := range ms {
		q.deleted = append(q.deleted, m.MessageID)
	}
	return nil
}

func (q *fakeQueue) Requeue(_ context.Context, m notify.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.requeued = append(q.requeued, m.MessageID)
	return nil
}

func (q *fakeQueue) acks() (int, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.deleted), len(q.requeued)
}

type fakeClaimer struct {
	mu       sync.Mutex
	outcomes map[string]Outcome
	claims   []string
	claimAt  map[string]time.Time
	stops    []string
	free     atomic.Int64
}

func newClaimer(free int) *fakeClaimer {
	c := &fakeClaimer{outcomes: map[string]Outcome{}, claimAt: map[string]time.Time{}}
	c.free.Store(int64(free))
	return c
}

func (c *fakeClaimer) Claim(_ context.Context, id string, _ int64) (Outcome, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims = append(c.claims, id)
	c.claimAt[id] = time.Now()
	out, ok := c.outcomes[id]
	if !ok {
		out = Acquired
	}
	if out == Failed {
		return out, errors.New("transient")
	}
	return out, nil
}

func (c *fakeClaimer) Free() int { return int(c.free.Load()) }

func (c *fakeClaimer) StopHint(_ context.Context, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stops = append(c.stops, id)
}

func msg(id, typ, conn string) notify.Message {
	return notify.Message{MessageID: id, Notification: notify.Notification{Type: typ, ConnectionID: conn, SentAtMs: 1}}
}

func runConsumer(t *testing.T, c *Consumer) (cancel func()) {
	ctx, cancelCtx := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	return func() { cancelCtx(); <-done }
}

func TestConsumerAcknowledgesByOutcome(t *testing.T) {
	q := &fakeQueue{batches: [][]notify.Message{{
		msg("m1", schema.NotifyStart, "acquired"),
		msg("m2", schema.NotifyStart, "held"),
		msg("m3", schema.NotifyStart, "stopped"),
		msg("m4", schema.NotifyStart, "full"),
		msg("m5", schema.NotifyStart, "flaky"),
		msg("m6", schema.NotifyStop, "s"),
		{MessageID: "m7", Err: notify.ErrMalformed},
		msg("m8", schema.NotifyStart, "mine"),
	}}}
	cl := newClaimer(100)
	cl.outcomes = map[string]Outcome{"held": HeldElsewhere, "stopped": NotStarted, "full": AtCapacity, "flaky": Failed, "mine": OwnedHere}
	stop := runConsumer(t, &Consumer{Queue: q, Claimer: cl, Log: zerolog.Nop()})
	testwait.Eventually(t, 5*time.Second, "acks", func() bool { d, r := q.acks(); return d+r == 7 })
	stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	want := map[string]bool{"m1": true, "m2": true, "m3": true, "m6": true, "m7": true, "m8": true}
	if len(q.deleted) != len(want) {
		t.Fatalf("deleted %v", q.deleted)
	}
	for _, id := range q.deleted {
		if !want[id] {
			t.Fatalf("deleted %s (all: %v)", id, q.deleted)
		}
	}
	if len(q.requeued) != 1 || q.requeued[0] != "m4" {
		t.Fatalf("requeued %v, want [m4]", q.requeued)
	}
	if q.deleteCalls != 1 {
		t.Fatalf("%d Delete calls for one receive, want 1 (batched)", q.deleteCalls)
	}
	if len(cl.stops) != 1 || cl.stops[0] != "s" {
		t.Fatalf("stops %v", cl.stops)
	}
}

func TestConsumerAsksOnlyForFreeCapacityAndHandsBackWhenFull(t *testing.T) {
	q := &fakeQueue{batches: [][]notify.Message{{msg("m1", schema.NotifyStart, "a")}}}
	cl := newClaimer(0)
	cl.outcomes["a"] = AtCapacity
	stop := runConsumer(t, &Consumer{Queue: q, Claimer: cl, Log: zerolog.Nop(), FullWait: 20 * time.Millisecond})
	testwait.Eventually(t, 5*time.Second, "requeue", func() bool { _, r := q.acks(); return r == 1 })
	stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.maxAsked[0] != 1 {
		t.Fatalf("a full worker asked for %d messages, want 1", q.maxAsked[0])
	}

	q2 := &fakeQueue{}
	cl2 := newClaimer(3)
	stop2 := runConsumer(t, &Consumer{Queue: q2, Claimer: cl2, Log: zerolog.Nop()})
	testwait.Eventually(t, 5*time.Second, "receive", func() bool { q2.mu.Lock(); defer q2.mu.Unlock(); return len(q2.maxAsked) > 0 })
	stop2()
	if q2.maxAsked[0] != 3 {
		t.Fatalf("asked for %d with 3 free", q2.maxAsked[0])
	}
}

func TestConsumerReportsReceiveErrors(t *testing.T) {
	q := &fakeQueue{fail: errors.New("queue down")}
	c := &Consumer{Queue: q, Claimer: newClaimer(1), Log: zerolog.Nop()}
	stop := runConsumer(t, c)
	testwait.Eventually(t, 5*time.Second, "unhealthy", func() bool { return c.Healthy() != nil })
	stop()
}

type fakeLister struct {
	cands []lease.Candidate
	held  map[string]bool
	calls atomic.Int64
}

func (l *fakeLister) Expiring(context.Context, time.Duration, int) ([]lease.Candidate, error) {
	if l.calls.Add(1) == 1 {
		return l.cands, nil
	}
	return nil, nil
}

func (l *fakeLister) TakeableIn(c lease.Candidate) time.Duration {
	return time.Until(time.UnixMilli(c.ExpiresAtMs))
}

func (l *fakeLister) Holds(id string) bool { return l.held[id] }

func TestReconcilerClaimsOrphansNowAndExpiringLeasesWhenTakeable(t *testing.T) {
	start := time.Now()
	takeable := start.Add(300 * time.Millisecond)
	l := &fakeLister{
		cands: []lease.Candidate{
			{ConnectionID: "orphan", ExpiresAtMs: 0},
			{ConnectionID: "dying", ExpiresAtMs: takeable.UnixMilli()},
			{ConnectionID: "ours", ExpiresAtMs: 0},
		},
		held: map[string]bool{"ours": true},
	}
	cl := newClaimer(10)
	var orphans atomic.Int64
	r := &Reconciler{Lister: l, Claimer: cl, Log: zerolog.Nop(), Every: time.Hour, Within: time.Second, OnOrphans: func(n int) { orphans.Add(int64(n)) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	testwait.Eventually(t, 5*time.Second, "both claims", func() bool { cl.mu.Lock(); defer cl.mu.Unlock(); return len(cl.claims) == 2 })
	cancel()
	<-done
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.claims[0] != "orphan" || cl.claims[1] != "dying" {
		t.Fatalf("claims %v", cl.claims)
	}
	if at := cl.claimAt["dying"]; at.Before(takeable.Truncate(time.Millisecond)) {
		t.Fatalf("dying lease tried %v before it was takeable", takeable.Sub(at))
	}
	if orphans.Load() != 1 {
		t.Fatalf("orphans seen %d", orphans.Load())
	}
}

func TestReconcilerStopsAtCapacity(t *testing.T) {
	l := &fakeLister{cands: []lease.Candidate{{ConnectionID: "a"}, {ConnectionID: "b"}}}
	cl := newClaimer(0)
	r := &Reconciler{Lister: l, Claimer: cl, Log: zerolog.Nop(), Every: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	testwait.Eventually(t, 5*time.Second, "a pass", func() bool { return r.Passes() == 1 })
	cancel()
	<-done
	if len(cl.claims) != 0 || l.calls.Load() != 0 {
		t.Fatalf("a full worker listed (%d) or claimed (%v)", l.calls.Load(), cl.claims)
	}
}
