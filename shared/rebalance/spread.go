package rebalance

import (
	"cmp"
	"math"
	"slices"
)

// Spread plans a takeover's directed hand-offs: the Load of worker from
// (dead: it counts as draining whatever ws says) over the workers that are
// not draining, in proportion to their capacity and never above it (a
// worker with less room than its part gets its room, the rest goes to the
// others); a part's fraction that rounds away goes to the largest
// remainders (ties by id). Sessions no worker has room for are left out.
// Moves are ordered by receiver, one per receiver.
//
// Unlike Drain it does not fill each receiver up to its fair share: a
// lost AZ's takeovers plan at once, each from the same records, and every
// one of them filled the same least loaded receivers (each gets its whole
// shortfall from every takeover whose sample holds it): in the fleet
// simulator's AZ loss at 300 × 30,000 the slowest tenth of the sessions
// waited in those receivers' claim paces while others had nothing left to
// claim. The fleet's rebalancing evens out what spreading leaves.
func Spread(ws []Worker, from string) []Move {
	type part struct {
		id        string
		room, cap int
		exact     float64
		n         int
	}
	var parts []*part
	load, roomSum := 0, 0
	seen := make(map[string]bool, len(ws))
	for _, w := range ws {
		if w.ID == from {
			load = w.Load
			continue
		}
		if w.Draining || w.Capacity <= 0 || seen[w.ID] {
			continue
		}
		seen[w.ID] = true
		if room := w.Capacity - w.Load; room > 0 {
			parts = append(parts, &part{id: w.ID, room: room, cap: w.Capacity})
			roomSum += room
		}
	}
	give := min(load, roomSum)
	if give == 0 {
		return nil
	}
	// Water-filling: a receiver whose share by capacity exceeds its room
	// gets its room, and the others share the rest, until none does.
	active := slices.Clone(parts)
	left := float64(give)
	for {
		capSum := 0
		for _, p := range active {
			capSum += p.cap
		}
		level := left / float64(capSum)
		full := false
		active = slices.DeleteFunc(active, func(p *part) bool {
			if level*float64(p.cap) >= float64(p.room) {
				p.exact, left, full = float64(p.room), left-float64(p.room), true
				return true
			}
			return false
		})
		if !full || len(active) == 0 {
			for _, p := range active {
				p.exact = level * float64(p.cap)
			}
			break
		}
	}
	assigned := 0
	for _, p := range parts {
		p.n = int(math.Floor(p.exact))
		assigned += p.n
	}
	byRemainder := slices.Clone(parts)
	slices.SortFunc(byRemainder, func(a, b *part) int {
		if c := cmp.Compare(b.exact-math.Floor(b.exact), a.exact-math.Floor(a.exact)); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	for i := 0; assigned < give && i < len(byRemainder); i++ {
		if p := byRemainder[i]; p.n < p.room {
			p.n++
			assigned++
		}
	}
	var moves []Move
	for _, p := range parts {
		if p.n > 0 {
			moves = append(moves, Move{From: from, To: p.id, Count: p.n})
		}
	}
	slices.SortFunc(moves, func(a, b Move) int { return cmp.Compare(a.To, b.To) })
	return moves
}
