// The Keeper's side of the fleet summary: reading the head every refresh,
// the membership only when it moved, and writing both when this worker is
// the summarizer (SummaryDue).

package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// summaryState is the Keeper's view of the fleet summary.
type summaryState struct {
	store   SummaryStore // nil: the store keeps none (every refresh lists)
	planner Planner

	mu     sync.Mutex // a leaf lock
	found  bool       // a head was read or written
	head   Summary    // the highest version seen
	seenAt time.Time  // when this Keeper first saw head.Version (monotonic)
	// members are the alive ids of membership version membersVer by
	// membersBy (have: read or written).
	have       bool
	members    []string
	membersVer int64
	membersBy  string
	executed   int64 // the head version whose moves this worker made (TakeMoves)
	// fallbacks counts the listings of every alive worker made because no
	// summary (or no readable membership) was there; written the heads
	// this Keeper wrote.
	fallbacks, written int64
}

// SetPlanner sets what the summarizer adds to a head from the records
// (nil: counts only, no receivers or moves). Call it before Run.
func (k *Keeper) SetPlanner(p Planner) {
	k.sum.mu.Lock()
	k.sum.planner = p
	k.sum.mu.Unlock()
}

// Summary is the newest fleet summary head this Keeper has seen and how
// long ago (its monotonic clock) it first saw that version; ok false when
// it has seen none (or the store keeps none).
func (k *Keeper) Summary() (s Summary, age time.Duration, ok bool) {
	k.sum.mu.Lock()
	defer k.sum.mu.Unlock()
	if !k.sum.found {
		return Summary{}, 0, false
	}
	return k.sum.head, k.clk.Now().Sub(k.sum.seenAt), true
}

// TakeMoves returns the newest head's moves from this worker, once per head
// version: a round that finds the same head as the last one moves nothing
// more. ok false when there is no head.
func (k *Keeper) TakeMoves() (s Summary, moves []SummaryMove, ok bool) {
	k.sum.mu.Lock()
	defer k.sum.mu.Unlock()
	if !k.sum.found {
		return Summary{}, nil, false
	}
	s = k.sum.head
	if s.Version == k.sum.executed {
		return s, nil, true
	}
	k.sum.executed = s.Version
	for _, m := range s.Moves {
		if m.From == k.cfg.Owner {
			moves = append(moves, m)
		}
	}
	return s, moves, true
}

// SummaryCounts are how many times this Keeper listed every alive worker
// because there was no summary to read (fallbacks) and how many heads it
// wrote.
func (k *Keeper) SummaryCounts() (fallbacks, written int64) {
	k.sum.mu.Lock()
	defer k.sum.mu.Unlock()
	return k.sum.fallbacks, k.sum.written
}

// listAlive lists the ALIVE workers (the by_worker_list index).
func (k *Keeper) listAlive(ctx context.Context) ([]string, error) {
	ids, err := k.store.ListWorkers(ctx, schema.WorkerListAlive, 0)
	if err != nil {
		return nil, fmt.Errorf("alive workers: %w", err)
	}
	return ids, nil
}

// aliveList is the alive worker ids a refresh computes the watch targets
// from: the summary's membership (one head read, and the pages only when
// the membership moved); this worker's own listing when it wrote the
// summary; a listing of every alive worker when no summary exists (the
// cold start, counted) or the store keeps none.
func (k *Keeper) aliveList(ctx context.Context) ([]string, error) {
	ss := k.sum.store
	if ss == nil {
		return k.listAlive(ctx)
	}
	rctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	head, err := ss.GetSummary(rctx)
	cancel()
	now := k.clk.Now()
	if err != nil && !errors.Is(err, ErrNoSummary) {
		// The read failed: the last membership stands, and the
		// summarizer's backstop waits again (backstop.go).
		k.backstopForget()
		k.sum.mu.Lock()
		defer k.sum.mu.Unlock()
		if k.sum.have {
			return k.sum.members, nil
		}
		return nil, fmt.Errorf("fleet summary: %w", err)
	}
	k.sum.mu.Lock()
	// An eventually consistent read may answer an older head than one
	// seen (or written) already: the view never goes backwards.
	if err == nil && (!k.sum.found || head.Version > k.sum.head.Version) {
		k.sum.found, k.sum.head, k.sum.seenAt = true, head, now
	}
	cur, found, unchanged := k.sum.head, k.sum.found, now.Sub(k.sum.seenAt)
	have := k.sum.have && k.sum.membersVer == cur.Members && k.sum.membersBy == cur.MembersBy
	members := k.sum.members
	k.sum.mu.Unlock()
	if found && !have && cur.Pages > 0 {
		members, have = k.readMembers(ctx, ss, cur)
	}
	listed := false
	if !have {
		if members, err = k.listAlive(ctx); err != nil {
			return nil, err
		}
		listed = true
		k.sum.mu.Lock()
		k.sum.fallbacks++
		k.sum.mu.Unlock()
	}
	rank := SummarizerRank(k.cfg.Owner, AliveView(k.cfg.Owner, members, k.KnownGone))
	if found && cur.Writer == k.cfg.Owner {
		// The writer of the newest head keeps writing it every refresh,
		// as the first in order does: one that took over from a dead
		// summarizer still ranks second while the membership names the
		// dead one, and waiting out SummaryStaleAfter would leave the
		// membership stale. Once the first in order writes (it was slow,
		// not dead), the head is its and this worker stops.
		rank = 0
	}
	if SummaryDue(rank, found, unchanged, k.cfg.RefreshEvery) {
		var relist []string
		if listed {
			relist = members
		}
		if ids, err := k.summarize(ctx, ss, cur, found, relist); err == nil {
			return ids, nil
		}
	}
	return members, nil
}

