// Package memqueue owns an in-memory work queue with the SQS semantics the
// worker relies on (shared/notify's Consumer, Publisher and BatchPublisher),
// for tests and the fleet simulator in a testing/synctest bubble:
//
//   - one queue shared by every consumer: a message goes to whichever
//     receive takes it first (receives already waiting get one each, the
//     longest waiting first: which worker takes a start is the queue's
//     order, not the scheduler's);
//   - Receive long-polls: it returns at once with up to max visible
//     messages, else waits up to Wait for one, else returns none;
//   - a received message is invisible for Visibility; one not deleted by
//     then is delivered again (at-least-once), with a new receipt and its
//     ReceiveCount up by one;
//   - Delete with a receipt that is not the message's latest succeeds and
//     deletes nothing (SQS: "the request succeeds, but the message will not
//     be deleted"); Requeue makes the message visible at once;
//   - optionally a latency per call, drawn from the seed.
//
// Time is the Clock's (the bubble's in a simulation): no goroutine of the
// queue outlives a call, so nothing of it is left when the bubble ends. It
// is a test harness: no shipped binary imports it (shared/archtest).
package memqueue

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/notify"
)

// Config is one queue.
type Config struct {
	// Visibility is how long a received message stays invisible (the
	// infra's work queue: 30 s). Default 30 s.
	Visibility time.Duration
	// Wait is a Receive's long-poll wait (the worker's WSFLEET_QUEUE_WAIT:
	// 10 s by default). 0: 10 s; negative: short polls (no wait). A
	// receive waiting sees a message whose visibility timeout ends during
	// its wait only if that message was already invisible when it began
	// (else at its next poll): exact while Visibility >= Wait, as in SQS
	// and the infra (30 s and at most 20 s).
	Wait time.Duration
	// LatencyMin and LatencyMax bound each call's latency (uniform,
	// drawn from Seed); both 0: none.
	LatencyMin, LatencyMax time.Duration
	Seed                   uint64
	// Clock is the queue's time (nil: the real clock, the bubble's in a
	// synctest bubble).
	Clock clock.Clock
}

// ErrClosed is every call after Close.
var ErrClosed = errors.New("memqueue: closed")

type message struct {
	id       string
	seq      int // the order sent
	body     string
	ver      int    // bumped at each hide: its older entries are stale
	receipt  string // the latest receive's; "" before the first
	received int
	gone     bool // deleted: its entries are stale
}

// waiter is a Receive waiting for a message: Publish hands it one at once
// and closes ready.
type waiter struct {
	got   []notify.Message
	ready chan struct{}
}

// Queue is one in-memory queue. Safe for concurrent use.
type Queue struct {
	cfg Config

	mu sync.Mutex
	// Every message not deleted has one live entry: in visible (by the
	// order sent: a receive takes the first sent) once it is visible,
	// else in hidden (by when it becomes visible); an entry whose message
	// was deleted, or was hidden again since, is stale and skipped.
	// A receive, a delete and a requeue cost O(log n) whether 10
	// messages are queued or 1,000,000 (the fleet simulator's takeovers
	// queue hundreds of thousands, most of them in flight).
	visible  entries[bySeq]      // by seq
	hidden   entries[byTime]     // by at, then seq
	byID     map[string]*message // the messages not deleted
	waiters  []*waiter
	next     int
	receipts int
	rnd      *rand.Rand
	closed   bool
	stats    Stats
}

// Stats count the queue's traffic.
type Stats struct {
	Sent, Received, Redelivered, Deleted, Requeued int
}

// New returns an empty queue.
func New(cfg Config) *Queue {
	if cfg.Visibility <= 0 {
		cfg.Visibility = 30 * time.Second
	}
	if cfg.Wait == 0 {
		cfg.Wait = 10 * time.Second
	}
	if cfg.Wait < 0 {
		cfg.Wait = 0
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	return &Queue{cfg: cfg, rnd: rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b9)), byID: map[string]*message{}}
}

// latency waits one call's latency (drawn under the lock, in call order).
func (q *Queue) latency(ctx context.Context) error {
	if q.cfg.LatencyMax <= 0 {
		return ctx.Err()
	}
	q.mu.Lock()
	d := q.cfg.LatencyMin
	if span := q.cfg.LatencyMax - q.cfg.LatencyMin; span > 0 {
		d += time.Duration(q.rnd.Int64N(int64(span) + 1))
	}
	q.mu.Unlock()
	return clock.Sleep(ctx, q.cfg.Clock, d)
}

