package session

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// FrameBudget bounds the bytes of large messages being read, over every
// session of a worker: a session reads a message up to
// schema.SmallFrameAllowance on its own, and the rest of a larger one (up
// to the read limit, which stays the bound of one message) only with a
// grant of this budget, which it gives back once the message is handed on
// (the sink holds its copy then, under the sink's own budget). So the
// memory check counts MaxSessions × (the measured session + the allowance)
// + this budget, not MaxSessions × the read limit.
//
// A grant is the rest of the read limit (the size of a message is not
// known before it is read: coder/websocket's Reader streams its frames),
// cut down to what the message's buffer took once it is read. A session
// holds at most one grant at a time (its read loop's, or, at open, its
// wait_for's; a planned reconnect's new connection only takes one that is
// free at once, TryAcquire), and a holder never waits for another grant,
// so waits cannot form a cycle. Waiters are served in order. Safe for
// concurrent use; nil is no bound.
type FrameBudget struct {
	limit   int64
	mu      sync.Mutex
	used    int64
	peak    int64
	waiters list.List // of *frameWaiter, in arrival order
}

type frameWaiter struct {
	n     int64
	ready chan struct{} // closed once the grant is the waiter's
}

// LargeFrameWait bounds a session's wait for a grant: a session that
// waits does not read its socket, and its own keepalive (the default
// WSFLEET_PING_TIMEOUT is 10 s) would drop the connection past it anyway.
// The session then reconnects and resumes after its last delivered
// message.
const LargeFrameWait = 10 * time.Second

// errFrameWait ends a connection whose large message waited for the budget
// past LargeFrameWait.
var errFrameWait = errors.New("large-frame budget: no room within the wait")

// NewFrameBudget returns a budget of limit bytes; nil (no bound) when limit
// is 0 or less.
func NewFrameBudget(limit int64) *FrameBudget {
	if limit <= 0 {
		return nil
	}
	return &FrameBudget{limit: limit}
}

// Used is what the grants hold now.
func (b *FrameBudget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Peak is the most the grants held at once since the budget was made.
func (b *FrameBudget) Peak() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// clamp keeps a grant within the budget: one larger than the budget would
// never be served (Validate keeps the budget at least the read limit).
func (b *FrameBudget) clamp(n int64) int64 { return min(max(n, 0), b.limit) }

// takeLocked grants n when it fits and nobody waits before it.
func (b *FrameBudget) takeLocked(n int64) bool {
	if b.used+n > b.limit || b.waiters.Len() > 0 {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	return true
}

// TryAcquire takes n bytes (cut to the budget) if they are free now,
// returning what it took; ok false: nothing taken. A nil budget grants
// nothing and always succeeds.
func (b *FrameBudget) TryAcquire(n int64) (int64, bool) {
	if b == nil {
		return 0, true
	}
	n = b.clamp(n)
	b.mu.Lock()
	defer b.mu.Unlock()
	return n, b.takeLocked(n)
}

// Acquire takes n bytes (cut to the budget), waiting in order until they
// are free, ctx ends or done is closed (then nothing is taken and the
// error says why). It returns what it took.
func (b *FrameBudget) Acquire(ctx context.Context, n int64, done <-chan struct{}) (int64, error) {
	if b == nil {
		return 0, nil
	}
	n = b.clamp(n)
	b.mu.Lock()
	if b.takeLocked(n) {
		b.mu.Unlock()
		return n, nil
	}
	w := &frameWaiter{n: n, ready: make(chan struct{})}
	el := b.waiters.PushBack(w)
	b.mu.Unlock()
	var err error
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-done:
		err = context.Canceled
	}
	b.mu.Lock()
	select {
	case <-w.ready:
		// Granted meanwhile: give it back (waking the next ones).
		b.mu.Unlock()
		b.Release(n)
		return 0, err
	default:
	}
	front := b.waiters.Front() == el
	b.waiters.Remove(el)
	if front {
		b.wakeLocked() // the ones behind may fit now
	}
	b.mu.Unlock()
	return 0, err
}

// Release gives back n bytes a grant took, and serves the waiters that fit
// now, in order.
func (b *FrameBudget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.wakeLocked()
	b.mu.Unlock()
}

// wakeLocked grants the waiters at the front that fit.
func (b *FrameBudget) wakeLocked() {
	for {
		el := b.waiters.Front()
		if el == nil {
			return
		}
		w := el.Value.(*frameWaiter)
		if b.used+w.n > b.limit {
			return
		}
		b.used += w.n
		b.peak = max(b.peak, b.used)
		b.waiters.Remove(el)
		close(w.ready)
	}
}

// readMessage reads the message r into buf: up to the allowance on its
// own, the rest (up to the read limit, which the connection enforces with
// a 1009 close) under a grant of the worker's large-frame budget. wait
// gets the grant (nil: TryAcquire's, failing at once). It returns the
// bytes the grant holds once the message is read; the caller gives them
// back (Release) once the message is handed on.
func (s *Session) readMessage(r io.Reader, buf []byte, wait func(n int64) (int64, error)) ([]byte, int64, error) {
	buf, more, err := readAll(r, buf, schema.SmallFrameAllowance)
	if err != nil || !more {
		return buf, 0, err
	}
	fb := s.env.Frames
	var grant int64
	need := s.env.Config.ReadLimit - schema.SmallFrameAllowance
	if wait != nil {
		grant, err = wait(need)
	} else if g, ok := fb.TryAcquire(need); ok {
		grant = g
	} else {
		err = fmt.Errorf("%w: full", errFrameWait)
	}
	if err != nil {
		return buf, 0, err
	}
	buf, _, err = readAll(r, buf, -1)
	// Keep what the buffer took beyond the allowance, give the rest back.
	if held := min(grant, max(int64(cap(buf))-schema.SmallFrameAllowance, 0)); held < grant {
		fb.Release(grant - held)
		grant = held
	}
	if err != nil {
		fb.Release(grant)
		return buf, 0, err
	}
	return buf, grant, nil
}

// waitFrame is the read loop's wait for a grant (counted in
// LargeFrameWaits when the budget has no room at once): within
// LargeFrameWait, ended when the session ends or ctx does.
func (s *Session) waitFrame(ctx context.Context) func(int64) (int64, error) {
	return func(n int64) (int64, error) {
		if g, ok := s.env.Frames.TryAcquire(n); ok {
			return g, nil
		}
		s.env.Counters.LargeFrameWaits.Add(1)
		// The source sends: a wait for the worker's room that ends the
		// connection is not a failed connect (MaxDialFailures).
		s.reached = true
		wctx, cancel := context.WithTimeoutCause(ctx, LargeFrameWait, errFrameWait)
		defer cancel()
		g, err := s.env.Frames.Acquire(wctx, n, s.ended)
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			err = context.Cause(wctx)
		}
		return g, err
	}
}
