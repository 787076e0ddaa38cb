// Package rebalance owns the fleet's fair-share arithmetic: from the alive
// workers' load and capacity (their liveness records) it computes each
// worker's fair share, weighted by capacity, and the directed moves that
// bring every worker within tolerance of its share. It is a pure function
// of one snapshot: every worker computes the same plan from the same
// records, so shedders never pick the same receiver's slots twice, and no
// session is moved towards a worker that is itself above its share. It
// does no I/O and reads no clock.
package rebalance

import (
	"cmp"
	"math"
	"slices"
)

// Worker is one alive worker as its record shows it.
type Worker struct {
	ID       string
	Load     int // sessions held
	Capacity int // WSFLEET_MAX_SESSIONS
	// Draining workers (shutting down) take nothing and count for no share:
	// their sessions are handed off by their own shutdown.
	Draining bool
}

// Settings bound a round.
type Settings struct {
	// Tolerance is the fraction of its share a worker may exceed it by
	// (default 0.10), with at least MinSlack sessions (default 2).
	Tolerance float64
	MinSlack  int
	// MaxMovesFraction bounds a worker's moves per round to this fraction
	// of its load (default 0.10), at least 1.
	MaxMovesFraction float64
	// MaxMoves, when positive, bounds a worker's moves per round instead.
	MaxMoves int
}

func (s Settings) withDefaults() Settings {
	if s.Tolerance <= 0 {
		s.Tolerance = 0.10
	}
	if s.MinSlack <= 0 {
		s.MinSlack = 2
	}
	if s.MaxMovesFraction <= 0 {
		s.MaxMovesFraction = 0.10
	}
	return s
}

// Move is one directed hand-off: Count sessions from From to To.
type Move struct {
	From, To string
	Count    int
}

// Plan is the outcome of one snapshot.
type Plan struct {
	// Share is each counted worker's fair share (sessions).
	Share map[string]float64
	// Imbalance is max(load ÷ share) over the counted workers (1 = even;
	// 0 when nothing is held).
	Imbalance float64
	// Moves are the directed hand-offs of this round, by sender then receiver.
	Moves []Move
}

// Shares computes the fair shares: the sessions held by all alive workers
// (draining ones included: theirs must land somewhere) spread over the
// workers that are not draining, in proportion to capacity (never above a
// worker's capacity).
func Shares(ws []Worker) map[string]float64 {
	total := 0
	var counted []Worker
	for _, w := range ws {
		total += w.Load
		if !w.Draining && w.Capacity > 0 {
			counted = append(counted, w)
		}
	}
	capSum := 0
	for _, w := range counted {
		capSum += w.Capacity
	}
	// total ≤ capSum whenever the fleet is not overloaded, so no share
	// exceeds its worker's capacity; when it is, the shares are capped.
	share := make(map[string]float64, len(counted))
	for _, w := range counted {
		share[w.ID] = math.Min(float64(total)*float64(w.Capacity)/float64(capSum), float64(w.Capacity))
	}
	return share
}

// Compute plans one round for the whole fleet (each worker acts only on the
// moves whose From is itself). Nothing moves while every worker is within
// its tolerance of its share.
func Compute(ws []Worker, s Settings) Plan {
	s = s.withDefaults()
	share := Shares(ws)
	p := Plan{Share: share}
	type gap struct {
		id string
		n  int
	}
	// A round moves anything only when some worker is outside its tolerance
	// (above or below); then every worker above its share gives and every
	// one below receives, so that all end near their share, not at the edge
	// of the tolerance where the next change would trip it again.
	out := !balanced(ws, share, s)
	target := Targets(ws, share)
	var senders, receivers []gap
	for _, w := range ws {
		sh, counted := share[w.ID]
		if counted && sh > 0 {
			p.Imbalance = math.Max(p.Imbalance, float64(w.Load)/sh)
		}
		if w.Draining || !counted || !out {
			continue // a draining worker's shutdown hands everything off
		}
		switch t := target[w.ID]; {
		case w.Load > t:
			n := w.Load - t
			if s.MaxMoves > 0 {
				n = min(n, s.MaxMoves)
			} else {
				n = min(n, max(1, int(s.MaxMovesFraction*float64(w.Load))))
			}
			senders = append(senders, gap{w.ID, n})
		case w.Load < t:
			// Receive up to the target, and never above capacity.
			if n := min(t-w.Load, w.Capacity-w.Load); n > 0 {
				receivers = append(receivers, gap{w.ID, n})
			}
		}
	}
	// Largest gaps first, ids to break ties: every worker computes the same
	// order from the same snapshot.
	order := func(a, b gap) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	}
	slices.SortFunc(senders, order)
	slices.SortFunc(receivers, order)
	r := 0
	for _, snd := range senders {
		for snd.n > 0 && r < len(receivers) {
			k := min(snd.n, receivers[r].n)
			p.Moves = append(p.Moves, Move{From: snd.id, To: receivers[r].id, Count: k})
			snd.n -= k
			receivers[r].n -= k
			if receivers[r].n == 0 {
				r++
			}
		}
	}
	return p
}

// MovesFrom are the moves of plan p that worker id makes.
func (p Plan) MovesFrom(id string) []Move {
	var out []Move
	for _, m := range p.Moves {
		if m.From == id {
			out = append(out, m)
		}
	}
	return out
}

