package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// After fires once d has passed on this clock.
	After(d time.Duration) <-chan time.Time
	// NewTimer is a timer that fires once d has passed on this clock; it
	// can be stopped and reset (a loop's period, a wait cut short).
	NewTimer(d time.Duration) Timer
}

// Timer is a stoppable timer of a Clock (time.Timer's methods, with C a
// method). Since Go 1.23, Stop and Reset leave no stale value in C.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Since is the time elapsed on c since t (time.Since on c).
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// Until is the time left on c until t (time.Until on c).
func Until(c Clock, t time.Time) time.Duration { return t.Sub(c.Now()) }

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After is time.After.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTimer is time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// realTimer is a *time.Timer; one pointer, so it fits in an interface
// value without an allocation of its own.
type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Offset is a clock whose wall time is shifted by Skew. Durations between its
// readings are unchanged (the monotonic reading shifts with it).
type Offset struct {
	Base Clock
	Skew time.Duration
}

// Now returns the base time plus Skew.
func (o Offset) Now() time.Time { return o.Base.Now().Add(o.Skew) }

// After delegates to the base clock.
func (o Offset) After(d time.Duration) <-chan time.Time { return o.Base.After(d) }

// NewTimer delegates to the base clock.
func (o Offset) NewTimer(d time.Duration) Timer { return o.Base.NewTimer(d) }

// Fake is a manually advanced clock for tests. The zero value is not usable:
// use NewFake.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that receives once Advance moves past d from now.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	at := f.now.Add(d)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, &fakeWaiter{at: at, ch: ch})
	return ch
}

// NewTimer returns a timer that fires once Advance moves past d from now.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, w: &fakeWaiter{ch: make(chan time.Time, 1)}}
	t.Reset(d)
	return t
}

type fakeTimer struct {
	f *Fake
	w *fakeWaiter
}

func (t *fakeTimer) C() <-chan time.Time { return t.w.ch }

// Stop unschedules the timer and drains C (as a Go 1.23 time.Timer): true
// when it was pending.
func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.stopLocked()
}

func (t *fakeTimer) stopLocked() bool {
	pending := false
	for i, w := range t.f.waiters {
		if w == t.w {
			t.f.waiters = append(t.f.waiters[:i], t.f.waiters[i+1:]...)
			pending = true
			break
		}
	}
	select {
	case <-t.w.ch:
	default:
	}
	return pending
}

// Reset reschedules the timer d from now: true when it was pending.
func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	pending := t.stopLocked()
	t.w.at = t.f.now.Add(d)
	if d <= 0 {
		t.w.ch <- t.f.now
		return pending
	}
	t.f.waiters = append(t.f.waiters, t.w)
	return pending
}

// Advance moves the clock forward by d and fires every timer now due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	var due []*fakeWaiter
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(now) {
			due = append(due, w)
		} else {
			kept = append(kept, w)
		}
	}
	f.waiters = kept
	f.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, w := range due {
		select {
		case w.ch <- now:
		default: // a timer's earlier value not yet taken (C holds one)
		}
	}
}

// Waiters reports how many timers are pending (tests use it to know a
// goroutine is parked on the clock).
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// UnixMilli is the wall-clock milliseconds of t, the unit stored in DynamoDB.
func UnixMilli(t time.Time) int64 { return t.UnixMilli() }

// Sleep waits d on c, or until ctx is done (then it returns ctx's error).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.After(d):
		return nil
	}
}
