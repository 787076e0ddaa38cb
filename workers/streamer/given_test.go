package streamer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// A directed hand-off gives the tenure: the receiver acquires the session
// from the giver's live tenure (lease.Given), so the giver writes nothing
// for it (no release, no hand-off write), the receiver's one acquire is
// the session's only write on the way, and the stream goes on after the
// giver's final checkpoint without a gap.
func TestHandoffGivesTheTenureWithoutARelease(t *testing.T) {
	e := newEnv(t)
	calls := &tenureCalls{}
	e.storeFor = func(w string, st lease.Store) lease.Store {
		return &countingTenures{Store: st, worker: w, calls: calls}
	}
	b := e.moveToNewWorker(t, func(*Config) {}, func(*testWorker) {})
	var id string
	testwait.Eventually(t, 4*reservationBound, "a session moved to "+b.ID(), func() bool {
		for _, s := range b.snapshot() {
			id = s.ID()
			return len(byWorker(e.sink.get(id), b.ID())) >= 1
		}
		return false
	})
	e.movedPromptly(t, id, b)
	e.movedContiguous(t, id)
	got := calls.of(id)
	if got.ended["w1"] != 0 {
		t.Fatalf("the giver ended %s's tenure with %d write(s), want none (given)", id, got.ended["w1"])
	}
	if got.given["w2"] != 1 || got.acquires["w2"] != 1 {
		t.Fatalf("the receiver's acquires of %s: %d, of which given %d; want one, given", id, got.acquires["w2"], got.given["w2"])
	}
}

// tenureCalls counts, per session and worker, the acquires (and those of a
// given tenure) and the writes that end a tenure (release, hand-off).
type tenureCalls struct {
	mu sync.Mutex
	by map[string]*sessionCalls
}

type sessionCalls struct{ acquires, given, ended map[string]int }

func (c *tenureCalls) add(id string, f func(*sessionCalls)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]*sessionCalls{}
	}
	s := c.by[id]
	if s == nil {
		s = &sessionCalls{acquires: map[string]int{}, given: map[string]int{}, ended: map[string]int{}}
		c.by[id] = s
	}
	f(s)
}

func (c *tenureCalls) of(id string) sessionCalls {
	var out sessionCalls
	c.add(id, func(s *sessionCalls) { out = *s })
	return out
}

type countingTenures struct {
	lease.Store
	worker string
	calls  *tenureCalls
}

func (s *countingTenures) Acquire(ctx context.Context, id, owner string, from lease.From) (lease.Item, error) {
	it, err := s.Store.Acquire(ctx, id, owner, from)
	if err == nil {
		s.calls.add(id, func(c *sessionCalls) {
			c.acquires[s.worker]++
			if from.Given != nil {
				c.given[s.worker]++
			}
		})
	}
	return it, err
}

func (s *countingTenures) Release(ctx context.Context, t lease.Token, lastSeq int64) error {
	s.calls.add(t.ConnectionID, func(c *sessionCalls) { c.ended[s.worker]++ })
	return s.Store.Release(ctx, t, lastSeq)
}

func (s *countingTenures) Handoff(ctx context.Context, t lease.Token, lastSeq int64, to string, atMs int64) error {
	s.calls.add(t.ConnectionID, func(c *sessionCalls) { c.ended[s.worker]++ })
	return s.Store.Handoff(ctx, t, lastSeq, to, atMs)
}

// A receiver whose acquire of a given tenure outlives the giver's call (a
// throttled table: the SDK's retries) and then fails keeps claiming the
// session itself: the giver's fallback tell finds that claim in flight and
// adds none, so without it the session stayed dark until its reservation
// lapsed (found by the fleet simulation's deploy, 7 s).
func TestGivenAcquireOutlivingTheGiversCallStillMoves(t *testing.T) {
	e := newEnv(t)
	// b's store calls may take 1.2 s (its bound, the most its TTL allows),
	// and the first acquire takes 1.15 s: longer than the giver's call (1 s),
	// which then releases the session reserved for b and tells b while b's
	// acquire is still in flight.
	slow := &slowFirstAcquire{hold: 1150 * time.Millisecond}
	e.storeFor = func(w string, st lease.Store) lease.Store {
		if w != "w2" {
			return st
		}
		slow.Store = st
		return slow
	}
	b := e.moveToNewWorker(t, func(c *Config) { c.StoreTimeout = 1200 * time.Millisecond }, func(*testWorker) {})
	testwait.Eventually(t, 4*reservationBound, "an acquire held past the giver's call", func() bool { return slow.id() != "" })
	e.movedPromptly(t, slow.id(), b)
}

// slowFirstAcquire holds the first acquire for hold (or until its context
// ends) and fails it as a store timeout; the others go through.
type slowFirstAcquire struct {
	lease.Store
	hold  time.Duration
	mu    sync.Mutex
	first string
}

func (s *slowFirstAcquire) id() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

func (s *slowFirstAcquire) Acquire(ctx context.Context, id, owner string, from lease.From) (lease.Item, error) {
	s.mu.Lock()
	first := s.first == ""
	if first {
		s.first = id
	}
	s.mu.Unlock()
	if !first {
		return s.Store.Acquire(ctx, id, owner, from)
	}
	select {
	case <-time.After(s.hold):
	case <-ctx.Done():
	}
	return lease.Item{}, fmt.Errorf("acquire %s: injected: the store request timed out", id)
}
