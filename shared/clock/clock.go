// Package clock owns time for wsfleet: a Clock interface, the real clock, a
// clock with a fixed wall offset (to test skew) and a fake clock for tests.
// Times returned by the real clock carry Go's monotonic reading, so durations
// measured with Sub are immune to wall-clock steps.
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
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After is time.After.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

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

// Fake is a manually advanced clock for tests. The zero value is not usable:
// use NewFake.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
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
	f.waiters = append(f.waiters, fakeWaiter{at: at, ch: ch})
	return ch
}

// Advance moves the clock forward by d and fires every timer now due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	var due []fakeWaiter
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
		w.ch <- now
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
