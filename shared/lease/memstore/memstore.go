// Package memstore implements lease.Store in memory, evaluating the lease
// rules directly under one mutex. It is the reference the conformance suite
// holds dynamostore to, the store of unit tests, and the no-I/O store of the
// capacity benchmark. It also counts calls and can inject faults.
package memstore

import (
	"context"
	"maps"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// Store is an in-memory lease table.
type Store struct {
	mu    sync.Mutex
	items map[string]*lease.Item

	fail atomic.Pointer[FailFunc]

	Calls atomic.Int64
}

// FailFunc injects faults: called before every operation, a non-nil error is
// returned instead of performing it (after is false) or after performing it
// (after is true: an ambiguous write that was applied).
type FailFunc func(op string) (err error, after bool)

// SetFail installs f (nil removes it); safe to call while the store is in use.
func (s *Store) SetFail(f FailFunc) {
	if f == nil {
		s.fail.Store(nil)
		return
	}
	s.fail.Store(&f)
}

// New returns an empty store.
func New() *Store { return &Store{items: map[string]*lease.Item{}} }

func (s *Store) injected(op string) (error, bool) {
	s.Calls.Add(1)
	f := s.fail.Load()
	if f == nil {
		return nil, false
	}
	return (*f)(op)
}

func (s *Store) get(id string) *lease.Item { return s.items[id] }

func clone(it *lease.Item) lease.Item {
	c := *it
	c.Headers = maps.Clone(it.Headers)
	return c
}

// Put writes a whole item (seeding, as ingest would).
func (s *Store) Put(it lease.Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := clone(&it)
	s.items[it.ConnectionID] = &c
}

// Update changes an item under the store's lock (tests: stop a session,
// steal a lease).
func (s *Store) Update(id string, f func(*lease.Item)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it := s.items[id]; it != nil {
		f(it)
	}
}

// Acquire implements lease.Store.
func (s *Store) Acquire(ctx context.Context, id, owner string, staleBeforeMs, expiresAtMs int64) (lease.Item, error) {
	return s.write(ctx, "acquire", id, func(it *lease.Item) error {
		if err := lease.CanAcquire(it, staleBeforeMs); err != nil {
			// Same classification as a table store after a failed condition.
			return lease.ClassifyAcquire(it, owner, staleBeforeMs, expiresAtMs)
		}
		it.Owner, it.ExpiresAtMs, it.Epoch = owner, expiresAtMs, it.Epoch+1
		return nil
	})
}

// Renew implements lease.Store.
func (s *Store) Renew(ctx context.Context, t lease.Token, nowMs, expiresAtMs, lastSeq int64) (lease.Item, error) {
	return s.write(ctx, "renew", t.ConnectionID, func(it *lease.Item) error {
		if err := lease.CanRenew(it, t, nowMs, lastSeq); err != nil {
			return lease.ClassifyRenew(it, t, nowMs, expiresAtMs, lastSeq)
		}
		it.ExpiresAtMs, it.LastSeq = expiresAtMs, lastSeq
		return nil
	})
}

// Checkpoint implements lease.Store.
func (s *Store) Checkpoint(ctx context.Context, t lease.Token, lastSeq int64) error {
	_, err := s.write(ctx, "checkpoint", t.ConnectionID, func(it *lease.Item) error {
		if err := lease.CanFencedWrite(it, t, lastSeq); err != nil {
			return err
		}
		it.LastSeq = lastSeq
		return nil
	})
	return err
}

// Release implements lease.Store.
func (s *Store) Release(ctx context.Context, t lease.Token, lastSeq int64) error {
	_, err := s.write(ctx, "release", t.ConnectionID, func(it *lease.Item) error {
		if err := lease.CanFencedWrite(it, t, lastSeq); err != nil {
			return err
		}
		it.ExpiresAtMs, it.LastSeq = 0, lastSeq
		return nil
	})
	return err
}

// Fail implements lease.Store.
func (s *Store) Fail(ctx context.Context, t lease.Token, gen, lastSeq int64, reason string, atMs int64) error {
	_, err := s.write(ctx, "fail", t.ConnectionID, func(it *lease.Item) error {
		if err := lease.CanFail(it, t, gen, lastSeq); err != nil {
			return err
		}
		it.FailedGeneration, it.LastError, it.LastErrorAtMs = &gen, reason, atMs
		it.ExpiresAtMs, it.LastSeq = lease.FailedExpiresAtMs, lastSeq
		return nil
	})
	return err
}

// NoteError implements lease.Store.
func (s *Store) NoteError(ctx context.Context, t lease.Token, reason string, atMs int64) error {
	_, err := s.write(ctx, "note_error", t.ConnectionID, func(it *lease.Item) error {
		if err := lease.CanNoteError(it, t); err != nil {
			return err
		}
		it.LastError, it.LastErrorAtMs = reason, atMs
		return nil
	})
	return err
}

func (s *Store) write(ctx context.Context, op, id string, apply func(*lease.Item) error) (lease.Item, error) {
	if err := ctx.Err(); err != nil {
		return lease.Item{}, err
	}
	ferr, after := s.injected(op)
	if ferr != nil && !after {
		return lease.Item{}, ferr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it := s.get(id)
	var err error
	if it == nil {
		err = lease.ErrNotFound
	} else {
		next := clone(it)
		if err = apply(&next); err == nil {
			*it = next
		}
	}
	if err != nil {
		return lease.Item{}, err
	}
	if ferr != nil {
		return lease.Item{}, ferr
	}
	return clone(it), nil
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, id string) (lease.Item, error) {
	if err, _ := s.injected("get"); err != nil {
		return lease.Item{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it := s.get(id)
	if it == nil {
		return lease.Item{}, lease.ErrNotFound
	}
	return clone(it), nil
}

// Orphans implements lease.Store.
func (s *Store) Orphans(ctx context.Context, expiresBeforeMs int64, limit int) ([]lease.Candidate, error) {
	if err, _ := s.injected("orphans"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []lease.Candidate
	for _, it := range s.items {
		if it.DesiredState == schema.StateStarted && it.ExpiresAtMs < expiresBeforeMs {
			out = append(out, lease.Candidate{ConnectionID: it.ConnectionID, ExpiresAtMs: it.ExpiresAtMs})
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].ExpiresAtMs != out[j].ExpiresAtMs {
			return out[i].ExpiresAtMs < out[j].ExpiresAtMs
		}
		return out[i].ConnectionID < out[j].ConnectionID
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

var _ lease.Store = (*Store)(nil)
