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

func (s *severableStore) Register(ctx context.Context, rec lease.WorkerRecord) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Register(ctx, rec)
}

func (s *severableStore) Heartbeat(ctx context.Context, id string, epoch int64, hb lease.Heartbeat) (lease.WorkerRecord, error) {
	if err := s.check(); err != nil {
		return lease.WorkerRecord{}, err
	}
	return s.Store.Heartbeat(ctx, id, epoch, hb)
}

func (s *severableStore) DeclareDead(ctx context.Context, id string, epoch, seenSeq int64, by string, atMs int64) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.DeclareDead(ctx, id, epoch, seenSeq, by, atMs)
}

func (s *severableStore) Leave(ctx context.Context, id string, epoch int64, list string, atMs int64) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Leave(ctx, id, epoch, list, atMs)
}

func (s *severableStore) GetWorker(ctx context.Context, id string) (lease.WorkerRecord, error) {
	if err := s.check(); err != nil {
		return lease.WorkerRecord{}, err
	}
	return s.Store.GetWorker(ctx, id)
}

func (s *severableStore) ListWorkers(ctx context.Context, list string, limit int) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.Store.ListWorkers(ctx, list, limit)
}

func (s *severableStore) MarkDone(ctx context.Context, id string) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.MarkDone(ctx, id)
}

func (s *severableStore) Acquire(ctx context.Context, id, owner string, from lease.From) (lease.Item, error) {
	if err := s.check(); err != nil {
		return lease.Item{}, err
	}
	return s.Store.Acquire(ctx, id, owner, from)
}

func (s *severableStore) Handoff(ctx context.Context, t lease.Token, lastSeq int64, to string, atMs int64) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Handoff(ctx, t, lastSeq, to, atMs)
}

func (s *severableStore) GetWorkers(ctx context.Context, ids []string) ([]lease.WorkerRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.Store.GetWorkers(ctx, ids)
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

func (s *severableStore) Fail(ctx context.Context, t lease.Token, gen, lastSeq int64, reason string, atMs int64) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Fail(ctx, t, gen, lastSeq, reason, atMs)
}

func (s *severableStore) NoteError(ctx context.Context, t lease.Token, gen int64, reason string, atMs int64) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.NoteError(ctx, t, gen, reason, atMs)
}

func (s *severableStore) Disown(ctx context.Context, t lease.Token) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.Disown(ctx, t)
}

func (s *severableStore) Get(ctx context.Context, id string) (lease.Item, error) {
	if err := s.check(); err != nil {
		return lease.Item{}, err
	}
	return s.Store.Get(ctx, id)
}

func (s *severableStore) Unowned(ctx context.Context, limit int) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.Store.Unowned(ctx, limit)
}

func (s *severableStore) OwnedBy(ctx context.Context, owner string, limit int) ([]lease.Owned, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.Store.OwnedBy(ctx, owner, limit)
}

// crash plays a kill -9 of w (whose store is st) in-process: the table is
// cut off at once, every socket closed without a handshake and every session
// left for the takeover; then w's Run is stopped (cancel) and its end awaited
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

func (s *severableStore) AssignStandby(ctx context.Context, id, worker string, gen int64, prev *lease.StandbyToken) (lease.Item, error) {
	if err := s.check(); err != nil {
		return lease.Item{}, err
	}
	return s.Store.AssignStandby(ctx, id, worker, gen, prev)
}

func (s *severableStore) DropStandby(ctx context.Context, t lease.StandbyToken, refusedGen int64, reason string, atMs int64) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.Store.DropStandby(ctx, t, refusedGen, reason, atMs)
}