// Publish sends n.
func (q *Queue) Publish(ctx context.Context, n notify.Notification) error {
	return q.PublishBatch(ctx, []notify.Notification{n})[0]
}

// PublishBatch sends ns (at most notify.MaxBatch) in one call.
func (q *Queue) PublishBatch(ctx context.Context, ns []notify.Notification) []error {
	errs := make([]error, len(ns))
	fail := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if len(ns) > notify.MaxBatch {
		return fail(fmt.Errorf("memqueue: send batch of %d: more than %d entries", len(ns), notify.MaxBatch))
	}
	if err := q.latency(ctx); err != nil {
		return fail(fmt.Errorf("memqueue: send: %w", err))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return fail(ErrClosed)
	}
	now := q.cfg.Clock.Now()
	for i, n := range ns {
		body, err := notify.Encode(n)
		if err != nil {
			errs[i] = err
			continue
		}
		q.next++
		m := &message{id: "m-" + strconv.Itoa(q.next), seq: q.next, body: body}
		heap.Push(&q.visible, entry{m: m, at: now, ver: m.ver})
		q.byID[m.id] = m
		q.stats.Sent++
	}
	q.handOut(now)
	return errs
}

// handOut gives the visible messages to the waiting receives, one each,
// the longest waiting first (a long poll returns as soon as a message is
// there: a batch published while receives wait is spread over them).
// Called with mu held.
func (q *Queue) handOut(now time.Time) {
	for len(q.waiters) > 0 {
		w := q.waiters[0]
		if w.got = q.take(now, 1); len(w.got) == 0 {
			return
		}
		q.waiters = q.waiters[1:]
		close(w.ready)
	}
}

// take receives up to n visible messages. Called with mu held.
func (q *Queue) take(now time.Time, n int) []notify.Message {
	q.reveal(now)
	var out []notify.Message
	for len(out) < n && len(q.visible) > 0 {
		e := heap.Pop(&q.visible).(entry)
		if e.stale() {
			continue
		}
		m := e.m
		if m.received > 0 {
			q.stats.Redelivered++
		}
		m.received++
		q.receipts++
		m.receipt = m.id + "#" + strconv.Itoa(q.receipts)
		q.hide(m, now.Add(q.cfg.Visibility))
		q.stats.Received++
		msg := notify.Message{Receipt: m.receipt, MessageID: m.id, Body: m.body, ReceiveCount: m.received}
		msg.Notification, msg.Err = notify.Decode(m.body)
		out = append(out, msg)
	}
	return out
}

// hide makes m invisible until at (its entry in hidden; any other of its
// entries stale). Called with mu held.
func (q *Queue) hide(m *message, at time.Time) {
	m.ver++
	heap.Push(&q.hidden, entry{m: m, at: at, ver: m.ver})
}

// reveal moves the messages that became visible by now to visible, and
// drops the stale entries it meets. Called with mu held.
func (q *Queue) reveal(now time.Time) {
	for len(q.hidden) > 0 && !q.hidden[0].at.After(now) {
		e := heap.Pop(&q.hidden).(entry)
		if !e.stale() {
			heap.Push(&q.visible, e)
		}
	}
}

// nextVisible is when the first invisible message becomes visible (zero:
// none). Called with mu held, after a take found nothing visible.
func (q *Queue) nextVisible() time.Time {
	for len(q.hidden) > 0 {
		if e := q.hidden[0]; !e.stale() {
			return e.at
		}
		heap.Pop(&q.hidden)
	}
	return time.Time{}
}

