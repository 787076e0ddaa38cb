package memstore

// The session transitions and reads, by the pure rules of package lease.

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// Acquire implements lease.Store.
func (s *Store) Acquire(ctx context.Context, id, owner string, from lease.From) (lease.Item, error) {
	var out lease.Item
	err := s.do(ctx, "acquire", func() error {
		it := s.items[id]
		if err := lease.CanAcquire(it, owner, from); err != nil {
			return err
		}
		if lease.AcquireDropsStandby(it, owner, from) {
			it.Standby = ""
		}
		it.Owner, it.Epoch, it.HandoffTo, it.HandoffAtMs = owner, it.Epoch+1, "", 0
		it.TenureKey = from.Key
		if seq := lease.GivenSeq(from); seq != lease.NoSeq {
			it.ReleaseSeq = seq // a given tenure's final checkpoint, as its release would have
		}
		out = withSeq(it)
		return nil
	})
	if err != nil {
		return lease.Item{}, err
	}
	return out, nil
}

// Checkpoint implements lease.Store.
func (s *Store) Checkpoint(ctx context.Context, t lease.Token, lastSeq int64) error {
	if lastSeq == lease.NoSeq {
		return nil
	}
	return s.do(ctx, "checkpoint", func() error { return s.checkpointLocked(t, lastSeq) })
}

func (s *Store) checkpointLocked(t lease.Token, lastSeq int64) error {
	it := s.items[t.ConnectionID]
	if it == nil {
		return lease.ErrLeaseLost
	}
	if err := lease.CanCheckpoint(it.Owner, it.Epoch, it.LastSeq, t, lastSeq); err != nil {
		return err
	}
	it.LastSeq = lastSeq
	return nil
}

// Release implements lease.Store.
func (s *Store) Release(ctx context.Context, t lease.Token, lastSeq int64) error {
	return s.release(ctx, "release", t, lastSeq, "", 0)
}

// Handoff implements lease.Store.
func (s *Store) Handoff(ctx context.Context, t lease.Token, lastSeq int64, to string, atMs int64) error {
	return s.release(ctx, "handoff", t, lastSeq, to, atMs)
}

// release ends t's ownership with its final checkpoint as release_seq,
// reserving a STARTED session for worker to ("" for none).
func (s *Store) release(ctx context.Context, op string, t lease.Token, lastSeq int64, to string, atMs int64) error {
	return s.do(ctx, op, func() error {
		it := s.items[t.ConnectionID]
		if lease.Released(it, t, lastSeq, to) {
			return nil
		}
		if err := lease.CanRelease(it, t, lastSeq); err != nil {
			return err
		}
		if lastSeq != lease.NoSeq {
			it.ReleaseSeq = lastSeq
		}
		it.Owner = ""
		if to != "" && it.DesiredState == schema.StateStarted {
			it.HandoffTo, it.HandoffAtMs = to, atMs
		}
		return nil
	})
}

// Fail implements lease.Store.
func (s *Store) Fail(ctx context.Context, t lease.Token, gen, lastSeq int64, reason string, atMs int64) error {
	return s.do(ctx, "fail", func() error {
		it := s.items[t.ConnectionID]
		if lease.FailedAs(it, t, gen, lastSeq, reason, atMs) {
			return nil
		}
		if err := lease.CanFail(it, t, gen, lastSeq); err != nil {
			return err
		}
		if lastSeq != lease.NoSeq {
			it.ReleaseSeq = lastSeq
		}
		it.FailedGeneration, it.LastError, it.LastErrorAtMs, it.Owner = &gen, reason, atMs, ""
		it.LastErrorGen, it.LastErrorEpoch = gen, t.Epoch
		return nil
	})
}

// AssignStandby implements lease.Store.
func (s *Store) AssignStandby(ctx context.Context, id, worker string, gen int64, prev *lease.StandbyToken) (lease.Item, error) {
	var out lease.Item
	err := s.do(ctx, "assign_standby", func() error {
		it := s.items[id]
		if err := lease.CanAssignStandby(it, worker, gen, prev); err != nil {
			return err
		}
		it.Standby, it.StandbyEpoch, it.StandbyError = worker, it.StandbyEpoch+1, ""
		out = clone(it)
		out.Spec, out.LastSeq = "", out.ReleaseSeq // as written: neither is read
		return nil
	})
	if err != nil {
		return lease.Item{}, err
	}
	return out, nil
}

