package batch

// The sessions' side: messages in, flushes, and the wait for a session's
// acknowledgements.

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// Submit queues m for t's session (sink.Pipeline).
func (b *Batcher) Submit(ctx context.Context, m sink.Message, t sink.Tenure, stop <-chan struct{}) error {
	rec, err := b.snd.Encode(m)
	if err != nil {
		return sink.Permanent(err)
	}
	size := b.snd.Size(rec)
	if size > b.limits.MaxRecordBytes {
		return sink.Permanent(fmt.Errorf("batch: %s seq %d: record of %d bytes exceeds the sink's %d", m.ConnectionID, m.Seq, size, b.limits.MaxRecordBytes))
	}
	stalled, budgetStalled := false, false
	b.mu.Lock()
	for {
		st := b.streamLocked(m.ConnectionID)
		if st.dead != nil && st.dead == t {
			b.mu.Unlock()
			return ErrTenureEndedError(m.ConnectionID)
		}
		var space chan struct{}
		switch {
		case st.bytes > 0 && st.bytes+size > b.cfg.SessionBufferBytes:
			if st.space == nil {
				st.space = make(chan struct{})
			}
			space = st.space
		case b.cfg.BufferBudget > 0 && b.buffered > 0 && b.buffered+int64(size) > b.cfg.BufferBudget:
			if !budgetStalled {
				budgetStalled = true
				b.budgetStalls.Add(1)
			}
			if b.budget == nil {
				b.budget = make(chan struct{})
			}
			space = b.budget
		}
		if space == nil {
			break
		}
		if !stalled {
			stalled = true
			t.Stalled()
		}
		b.mu.Unlock()
		select {
		case <-space:
		case <-stop:
			return ErrStopped
		case <-ctx.Done():
			return ctx.Err()
		}
		b.mu.Lock()
	}
	st := b.streamLocked(m.ConnectionID)
	now := time.Now()
	e := &entry{rec: rec, size: size, ord: st.nextOrd, t: t, enq: now, recordsAtFail: b.records.Load()}
	if b.packer != nil {
		e.group = b.packer.PackGroup(rec)
	}
	e.due = now.Add(b.waitLocked(e, now))
	if len(st.queue) > 0 && e.due.Before(st.queue[0].due) {
		st.queue[0].due = e.due // the session sped up: its head waits no longer than its newest
	}
	st.nextOrd++
	st.entries = append(st.entries, e)
	st.bytes += size
	b.buffered += int64(size)
	first := len(st.queue) == 0
	wasFull := b.fullLocked()
	b.activateLocked(st)
	st.queue = append(st.queue, e)
	b.countQueuedLocked(e, 1)
	// The dispatcher's timer covers the MaxDelay of the entries it saw; it
	// needs a wake-up for a session that had nothing queued (to arm it, or
	// to send at once when a request is due) and when a request fills.
	wake := first || (!wasFull && b.fullLocked()) || st.flushing > 0 || b.packFilledLocked(size)
	b.mu.Unlock()
	if wake {
		b.wake()
	}
	return nil
}

// ErrTenureEndedError wraps sink.ErrTenureEnded with the session.
func ErrTenureEndedError(id string) error {
	return fmt.Errorf("batch: %s: %w", id, sink.ErrTenureEnded)
}

func (b *Batcher) streamLocked(id string) *stream {
	st := b.streams[id]
	if st == nil {
		st = &stream{id: id}
		b.streams[id] = st
	}
	return st
}

// Handle queues m and waits until it is acknowledged (sink.Handler).
func (b *Batcher) Handle(ctx context.Context, m sink.Message) error {
	w := &waiter{done: make(chan struct{}), seq: m.Seq}
	w.deadline, _ = ctx.Deadline()
	if err := b.Submit(ctx, m, w, ctx.Done()); err != nil {
		return err
	}
	select {
	case <-w.done:
		if err := w.refused.Load(); err != nil {
			return sink.Permanent(*err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("batch: %s seq %d not acknowledged: %w", m.ConnectionID, m.Seq, ctx.Err())
	}
}

// waiter is the tenure of one Handle call: it may deliver until the call's
// deadline, and ends the call on a permanent refusal.
type waiter struct {
	seq      int64
	deadline time.Time // zero: none
	once     sync.Once
	done     chan struct{}
	refused  atomic.Pointer[error]
}

func (w *waiter) Remaining() time.Duration {
	if w.deadline.IsZero() {
		return math.MaxInt64
	}
	return time.Until(w.deadline)
}
func (w *waiter) Stalled() {}
func (w *waiter) Refused(_, _ int64, err error) bool {
	w.refused.Store(&err)
	w.once.Do(func() { close(w.done) })
	return false
}
func (w *waiter) Acked(seq int64) {
	if seq >= w.seq {
		w.once.Do(func() { close(w.done) })
	}
}

// Owed is how long the oldest message of session id that the batcher
// holds unacknowledged has waited (0: none held): a batch's wait and a
// round trip when the destination answers, seconds when it holds its
// requests (sink.Owing: the rebalancer moves no such session).
func (b *Batcher) Owed(id string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.streams[id]
	if st == nil || len(st.entries) == 0 {
		return 0
	}
	return time.Since(st.entries[0].enq)
}

// FlushSession waits until every message queued for id is acknowledged,
// sending what is queued without waiting for MaxDelay (sink.Pipeline).
func (b *Batcher) FlushSession(ctx context.Context, id string) error {
	b.mu.Lock()
	st := b.streams[id]
	if st == nil || len(st.entries) == 0 { // nothing left (a stream kept only to refuse a dropped tenure)
		b.mu.Unlock()
		return nil
	}
	if st.empty == nil {
		st.empty = make(chan struct{})
	}
	empty := st.empty
	st.flushing++
	b.flushing++
	b.mu.Unlock()
	b.wake()
	defer func() {
		b.mu.Lock()
		st.flushing--
		b.flushing--
		b.mu.Unlock()
	}()
	select {
	case <-empty:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("batch: flush %s: %w", id, ctx.Err())
	}
}

// Flush waits until every message queued before the call is acknowledged
// (sink.Flusher).
func (b *Batcher) Flush(ctx context.Context) error {
	b.mu.Lock()
	ids := make([]string, 0, len(b.streams))
	for id := range b.streams {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	for _, id := range ids {
		if err := b.FlushSession(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// Quiesce returns once no request is in flight and nothing queued may still
// be sent (every queued entry's tenure has no trust left), or with ctx's
// error. A worker that leaves sessions behind calls it before it tells the
// table it left, so that no request of theirs is in flight once others may
// take them.
func (b *Batcher) Quiesce(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		b.wake() // drops what may no longer be sent
		b.mu.Lock()
		idle := b.inflight == 0
		for _, st := range b.streams {
			for _, e := range st.queue {
				if e.t.Remaining() > 0 {
					idle = false
					break
				}
			}
		}
		b.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("batch: requests still in flight: %w", ctx.Err())
		}
	}
}
