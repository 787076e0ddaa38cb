package streamer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// tableHealth is what /readyz reports for the table: the outcome of the
// worker's own most recent store call (the reconciler queries every
// ReconcileEvery, so there is always a recent one). A probe reads it and
// costs nothing: no DynamoDB request per probe.
type tableHealth struct {
	last atomic.Pointer[tableAnswer]
}

type tableAnswer struct {
	at  time.Time
	err error // nil: the table answered
}

// record keeps the outcome of one store call. A failed condition is an
// answer (the table is up); anything else (a timeout, a refused
// connection, throttling) is not.
func (h *tableHealth) record(at time.Time, err error) {
	if isAnswer(err) {
		err = nil
	}
	h.last.Store(&tableAnswer{at: at, err: err})
}

func isAnswer(err error) bool {
	if err == nil {
		return true
	}
	for _, e := range []error{lease.ErrNotFound, lease.ErrStopped, lease.ErrHeld, lease.ErrLeaseLost, lease.ErrExpired, lease.ErrSeqRegress} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// check reports the table's health at now: an error when no call has
// answered yet, when the last call failed, or when the last answer is older
// than stale (the worker stopped calling).
func (h *tableHealth) check(now time.Time, stale time.Duration) error {
	a := h.last.Load()
	switch {
	case a == nil:
		return errors.New("no table call has answered yet")
	case a.err != nil:
		return fmt.Errorf("last table call (%s ago): %w", now.Sub(a.at).Round(time.Millisecond), a.err)
	case now.Sub(a.at) > stale:
		return fmt.Errorf("no table call for %s", now.Sub(a.at).Round(time.Second))
	}
	return nil
}

// healthStore records the outcome of every call on the lease store.
type healthStore struct {
	lease.Store
	health *tableHealth
	now    func() time.Time
}

func (s healthStore) done(err error) error {
	s.health.record(s.now(), err)
	return err
}

func (s healthStore) Acquire(ctx context.Context, id, owner string, staleBeforeMs, expiresAtMs int64) (lease.Item, error) {
	it, err := s.Store.Acquire(ctx, id, owner, staleBeforeMs, expiresAtMs)
	return it, s.done(err)
}

func (s healthStore) Renew(ctx context.Context, t lease.Token, nowMs, expiresAtMs, lastSeq int64) (lease.Item, error) {
	it, err := s.Store.Renew(ctx, t, nowMs, expiresAtMs, lastSeq)
	return it, s.done(err)
}

func (s healthStore) Checkpoint(ctx context.Context, t lease.Token, lastSeq int64) error {
	return s.done(s.Store.Checkpoint(ctx, t, lastSeq))
}

func (s healthStore) Release(ctx context.Context, t lease.Token, lastSeq int64) error {
	return s.done(s.Store.Release(ctx, t, lastSeq))
}

func (s healthStore) Fail(ctx context.Context, t lease.Token, gen, lastSeq int64, reason string, atMs int64) error {
	return s.done(s.Store.Fail(ctx, t, gen, lastSeq, reason, atMs))
}

func (s healthStore) NoteError(ctx context.Context, t lease.Token, reason string, atMs int64) error {
	return s.done(s.Store.NoteError(ctx, t, reason, atMs))
}

func (s healthStore) Get(ctx context.Context, id string) (lease.Item, error) {
	it, err := s.Store.Get(ctx, id)
	return it, s.done(err)
}

func (s healthStore) Orphans(ctx context.Context, expiresBeforeMs int64, limit int) ([]lease.Candidate, error) {
	c, err := s.Store.Orphans(ctx, expiresBeforeMs, limit)
	return c, s.done(err)
}
