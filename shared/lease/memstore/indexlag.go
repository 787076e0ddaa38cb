package memstore

// The index-lag simulation (SetIndexLag): the listings answered from the
// versions an index had seen, as DynamoDB's global secondary indexes lag the
// table.

import (
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

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