// Receive long-polls for up to max (1..10) messages: the visible ones at
// once, else the first published (or becoming visible again) within Wait,
// else none.
func (q *Queue) Receive(ctx context.Context, n int) ([]notify.Message, error) {
	n = min(notify.MaxBatch, max(n, 1))
	if err := q.latency(ctx); err != nil {
		return nil, fmt.Errorf("memqueue: receive: %w", err)
	}
	deadline := q.cfg.Clock.Now().Add(q.cfg.Wait)
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, ErrClosed
		}
		now := q.cfg.Clock.Now()
		if got := q.take(now, n); len(got) > 0 || !now.Before(deadline) {
			q.mu.Unlock()
			return got, nil
		}
		w := &waiter{ready: make(chan struct{})}
		q.waiters = append(q.waiters, w)
		wake := deadline
		if nv := q.nextVisible(); !nv.IsZero() && nv.After(now) && nv.Before(wake) {
			wake = nv // a message not deleted in time becomes visible again
		}
		q.mu.Unlock()
		t := q.cfg.Clock.NewTimer(clock.Until(q.cfg.Clock, wake))
		select {
		case <-w.ready:
			t.Stop()
			return q.handed(w)
		case <-ctx.Done():
		case <-t.C():
		}
		t.Stop()
		q.mu.Lock()
		i := slices.Index(q.waiters, w)
		if i >= 0 {
			q.waiters = slices.Delete(q.waiters, i, i+1)
		}
		q.mu.Unlock()
		if i < 0 { // handed its messages (or closed) meanwhile
			return q.handed(w)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("memqueue: receive: %w", err)
		}
	}
}

// handed is what a waiter was woken with: its messages, or ErrClosed.
func (q *Queue) handed(w *waiter) ([]notify.Message, error) {
	if len(w.got) > 0 {
		return w.got, nil
	}
	return nil, ErrClosed
}

// Delete acknowledges ms: a message whose latest receipt is given is gone;
// an older receipt deletes nothing and is no error (SQS's behaviour).
func (q *Queue) Delete(ctx context.Context, ms ...notify.Message) error {
	if err := q.latency(ctx); err != nil {
		return fmt.Errorf("memqueue: delete: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	for _, m := range ms {
		if x := q.latest(m); x != nil {
			q.remove(x)
			q.stats.Deleted++
		}
	}
	return nil
}

// remove deletes x: its entries go stale (each is dropped when it comes
// up). Called with mu held.
func (q *Queue) remove(x *message) {
	x.gone = true
	delete(q.byID, x.id)
}

// Requeue makes m visible again after after (a visibility timeout; 0: at
// once, handed to a receive waiting for one).
func (q *Queue) Requeue(ctx context.Context, m notify.Message, after time.Duration) error {
	if err := q.latency(ctx); err != nil {
		return fmt.Errorf("memqueue: requeue: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	x := q.latest(m)
	if x == nil {
		return fmt.Errorf("memqueue: requeue message %s: receipt %q is not its latest", m.MessageID, m.Receipt)
	}
	now := q.cfg.Clock.Now()
	q.hide(x, now.Add(max(after, 0)))
	q.stats.Requeued++
	q.handOut(now)
	return nil
}

// latest is the message m's receipt is the latest of; nil when none (a
// deleted message's, or an older receipt). Called with mu held.
func (q *Queue) latest(m notify.Message) *message {
	if x := q.byID[m.MessageID]; x != nil && x.receipt == m.Receipt {
		return x
	}
	return nil
}

// Len is how many messages the queue holds (visible or not).
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.byID)
}

// Stats are the queue's counts so far.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats
}

// Close ends the queue: every waiting receive returns ErrClosed, every
// later call too.
func (q *Queue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, w := range q.waiters {
		close(w.ready)
	}
	q.waiters = nil
}

var (
	_ notify.Consumer       = (*Queue)(nil)
	_ notify.Publisher      = (*Queue)(nil)
	_ notify.BatchPublisher = (*Queue)(nil)
)

// entry is a message's place in visible or hidden, as of its version ver.
type entry struct {
	m   *message
	at  time.Time // when the message becomes visible (hidden's order; visible's: when sent or revealed)
	ver int
}

func (e entry) stale() bool { return e.m.gone || e.ver != e.m.ver }

// order is a heap's order of entries.
type order interface{ less(a, b entry) bool }

// bySeq orders by seq (the order sent): the visible messages.
type bySeq struct{}

func (bySeq) less(a, b entry) bool { return a.m.seq < b.m.seq }

// byTime orders by at, then seq: the invisible messages.
type byTime struct{}

func (byTime) less(a, b entry) bool {
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.m.seq < b.m.seq
}

// entries is a min-heap (container/heap) in the order O.
type entries[O order] []entry

func (h entries[O]) Len() int           { return len(h) }
func (h entries[O]) Less(i, j int) bool { var o O; return o.less(h[i], h[j]) }
func (h entries[O]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *entries[O]) Push(x any)        { *h = append(*h, x.(entry)) }
func (h *entries[O]) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = entry{}
	*h = old[:len(old)-1]
	return e
}
