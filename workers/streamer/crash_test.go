package streamer

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// errKilled is every store call of a killed test worker.
var errKilled = errors.New("test worker killed: no more store calls")

// severableStore is a lease.Store a test cuts off at once, as a kill -9
// cuts a process off its table: from sever on, no call reaches it.
type severableStore struct {
	lease.Store
	cut atomic.Bool
}

func (s *severableStore) sever() { s.cut.Store(true) }

func (s *severableStore) check() error {
	if s.cut.Load() {
		return errKilled
	}
	return nil
}

func (s *severableStore) Acquire(ctx context.Context, id, owner string, staleBeforeMs, expiresAtMs int64) (lease.Item, error) {
	if err := s.check(); err != nil {
		return lease.Item{}, err
	}
	return s.Store.Acquire(ctx, id, owner, staleBeforeMs, expiresAtMs)
}

func (s *severableStore) Renew(ctx context.Context, t lease.Token, nowMs, expiresAtMs, lastSeq int64) (lease.Item, error) {
	if err := s.check(); err != nil {
		return lease.Item{}, err
	}
	return s.Store.Renew(ctx, t, nowMs, expiresAtMs, lastSeq)
}

func (s *severableStore) Checkpoint(ctx context.Context, t lease.Token, lastSeq int64) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Checkpoint(ctx, t, lastSeq)
}

func (s *severableStore) Release(ctx context.Context, t lease.Token, lastSeq int64) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Release(ctx, t, lastSeq)
}

func (s *severableStore) Get(ctx context.Context, id string) (lease.Item, error) {
	if err := s.check(); err != nil {
		return lease.Item{}, err
	}
	return s.Store.Get(ctx, id)
}

func (s *severableStore) Orphans(ctx context.Context, expiresBeforeMs int64, limit int) ([]lease.Candidate, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.Store.Orphans(ctx, expiresBeforeMs, limit)
}

// crash plays a kill -9 of w (whose store is st) in-process: the table is
// cut off at once, every socket closed without a handshake and every lease
// left to expire; then w's Run is stopped (cancel) and its end awaited
// (done). Nothing of it is in the shipped worker.
func crash(w *Worker, st *severableStore, cancel context.CancelFunc, done <-chan error) {
	st.sever()
	w.abandoned.Store(true)
	for _, s := range w.snapshot() {
		s.Interrupt(session.ErrCrashed)
	}
	cancel()
	<-done
}

// Stats passes the wrapped store's request counts through (/stats).
func (s *severableStore) Stats() map[string]int64 {
	if st, ok := s.Store.(StoreStatser); ok {
		return st.Stats()
	}
	return nil
}
