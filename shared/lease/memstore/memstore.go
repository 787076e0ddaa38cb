// Package memstore implements lease.Store in memory, evaluating the lease
// rules directly under one mutex. It is the reference the conformance suite
// holds dynamostore to, the store of unit tests, and the no-I/O store of the
// capacity benchmark. It also counts calls, can inject faults, and can make
// its index reads lag its writes as DynamoDB's global secondary indexes do
// (SetIndexLag).
package memstore

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
)

// Store is an in-memory lease table.
type Store struct {
	mu      sync.Mutex
	items   map[string]*lease.Item // LastSeq as stored: the checkpoint (last_seq), not the resume point
	workers map[string]*lease.WorkerRecord
	fleet   fleetItems // the fleet summary (summary.go)

	// The lagging index view (SetIndexLag); lagClk nil: the indexes are
	// current.
	lagClk   clock.Clock
	lag      IndexLag
	sessHist map[string][]sessVersion
	workHist map[string][]workVersion

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
func New() *Store {
	return &Store{items: map[string]*lease.Item{}, workers: map[string]*lease.WorkerRecord{}}
}

func (s *Store) injected(op string) (error, bool) {
	s.Calls.Add(1)
	f := s.fail.Load()
	if f == nil {
		return nil, false
	}
	return (*f)(op)
}

// do runs apply under the lock with the injected faults of op: a fault
// before is returned without applying; a fault after is returned after.
func (s *Store) do(ctx context.Context, op string, apply func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ferr, after := s.injected(op)
	if ferr != nil && !after {
		return ferr
	}
	s.mu.Lock()
	err := apply()
	s.recordLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return ferr
}

func clone(it *lease.Item) lease.Item {
	c := *it
	return c
}

func withSeq(it *lease.Item) lease.Item {
	c := clone(it)
	c.LastSeq = lease.ResumeSeq(it.LastSeq, it.ReleaseSeq)
	return c
}

// Put writes a whole item (seeding, as ingest would); its LastSeq, when set,
// is the checkpoint (its ReleaseSeq is ignored: only releases write one).
func (s *Store) Put(it lease.Item) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := clone(&it)
	c.ReleaseSeq = lease.NoSeq
	s.items[it.ConnectionID] = &c
	s.recordLocked()
}

// Update changes an item under the store's lock (tests: stop a session,
// restart it).
func (s *Store) Update(id string, f func(*lease.Item)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if it := s.items[id]; it != nil {
		f(it)
	}
	s.recordLocked()
}

// UpdateWorker changes a worker record under the store's lock (tests: ingest's
// mailbox write).
func (s *Store) UpdateWorker(id string, f func(*lease.WorkerRecord)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.workers[id]; r != nil {
		f(r)
	}
	s.recordLocked()
}

// ExpireWorker deletes worker id's record, as the table's TTL deletes an
// ended record a day after it ended.
func (s *Store) ExpireWorker(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.workers, id)
	s.recordLocked()
}

var _ lease.Store = (*Store)(nil)
