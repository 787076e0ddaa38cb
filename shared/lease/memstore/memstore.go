// Package memstore implements lease.Store in memory, evaluating the lease
// rules directly under one mutex. It is the reference the conformance suite
// holds dynamostore to, the store of unit tests, and the no-I/O store of the
// capacity benchmark. It also counts calls, can inject faults, and can make
// its index reads lag its writes as DynamoDB's global secondary indexes do
// (SetIndexLag).
package memstore

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
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

// --- Liveness ---

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

// --- Sessions ---

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

// OwnedBy implements lease.Store (by_owner: it lags by IndexLag.Owner).
// The worker's audit lists its sessions this way every AuditEvery, so the
// listing allocates its one array, sized by a counting pass, and sorts in
// place: appending to a growing array allocated about five times the
// listing (64 B an entry), the capacity bench's largest steady allocation
// per session (docs/worker.md, "Where a session's memory goes").
func (s *Store) OwnedBy(ctx context.Context, owner string, limit int) ([]lease.Owned, error) {
	var out []lease.Owned
	err := s.do(ctx, "owned_by", func() error {
		n := 0
		s.eachIndexedLocked(s.lag.Owner, func(_ string, e sessEntry) {
			if e.owner == owner {
				n++
			}
		})
		if n == 0 {
			return nil
		}
		out = make([]lease.Owned, 0, n)
		s.eachIndexedLocked(s.lag.Owner, func(id string, e sessEntry) {
			if e.owner == owner {
				out = append(out, lease.Owned{Token: lease.Token{ConnectionID: id, Owner: owner, Epoch: e.epoch}, DesiredState: e.desired, Generation: e.generation})
			}
		})
		return nil
	})
	slices.SortFunc(out, func(a, b lease.Owned) int { return strings.Compare(a.ConnectionID, b.ConnectionID) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}

// --- Index lag ---

// IndexLag is how far each index read lags the table's writes: DynamoDB's
// global secondary indexes are eventually consistent, with no upper bound
// on the lag (see lease.Config.IndexLagBound).
type IndexLag struct {
	Owner      time.Duration // by_owner: OwnedBy
	Unowned    time.Duration // by_unowned: Unowned
	WorkerList time.Duration // by_worker_list: ListWorkers
}

// sessEntry is what the session indexes hold of one item.
type sessEntry struct {
	owner      string // by_owner's key ("" = not in it)
	epoch      int64
	desired    string
	generation int64
	unowned    bool // in by_unowned
}

type sessVersion struct {
	at      time.Time
	present bool
	e       sessEntry
}

type workVersion struct {
	at   time.Time
	list string // "" = no record
}

// SetIndexLag makes the index reads answer from the table as it was lag
// ago on clk (each index its own lag; IndexLag{} and clk nil: current).
// Writes before the call are indexed already. Lag may change while the
// store is in use (a lag episode); a longer lag than before answers no
// older than the history kept, which starts at the call.
func (s *Store) SetIndexLag(clk clock.Clock, lag IndexLag) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if clk == nil {
		s.lagClk, s.lag, s.sessHist, s.workHist = nil, IndexLag{}, nil, nil
		return
	}
	if s.lagClk == nil {
		s.sessHist, s.workHist = map[string][]sessVersion{}, map[string][]workVersion{}
		for id, it := range s.items {
			s.sessHist[id] = []sessVersion{{present: true, e: entryOf(it)}}
		}
		for id, r := range s.workers {
			s.workHist[id] = []workVersion{{list: r.List}}
		}
	}
	s.lagClk, s.lag = clk, lag
}

func entryOf(it *lease.Item) sessEntry {
	return sessEntry{
		owner: it.Owner, epoch: it.Epoch, desired: it.DesiredState, generation: it.Generation,
		unowned: it.DesiredState == schema.StateStarted && it.Owner == "" && !it.Failed(),
	}
}

// recordLocked notes, when the indexes lag, the index entries that changed
// since the last write, at the store's clock; the caller holds mu.
func (s *Store) recordLocked() {
	if s.lagClk == nil {
		return
	}
	now := s.lagClk.Now()
	keep := now.Add(-max(s.lag.Owner, s.lag.Unowned, s.lag.WorkerList))
	for id, it := range s.items {
		h := s.sessHist[id]
		e := entryOf(it)
		if n := len(h); n > 0 && h[n-1].present && h[n-1].e == e {
			continue
		}
		s.sessHist[id] = prune(append(h, sessVersion{at: now, present: true, e: e}), keep, func(v sessVersion) time.Time { return v.at })
	}
	for id, r := range s.workers {
		h := s.workHist[id]
		if n := len(h); n > 0 && h[n-1].list == r.List {
			continue
		}
		s.workHist[id] = prune(append(h, workVersion{at: now, list: r.List}), keep, func(v workVersion) time.Time { return v.at })
	}
}

// prune drops the versions no read can answer from any more: those before
// the last one at or before keep.
func prune[V any](h []V, keep time.Time, at func(V) time.Time) []V {
	i := 0
	for i+1 < len(h) && !at(h[i+1]).After(keep) {
		i++
	}
	return h[i:]
}

// eachIndexedLocked calls f with each item's session index entry as of lag
// ago: its last write at or before then (none: not yet indexed). The
// caller holds mu.
func (s *Store) eachIndexedLocked(lag time.Duration, f func(id string, e sessEntry)) {
	if s.lagClk == nil {
		for id, it := range s.items {
			f(id, entryOf(it))
		}
		return
	}
	cut := s.lagClk.Now().Add(-lag)
	for id, h := range s.sessHist {
		for i := len(h) - 1; i >= 0; i-- {
			if !h[i].at.After(cut) {
				if h[i].present {
					f(id, h[i].e)
				}
				break
			}
		}
	}
}

// eachListedLocked calls f with each worker record's w_list as
// by_worker_list shows it (IndexLag.WorkerList ago). The caller holds mu.
func (s *Store) eachListedLocked(f func(id, list string)) {
	if s.lagClk == nil {
		for id, r := range s.workers {
			f(id, r.List)
		}
		return
	}
	cut := s.lagClk.Now().Add(-s.lag.WorkerList)
	for id, h := range s.workHist {
		for i := len(h) - 1; i >= 0; i-- {
			if !h[i].at.After(cut) {
				if h[i].list != "" {
					f(id, h[i].list)
				}
				break
			}
		}
	}
}

var _ lease.Store = (*Store)(nil)
