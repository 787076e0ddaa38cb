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
	for _, e := range []error{lease.ErrNotFound, lease.ErrStopped, lease.ErrHeld, lease.ErrLeaseLost, lease.ErrSeqRegress, lease.ErrWorkerDead, lease.ErrWorkerExists} {
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

// healthStore records the outcome of the worker's registration and of every
// heartbeat (one table call per HeartbeatEvery: /readyz reflects the table
// as the worker last reached it, within a second).
type healthStore struct {
	lease.Store
	health *tableHealth
	now    func() time.Time
}

func (s healthStore) done(err error) error {
	s.health.record(s.now(), err)
	return err
}

func (s healthStore) Register(ctx context.Context, rec lease.WorkerRecord) error {
	return s.done(s.Store.Register(ctx, rec))
}

// AppendOwnedBy keeps the table's lease.OwnedByAppender reachable through
// the wrapper: the audit lists into its last pass's array.
func (s healthStore) AppendOwnedBy(ctx context.Context, dst []lease.Owned, owner string) ([]lease.Owned, error) {
	return lease.AppendOwnedBy(ctx, s.Store, dst, owner)
}

// GetHead keeps the table's lease.HeadReader reachable through the
// wrapper: a standby's check reads the session item alone.
func (s healthStore) GetHead(ctx context.Context, id string) (lease.Item, error) {
	return lease.GetHead(ctx, s.Store, id)
}

func (s healthStore) Heartbeat(ctx context.Context, id string, epoch int64, hb lease.Heartbeat) (lease.WorkerRecord, error) {
	rec, err := s.Store.Heartbeat(ctx, id, epoch, hb)
	return rec, s.done(err)
}
