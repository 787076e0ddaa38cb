package memstore

// The liveness transitions and reads: worker records.

import (
	"context"
	"slices"
	"sort"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

func cloneRec(r *lease.WorkerRecord) lease.WorkerRecord {
	c := *r
	c.Mailbox = slices.Clone(r.Mailbox)
	return c
}

// Register implements lease.Store.
func (s *Store) Register(ctx context.Context, rec lease.WorkerRecord) error {
	return s.do(ctx, "register", func() error {
		if r := s.workers[rec.ID]; r != nil {
			if rec.BootID != "" && r.BootID == rec.BootID {
				return nil // a retry of an attempt that was applied
			}
			return lease.ErrWorkerExists
		}
		c := cloneRec(&rec)
		s.workers[rec.ID] = &c
		return nil
	})
}

// Heartbeat implements lease.Store.
func (s *Store) Heartbeat(ctx context.Context, id string, epoch int64, hb lease.Heartbeat) (lease.WorkerRecord, error) {
	var out lease.WorkerRecord
	err := s.do(ctx, "heartbeat", func() error {
		r := s.workers[id]
		if lease.HeartbeatApplied(r, epoch, hb) {
			out = cloneRec(r)
			return nil
		}
		if err := lease.CanHeartbeat(r, epoch, hb.Seq); err != nil {
			return lease.ClassifyHeartbeat(r, epoch, hb.Seq)
		}
		r.HeartbeatSeq, r.HeartbeatAtMs, r.Load, r.Capacity = hb.Seq, hb.AtMs, hb.Load, hb.Capacity
		r.Draining, r.MovesPerMin = hb.Draining, hb.MovesPerMin
		if hb.AdminAddr != "" {
			r.AdminAddr = hb.AdminAddr
		}
		r.Mailbox = slices.DeleteFunc(r.Mailbox, func(m string) bool { return slices.Contains(hb.Ack, m) })
		out = cloneRec(r)
		return nil
	})
	if err != nil {
		return lease.WorkerRecord{}, err
	}
	return out, nil
}

// DeclareDead implements lease.Store.
func (s *Store) DeclareDead(ctx context.Context, id string, epoch, seenSeq int64, by string, atMs int64) error {
	return s.do(ctx, "declare_dead", func() error {
		r := s.workers[id]
		if lease.DeclaredDeadAs(r, epoch, seenSeq, by, atMs) {
			return nil
		}
		if err := lease.CanDeclareDead(r, epoch, seenSeq); err != nil {
			return err
		}
		r.State, r.Epoch, r.List, r.EndedAtMs, r.DeclaredBy = schema.WorkerDead, r.Epoch+1, schema.WorkerListGone, atMs, by
		return nil
	})
}

// Leave implements lease.Store.
func (s *Store) Leave(ctx context.Context, id string, epoch int64, list string, atMs int64) error {
	return s.do(ctx, "leave", func() error {
		r := s.workers[id]
		if err := lease.CanLeave(r, epoch); err != nil {
			return lease.ClassifyLeave(r, epoch)
		}
		r.State, r.List, r.EndedAtMs = schema.WorkerLeft, list, atMs
		return nil
	})
}

// GetWorker implements lease.Store.
func (s *Store) GetWorker(ctx context.Context, id string) (lease.WorkerRecord, error) {
	var out lease.WorkerRecord
	err := s.do(ctx, "get_worker", func() error {
		r := s.workers[id]
		if r == nil {
			return lease.ErrWorkerNotFound
		}
		out = cloneRec(r)
		return nil
	})
	return out, err
}

// ListWorkers implements lease.Store (by_worker_list: it lags by
// IndexLag.WorkerList).
func (s *Store) ListWorkers(ctx context.Context, list string, limit int) ([]string, error) {
	var out []string
	err := s.do(ctx, "list_workers", func() error {
		s.eachListedLocked(func(id, l string) {
			if l == list {
				out = append(out, id)
			}
		})
		return nil
	})
	sort.Strings(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// GetWorkers implements lease.Store.
func (s *Store) GetWorkers(ctx context.Context, ids []string) ([]lease.WorkerRecord, error) {
	var out []lease.WorkerRecord
	err := s.do(ctx, "get_workers", func() error {
		for _, id := range ids {
			if r := s.workers[id]; r != nil {
				out = append(out, cloneRec(r))
			}
		}
		return nil
	})
	return out, err
}

// MarkDone implements lease.Store.
func (s *Store) MarkDone(ctx context.Context, id string) error {
	return s.do(ctx, "mark_done", func() error {
		r := s.workers[id]
		switch {
		case r == nil:
			return lease.ErrWorkerNotFound
		case r.Alive():
			return lease.ErrWorkerAlive
		}
		r.List = schema.WorkerListDone
		return nil
	})
}
