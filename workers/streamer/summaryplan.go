package streamer

import (
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/rebalance"
)

// The fleet summary's side of rebalancing (issue 37): the worker that
// writes the summary (lease.SummarizerRank) plans the round for the whole
// fleet from the records it read (summaryPlan); every other worker's round
// reads nothing more: it makes the moves from itself of the newest head it
// has not acted on (roundPlan). Without a head (a store that keeps none, or
// a new table before the first one) the round reads the fleet as before.

// healthSummaryStore is healthStore with the fleet summary's methods of a
// store that keeps one.
type healthSummaryStore struct {
	healthStore
	lease.SummaryStore
}

// withSummary is s, keeping the fleet summary's methods when inner has them.
func withSummary(s healthStore, inner lease.Store) lease.Store {
	if ss, ok := inner.(lease.SummaryStore); ok {
		return healthSummaryStore{healthStore: s, SummaryStore: ss}
	}
	return s
}

// summaryPlan is the fleet's plan as the summarizer writes it into a head:
// shared/rebalance's Compute over the records (this worker with its own
// count), the moves (at most lease.MaxSummaryMoves, the largest gaps
// first), the receivers each move names and the workers with the most room
// below their share (at most lease.MaxSummaryPeers), with their admin
// addresses.
func (w *Worker) summaryPlan(recs []lease.WorkerRecord) lease.SummaryPlan {
	ws, addrs := w.fleetView(recs, "", nil)
	for _, r := range recs {
		if r.ID == w.cfg.WorkerID && r.AdminAddr != "" {
			addrs[r.ID] = r.AdminAddr // others tell the summarizer too
		}
	}
	plan := rebalance.Compute(ws, rebalance.Settings{MaxMoves: w.cfg.RebalanceMaxMoves})
	out := lease.SummaryPlan{Imbalance: plan.Imbalance}
	byID := map[string]rebalance.Worker{}
	for _, x := range ws {
		byID[x.ID] = x
		if _, counted := plan.Share[x.ID]; counted {
			out.Capacity += x.Capacity
		}
	}
	peer := func(id string) lease.SummaryPeer {
		x := byID[id]
		return lease.SummaryPeer{ID: id, AdminAddr: addrs[id], Load: x.Load, Capacity: x.Capacity}
	}
	named := map[string]bool{}
	for _, m := range plan.Moves {
		if len(out.Moves) == lease.MaxSummaryMoves {
			break
		}
		out.Moves = append(out.Moves, lease.SummaryMove{From: m.From, To: m.To, Count: m.Count})
		if !named[m.To] {
			named[m.To] = true
			out.Peers = append(out.Peers, peer(m.To))
		}
	}
	// The receivers with the most room below their share, for /status and
	// a round's addresses.
	var room []string
	for id, sh := range plan.Share {
		if !named[id] && float64(byID[id].Load) < sh {
			room = append(room, id)
		}
	}
	slices.SortFunc(room, func(a, b string) int {
		ra, rb := plan.Share[a]-float64(byID[a].Load), plan.Share[b]-float64(byID[b].Load)
		return cmp.Or(cmp.Compare(rb, ra), cmp.Compare(a, b))
	})
	for _, id := range room[:min(len(room), lease.MaxSummaryPeers)] {
		out.Peers = append(out.Peers, peer(id))
	}
	return out
}

// roundView is what a rebalancing round acts on.
type roundView struct {
	share, imbalance float64
	load             int
	moves            []rebalance.Move
	addrs            map[string]string
}

// roundPlan is this round's view: from the newest fleet summary head (no
// read: the Keeper read it at its last refresh), or, when there is none,
// from the records of every alive worker (Keeper.Fleet).
func (w *Worker) roundPlan(ctx context.Context) (roundView, error) {
	me := w.cfg.WorkerID
	if sum, moves, ok := w.keeper.TakeMoves(); ok {
		v := roundView{imbalance: sum.Imbalance, load: w.owned(), addrs: map[string]string{}}
		if sum.Capacity > 0 {
			v.share = min(float64(sum.Load)*float64(w.cfg.MaxSessions)/float64(sum.Capacity), float64(w.cfg.MaxSessions))
		}
		for _, p := range sum.Peers {
			if p.AdminAddr != "" && p.ID != me && !w.keeper.KnownGone(p.ID) {
				v.addrs[p.ID] = p.AdminAddr
			}
		}
		// The summarizer counted this worker's load from its last
		// heartbeat, which may predate moves it made since: it never moves
		// more than its own count is above its share.
		excess := v.load - int(math.Floor(v.share))
		for _, m := range moves {
			if n := min(m.Count, excess); n > 0 && v.addrs[m.To] != "" {
				v.moves = append(v.moves, rebalance.Move{From: m.From, To: m.To, Count: n})
				excess -= n
			}
		}
		return v, nil
	}
	w.fleetReads.Add(1)
	recs, err := w.keeper.Fleet(ctx)
	if err != nil {
		return roundView{}, err
	}
	ws, addrs := w.fleetView(recs, "", nil)
	plan := rebalance.Compute(ws, rebalance.Settings{MaxMoves: w.cfg.RebalanceMaxMoves})
	return roundView{share: plan.Share[me], imbalance: plan.Imbalance, load: ws[0].Load, moves: plan.MovesFrom(me), addrs: addrs}, nil
}