// Targets rounds the fair shares to whole sessions that add up to the
// sessions the counted workers' shares hold (the largest remainders get
// the extra session; ties by id, so every worker computes the same
// targets). A round moves every sender down to its target and every
// receiver up to it: with fractional shares (97 sessions over 5 workers)
// a worker below its tolerance always has somewhere to pull from, which
// "everyone at least one session above the share sends" does not give
// (20, 20, 20, 20, 17 would never move).
func Targets(ws []Worker, share map[string]float64) map[string]int {
	type rem struct {
		id   string
		frac float64
	}
	target := make(map[string]int, len(share))
	var rems []rem
	sum, floors := 0.0, 0
	for _, w := range ws {
		sh, counted := share[w.ID]
		if !counted {
			continue
		}
		if _, dup := target[w.ID]; dup {
			continue
		}
		f := int(math.Floor(sh))
		target[w.ID] = f
		floors += f
		sum += sh
		rems = append(rems, rem{w.ID, sh - float64(f)})
	}
	slices.SortFunc(rems, func(a, b rem) int {
		if c := cmp.Compare(b.frac, a.frac); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	extra := int(math.Round(sum)) - floors
	for i := 0; i < extra && i < len(rems); i++ {
		target[rems[i].id]++
	}
	return target
}

// Balanced reports whether every counted worker (not draining) is within its
// tolerance of its fair share: the state in which Compute moves nothing.
func Balanced(ws []Worker, s Settings) bool {
	return balanced(ws, Shares(ws), s.withDefaults())
}

func balanced(ws []Worker, share map[string]float64, s Settings) bool {
	for _, w := range ws {
		if sh, counted := share[w.ID]; counted && !w.Draining {
			if math.Abs(float64(w.Load)-sh) > slack(sh, s) {
				return false
			}
		}
	}
	return true
}

func slack(share float64, s Settings) float64 {
	return math.Max(s.Tolerance*share, float64(s.MinSlack))
}

// MinMoves is the least number of sessions that must change owner to take
// the fleet from ws to balance: toTolerance to bring every counted worker
// within its tolerance of its share (the least any rebalancer could do),
// toShare to bring every one to its target, its share rounded (what
// Compute aims at).
// Sessions of draining workers are not counted (their shutdown moves them).
func MinMoves(ws []Worker, s Settings) (toTolerance, toShare int) {
	s = s.withDefaults()
	share := Shares(ws)
	target := Targets(ws, share)
	var outTol, inTol float64
	for _, w := range ws {
		sh, counted := share[w.ID]
		if !counted || w.Draining {
			continue
		}
		l := float64(w.Load)
		outTol += math.Max(0, math.Ceil(l-(sh+slack(sh, s))))
		inTol += math.Max(0, math.Ceil((sh-slack(sh, s))-l))
		toShare += max(0, w.Load-target[w.ID])
	}
	return int(math.Max(outTol, inTol)), toShare
}

// Even is a fleet of workers of equal capacity, large enough never to cap a
// share, holding loads (by worker id): how a harness that runs every worker
// with the same settings judges balance from the loads it observes.
func Even(loads map[string]int) []Worker {
	ws := make([]Worker, 0, len(loads))
	for id, l := range loads {
		ws = append(ws, Worker{ID: id, Load: l, Capacity: math.MaxInt32})
	}
	slices.SortFunc(ws, func(a, b Worker) int { return cmp.Compare(a.ID, b.ID) })
	return ws
}

// Drain plans a graceful shutdown's directed hand-offs: the Load of worker
// from (which is leaving: it counts as draining whatever ws says) spread
// over the workers that are not draining, in proportion to each one's room
// up to its target (its fair share in whole sessions, Targets) and never
// above its capacity; a share whose fraction rounds away goes to the
// largest remainders (ties by id). Sessions no worker has room for are left
// out: the caller releases them for anyone. Moves are ordered by receiver,
// one per receiver, and never add up to more than from's Load.
func Drain(ws []Worker, from string) []Move {
	ws = slices.Clone(ws)
	load := 0
	for i := range ws {
		if ws[i].ID == from {
			ws[i].Draining = true
			load = ws[i].Load
		}
	}
	target := Targets(ws, Shares(ws))
	type room struct {
		id   string
		n    int
		frac float64
	}
	var rooms []room
	total := 0
	seen := make(map[string]bool, len(ws))
	for _, w := range ws {
		t, counted := target[w.ID]
		if w.Draining || !counted || seen[w.ID] {
			continue // a worker listed twice has one room, as Targets counts it once
		}
		seen[w.ID] = true
		if n := min(t, w.Capacity) - w.Load; n > 0 {
			rooms = append(rooms, room{id: w.ID, n: n})
			total += n
		}
	}
	give := min(load, total)
	if give == 0 {
		return nil
	}
	// Whole sessions first (the floor of each one's part), then the rest to
	// the largest remainders.
	got := make(map[string]int, len(rooms))
	assigned := 0
	for i := range rooms {
		exact := float64(give) * float64(rooms[i].n) / float64(total)
		got[rooms[i].id] = int(math.Floor(exact))
		rooms[i].frac = exact - math.Floor(exact)
		assigned += got[rooms[i].id]
	}
	byRemainder := slices.Clone(rooms)
	slices.SortFunc(byRemainder, func(a, b room) int {
		if c := cmp.Compare(b.frac, a.frac); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	for i := 0; assigned < give && i < len(byRemainder); i++ {
		if got[byRemainder[i].id] < byRemainder[i].n {
			got[byRemainder[i].id]++
			assigned++
		}
	}
	var moves []Move
	for _, r := range rooms {
		if got[r.id] > 0 {
			moves = append(moves, Move{From: from, To: r.id, Count: got[r.id]})
		}
	}
	slices.SortFunc(moves, func(a, b Move) int { return cmp.Compare(a.To, b.To) })
	return moves
}
