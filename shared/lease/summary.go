// The fleet summary: its items, the store methods that read and write
// them, and the rules of who writes it.

package lease

import (
	"context"
	"slices"
	"time"
)

// Summary is the head of the fleet summary (schema.SummaryKey): what one
// worker, the summarizer, read from the alive workers' records, so that
// every other worker's coordination reads per round are one small item,
// whatever the fleet's size. It is advisory: no ownership decision
// (acquire, takeover, death declaration, trust) reads it.
type Summary struct {
	// Version only grows: a head is written only over a lower one
	// (SummaryStore.PutSummary), so a reader never sees it go backwards.
	Version int64
	Writer  string
	AtMs    int64 // the writer's wall clock (informational)
	// Alive is how many workers the summarizer listed ALIVE; Load the
	// sessions their records say they hold; Capacity the capacity of those
	// that count for a fair share (not draining, with an admin address).
	Alive, Load, Capacity int
	Imbalance             float64
	// Members and MembersBy are the version and writer of the membership
	// pages (SummaryStore.PutMembers), Pages how many there are. They move
	// only when the alive ids changed.
	Members   int64
	MembersBy string
	Pages     int
	// Peers are the receivers with room below their share (the least
	// loaded first, at most MaxSummaryPeers) and every worker a move
	// names; Moves the round's plan (at most MaxSummaryMoves).
	Peers []SummaryPeer
	Moves []SummaryMove
}

// SummaryPeer is one worker the summary names.
type SummaryPeer struct {
	ID        string
	AdminAddr string
	Load      int
	Capacity  int
}

// SummaryMove is one directed hand-off of the summarizer's plan.
type SummaryMove struct {
	From, To string
	Count    int
}

// SummaryPlan is what the summarizer adds to a head from the records it
// read (the worker's rebalancing arithmetic: Keeper.SetPlanner).
type SummaryPlan struct {
	Capacity  int
	Imbalance float64
	Peers     []SummaryPeer
	Moves     []SummaryMove
}

// Planner computes a SummaryPlan from the alive workers' records.
type Planner func(recs []WorkerRecord) SummaryPlan

// The bounds of a head, so that its size does not grow with the fleet
// (≤ ~20 KB at the longest ids with a full plan; a steady fleet's head,
// without moves, stays below 4 KB: half a read unit, which every worker
// pays every refresh; the sim measured 1.36 units a read at 1,000 workers
// with 32 receivers named), and of a membership page (1,000 ids of
// up to 64 bytes: ≤ 65 KB, far below DynamoDB's 400 KB item limit; 10,000
// workers are 10 pages).
const (
	MaxSummaryPeers = 8
	MaxSummaryMoves = 256
	MembersPerPage  = 1000
)

// SummaryStore is what the Keeper needs of a store to keep the fleet
// summary. A store without it keeps today's listing of every alive worker
// (Keeper.Fleet, RefreshWorkers).
type SummaryStore interface {
	// GetSummary reads the head (eventually consistent: a stale head costs
	// a round of staleness, never safety; ErrNoSummary when there is none).
	GetSummary(ctx context.Context) (Summary, error)
	// PutSummary writes s over a head whose Version is below s.Version,
	// or none (else ErrSummarySuperseded).
	PutSummary(ctx context.Context, s Summary) error
	// PutMembers writes membership page n of version (by writer) over a
	// page of a version not above it, or none (else ErrSummarySuperseded).
	PutMembers(ctx context.Context, n int, version int64, writer string, ids []string) error
	// GetMembers reads membership page n (eventually consistent;
	// ErrNoSummary when it is missing).
	GetMembers(ctx context.Context, n int) (version int64, writer string, ids []string, err error)
}

// SummarizerRank is self's place in the order in which the alive workers
// write the fleet summary: rendezvous hashing of each id against the
// summary's name, so every worker computes the same order from the same
// list and the summarizer moves only when it leaves. -1 when self is not
// in alive.
func SummarizerRank(self string, alive []string) int {
	if !slices.Contains(alive, self) {
		return -1
	}
	me := ranked{self, rendezvous(summaryTarget, self)}
	rank := 0
	for _, w := range alive {
		if w != self && (ranked{w, rendezvous(summaryTarget, w)}).before(me) {
			rank++
		}
	}
	return rank
}

// summaryTarget is the name the summarizers are ranked for (not a worker
// id: those have no '#').
const summaryTarget = "fleet#summary"

// SummaryStaleAfter is how long, in refresh periods, a head may stay at one
// version before the worker ranked second writes it: the first-ranked
// writes every refresh, so three refreshes without a new version mean it
// is gone or cannot write.
const SummaryStaleAfter = 3

// SummaryDue decides whether the worker at rank (SummarizerRank) writes the
// summary now: found is whether a head exists, unchanged how long this
// worker has seen the head at its current version (its monotonic clock,
// from its first read of that version: no wall clocks compared), every the
// refresh period. Rank 0 writes every refresh (unless a head newer than
// half a period is there: another writer just wrote); rank r ≥ 1 once the
// head has not moved for SummaryStaleAfter + r − 1 refreshes, so the next
// in order takes over within SummaryTakeoverBound of the last write. With
// no head at all (a new table, the cold start), ranks 0–2 write: one of
// them wins the conditional write, the others find it superseded.
func SummaryDue(rank int, found bool, unchanged, every time.Duration) bool {
	switch {
	case rank < 0:
		return false
	case !found:
		return rank < 3
	case rank == 0:
		return unchanged >= every/2
	}
	return unchanged >= time.Duration(SummaryStaleAfter+rank-1)*every
}

// SummaryTakeoverBound bounds how long after the last head a dead
// summarizer is replaced by the second-ranked worker, with refreshes every
// every: that worker read the last head within a refresh of its write
// (plus its read's latency), and writes at its first refresh
// SummaryStaleAfter refreshes later.
func SummaryTakeoverBound(every time.Duration) time.Duration {
	return time.Duration(SummaryStaleAfter+2) * every
}

// MembersPages splits ids into membership pages of MembersPerPage.
func MembersPages(ids []string) [][]string {
	var out [][]string
	for len(ids) > MembersPerPage {
		out = append(out, ids[:MembersPerPage])
		ids = ids[MembersPerPage:]
	}
	return append(out, ids)
}

// CanPutSummary decides a head write of version over stored (nil: none).
func CanPutSummary(stored *Summary, version int64) error {
	if stored != nil && stored.Version >= version {
		return ErrSummarySuperseded
	}
	return nil
}

// CanPutMembers decides a page write of version over a page stored at
// storedVersion (found: there is one).
func CanPutMembers(found bool, storedVersion, version int64) error {
	if found && storedVersion > version {
		return ErrSummarySuperseded
	}
	return nil
}