// DropStandby implements lease.Store.
func (s *Store) DropStandby(ctx context.Context, t lease.StandbyToken, refusedGen int64, reason string, _ int64) error {
	return s.do(ctx, "drop_standby", func() error {
		it := s.items[t.ConnectionID]
		if err := lease.CanDropStandby(it, t); err != nil {
			return err
		}
		it.Standby = ""
		if refusedGen > 0 {
			it.StandbyRefusedGen = refusedGen
		}
		if reason != "" {
			it.StandbyError = lease.StandbyReason(reason)
		}
		return nil
	})
}

// Disown implements lease.Store.
func (s *Store) Disown(ctx context.Context, t lease.Token) error {
	return s.do(ctx, "disown", func() error {
		it := s.items[t.ConnectionID]
		if lease.Disowned(it, t) {
			return nil
		}
		if err := lease.CanDisown(it, t); err != nil {
			return err
		}
		it.Owner = ""
		return nil
	})
}

// NoteError implements lease.Store.
func (s *Store) NoteError(ctx context.Context, t lease.Token, gen int64, reason string, atMs int64) error {
	return s.do(ctx, "note_error", func() error {
		it := s.items[t.ConnectionID]
		if err := lease.CanOwnerWrite(it, t); err != nil {
			return err
		}
		it.LastError, it.LastErrorAtMs, it.LastErrorGen, it.LastErrorEpoch = reason, atMs, gen, t.Epoch
		return nil
	})
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, id string) (lease.Item, error) {
	var out lease.Item
	err := s.do(ctx, "get", func() error {
		it := s.items[id]
		if it == nil {
			return lease.ErrNotFound
		}
		out = withSeq(it)
		return nil
	})
	return out, err
}

// GetHead implements lease.HeadReader: Get without the Spec.
func (s *Store) GetHead(ctx context.Context, id string) (lease.Item, error) {
	it, err := s.Get(ctx, id)
	it.Spec = ""
	return it, err
}

// Unowned implements lease.Store (by_unowned: it lags by IndexLag.Unowned).
func (s *Store) Unowned(ctx context.Context, limit int) ([]string, error) {
	var out []string
	err := s.do(ctx, "unowned", func() error {
		s.eachIndexedLocked(s.lag.Unowned, func(id string, e sessEntry) {
			if e.unowned {
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

// OwnedBy implements lease.Store (by_owner: it lags by IndexLag.Owner):
// AppendOwnedBy into no array, then cut to limit.
func (s *Store) OwnedBy(ctx context.Context, owner string, limit int) ([]lease.Owned, error) {
	out, err := s.AppendOwnedBy(ctx, nil, owner)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// AppendOwnedBy implements lease.OwnedByAppender: the worker's audit lists
// its sessions this way every AuditEvery, into its last pass's array, so a
// steady audit allocates nothing. When dst lacks the room, the listing
// allocates its one array, sized by a counting pass, and sorts in place:
// appending to a growing array allocated about five times the listing (64
// B an entry), the capacity bench's largest steady allocation per session
// before the audit reused its array (docs/worker.md, "Where a session's
// memory goes").
func (s *Store) AppendOwnedBy(ctx context.Context, dst []lease.Owned, owner string) ([]lease.Owned, error) {
	out := dst
	err := s.do(ctx, "owned_by", func() error {
		n := 0
		s.eachIndexedLocked(s.lag.Owner, func(_ string, e sessEntry) {
			if e.owner == owner {
				n++
			}
		})
		if cap(out)-len(out) < n {
			out = append(make([]lease.Owned, 0, len(out)+n), out...) // its exact size: no room to grow into
		}
		s.eachIndexedLocked(s.lag.Owner, func(id string, e sessEntry) {
			if e.owner == owner {
				out = append(out, lease.Owned{Token: lease.Token{ConnectionID: id, Owner: owner, Epoch: e.epoch}, DesiredState: e.desired, Generation: e.generation})
			}
		})
		return nil
	})
	slices.SortFunc(out[len(dst):], func(a, b lease.Owned) int { return strings.Compare(a.ConnectionID, b.ConnectionID) })
	return out, err
}