// readMembers reads cur's membership pages; ok false when one is missing
// or of another version (a writer between its pages and its head, or a
// lagging read): the next refresh reads again.
func (k *Keeper) readMembers(ctx context.Context, ss SummaryStore, cur Summary) ([]string, bool) {
	var ids []string
	for n := range cur.Pages {
		rctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
		v, by, page, err := ss.GetMembers(rctx, n)
		cancel()
		if err != nil || v != cur.Members || by != cur.MembersBy {
			return nil, false
		}
		ids = append(ids, page...)
	}
	k.sum.mu.Lock()
	if k.sum.head.Members == cur.Members && k.sum.head.MembersBy == cur.MembersBy {
		k.sum.have, k.sum.members, k.sum.membersVer, k.sum.membersBy = true, ids, cur.Members, cur.MembersBy
	}
	k.sum.mu.Unlock()
	return ids, true
}

// summarize lists the alive workers (unless listed already), reads their
// records and writes the head over cur (version + 1), with new membership
// pages first when the alive ids changed. It returns the alive ids.
func (k *Keeper) summarize(ctx context.Context, ss SummaryStore, cur Summary, found bool, listed []string) ([]string, error) {
	// One refresh period for the whole pass: at 10,000 workers it is 100
	// BatchGetItems.
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RefreshEvery)
	defer cancel()
	if listed == nil {
		var err error
		if listed, err = k.listAlive(ctx); err != nil {
			return nil, err
		}
	}
	recs, err := k.records(ctx, listed)
	if err != nil {
		k.backstopForget()
		return nil, err
	}
	receivedAt := k.clk.Now()
	// The records are read from the table, the listing from an index that
	// lags: a worker declared DEAD or LEFT since is left out.
	var ids []string
	s := Summary{Version: cur.Version + 1, Writer: k.cfg.Owner, AtMs: k.clk.Now().UnixMilli()}
	alive := recs[:0:0]
	for _, r := range recs {
		if r.Alive() {
			ids = append(ids, r.ID)
			alive = append(alive, r)
			s.Load += r.Load
		}
	}
	slices.Sort(ids)
	s.Alive = len(ids)
	k.sum.mu.Lock()
	planner := k.sum.planner
	same := found && k.sum.have && k.sum.membersVer == cur.Members && k.sum.membersBy == cur.MembersBy && slices.Equal(k.sum.members, ids)
	k.sum.mu.Unlock()
	if planner != nil {
		p := planner(alive)
		s.Capacity, s.Imbalance = p.Capacity, p.Imbalance
		s.Peers = p.Peers[:min(len(p.Peers), MaxSummaryPeers+MaxSummaryMoves)]
		s.Moves = p.Moves[:min(len(p.Moves), MaxSummaryMoves)]
	}
	if same {
		s.Members, s.MembersBy, s.Pages = cur.Members, cur.MembersBy, cur.Pages
	} else {
		pages := MembersPages(ids)
		for n, page := range pages {
			if err := ss.PutMembers(ctx, n, s.Version, k.cfg.Owner, page); err != nil {
				return nil, fmt.Errorf("membership page %d: %w", n, err)
			}
		}
		s.Members, s.MembersBy, s.Pages = s.Version, k.cfg.Owner, len(pages)
	}
	if err := ss.PutSummary(ctx, s); err != nil {
		return nil, fmt.Errorf("fleet summary: %w", err)
	}
	// The records read are every alive worker's: declare the ones whose
	// watchers did not (backstop.go).
	k.backstopDeclare(ctx, k.backstopDue(alive, receivedAt))
	k.sum.mu.Lock()
	if !k.sum.found || s.Version > k.sum.head.Version {
		k.sum.found, k.sum.head, k.sum.seenAt = true, s, k.clk.Now()
		k.sum.have, k.sum.members, k.sum.membersVer, k.sum.membersBy = true, ids, s.Members, s.MembersBy
	}
	k.sum.written++
	k.sum.mu.Unlock()
	return ids, nil
}
