package rebalance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func loads(ws []Worker, p Plan) map[string]int {
	out := map[string]int{}
	for _, w := range ws {
		out[w.ID] = w.Load
	}
	for _, m := range p.Moves {
		out[m.From] -= m.Count
		out[m.To] += m.Count
	}
	return out
}

func TestShares(t *testing.T) {
	for _, c := range []struct {
		name string
		ws   []Worker
		want map[string]float64
	}{
		{"even", []Worker{{"a", 600, 1000, false}, {"b", 600, 1000, false}, {"c", 0, 1000, false}, {"d", 0, 1000, false}},
			map[string]float64{"a": 300, "b": 300, "c": 300, "d": 300}},
		{"uneven capacities", []Worker{{"a", 900, 1000, false}, {"b", 0, 500, false}},
			map[string]float64{"a": 600, "b": 300}},
		{"one worker", []Worker{{"a", 10, 1000, false}}, map[string]float64{"a": 10}},
		{"draining counts for load, not share", []Worker{{"a", 100, 1000, true}, {"b", 100, 1000, false}, {"c", 0, 1000, false}},
			map[string]float64{"b": 100, "c": 100}},
		{"an overloaded fleet: shares capped at capacity", []Worker{{"a", 1000, 1000, false}, {"b", 1000, 1000, true}, {"c", 0, 500, false}},
			map[string]float64{"a": 1000, "c": 500}},
	} {
		got := Shares(c.ws)
		if len(got) != len(c.want) {
			t.Errorf("%s: shares %v, want %v", c.name, got, c.want)
			continue
		}
		for id, w := range c.want {
			if math.Abs(got[id]-w) > 1e-9 {
				t.Errorf("%s: share of %s %.2f, want %.2f", c.name, id, got[id], w)
			}
		}
	}
}

func TestCompute(t *testing.T) {
	for _, c := range []struct {
		name  string
		ws    []Worker
		moves string // the plan's moves
	}{
		{"balanced: nothing moves", []Worker{{"a", 500, 1000, false}, {"b", 510, 1000, false}}, "[]"},
		{"within tolerance: nothing moves", []Worker{{"a", 540, 1000, false}, {"b", 460, 1000, false}}, "[]"},
		{"two small counts within the 2-session slack", []Worker{{"a", 3, 1000, false}, {"b", 1, 1000, false}}, "[]"},
		{"one worker", []Worker{{"a", 900, 1000, false}}, "[]"},
		{"a new worker gets from both, 10 % of each per round",
			[]Worker{{"a", 600, 1000, false}, {"b", 600, 1000, false}, {"c", 0, 1000, false}},
			"[{a c 60} {b c 60}]"},
		{"uneven capacities", []Worker{{"a", 900, 1000, false}, {"b", 0, 500, false}}, "[{a b 90}]"},
		{"one worker below its tolerance pulls from those above their share",
			[]Worker{{"a", 321, 1000, false}, {"b", 321, 1000, false}, {"c", 265, 1000, false}, {"d", 293, 1000, false}},
			"[{a c 21} {b c 14} {b d 7}]"},
		{"a draining worker neither sends nor receives", []Worker{{"a", 300, 1000, true}, {"b", 600, 1000, false}, {"c", 0, 1000, false}},
			"[{b c 60}]"},
	} {
		p := Compute(c.ws, Settings{})
		if got := fmt.Sprint(p.Moves); got != c.moves {
			t.Errorf("%s: moves %s, want %s", c.name, got, c.moves)
		}
	}
}

// Repeated rounds converge: from 2 full workers and 2 new ones, every worker
// is within tolerance of its share after a bounded number of rounds, the
// number of sessions moved is close to the minimum (what the new workers
// need), and no worker ever both sends and receives.
func TestRoundsConvergeWithFewMoves(t *testing.T) {
	ws := []Worker{{"a", 600, 1000, false}, {"b", 600, 1000, false}, {"c", 0, 1000, false}, {"d", 0, 1000, false}}
	moved, rounds := 0, 0
	for ; rounds < 50; rounds++ {
		p := Compute(ws, Settings{})
		if len(p.Moves) == 0 {
			break
		}
		senders, receivers := map[string]bool{}, map[string]bool{}
		for _, m := range p.Moves {
			senders[m.From], receivers[m.To] = true, true
			moved += m.Count
		}
		for id := range senders {
			if receivers[id] {
				t.Fatalf("round %d: %s both sends and receives", rounds, id)
			}
		}
		l := loads(ws, p)
		for i := range ws {
			ws[i].Load = l[ws[i].ID]
		}
	}
	share := Shares(ws)
	for _, w := range ws {
		if math.Abs(float64(w.Load)-share[w.ID]) > math.Max(0.1*share[w.ID], 2) {
			t.Fatalf("after %d rounds %s holds %d, share %.0f", rounds, w.ID, w.Load, share[w.ID])
		}
	}
	const minimum = 600 // c and d each need 300
	if ratio := float64(moved) / minimum; ratio > 1.2 {
		t.Fatalf("moved %d sessions for a minimum of %d (ratio %.2f)", moved, minimum, ratio)
	}
	if p := Compute(ws, Settings{}); p.Imbalance > 1.1 {
		t.Fatalf("imbalance %.2f after convergence", p.Imbalance)
	}
	t.Logf("converged in %d rounds, %d sessions moved (minimum %d)", rounds, moved, minimum)
}

func TestBalancedAndMinMoves(t *testing.T) {
	for _, c := range []struct {
		name           string
		ws             []Worker
		balanced       bool
		toTol, toShare int
	}{
		{"2 × 1000 then 2 join", []Worker{{"a", 1000, 5000, false}, {"b", 1000, 5000, false}, {"c", 0, 5000, false}, {"d", 0, 5000, false}},
			false, 900, 1000}, // each old one down to 550, each new one up to 450
		{"within 10 %", []Worker{{"a", 540, 5000, false}, {"b", 460, 5000, false}}, true, 0, 40},
		{"just outside", []Worker{{"a", 556, 5000, false}, {"b", 444, 5000, false}}, false, 6, 56},
		{"small fleet: 2 sessions of slack", []Worker{{"a", 6, 100, false}, {"b", 4, 100, false}}, true, 0, 1},
		{"uneven capacities", []Worker{{"a", 900, 1000, false}, {"b", 0, 500, false}}, false, 270, 300}, // shares 600 / 300
		{"one worker", []Worker{{"a", 10, 1000, false}}, true, 0, 0},
		{"a drained worker counts for no share", []Worker{{"a", 0, 1000, true}, {"b", 100, 1000, false}, {"c", 100, 1000, false}}, true, 0, 0},
	} {
		if got := Balanced(c.ws, Settings{}); got != c.balanced {
			t.Errorf("%s: Balanced = %v, want %v", c.name, got, c.balanced)
		}
		tol, share := MinMoves(c.ws, Settings{})
		if tol != c.toTol || share != c.toShare {
			t.Errorf("%s: MinMoves = %d, %d; want %d, %d", c.name, tol, share, c.toTol, c.toShare)
		}
		// Balanced is exactly the state in which Compute moves nothing.
		if moves := len(Compute(c.ws, Settings{}).Moves); (moves == 0) != c.balanced {
			t.Errorf("%s: Compute makes %d move(s) while Balanced = %v", c.name, moves, c.balanced)
		}
	}
}

func TestTargets(t *testing.T) {
	ws := []Worker{{"a", 20, 100, false}, {"b", 20, 100, false}, {"c", 20, 100, false}, {"d", 20, 100, false}, {"e", 17, 100, false}}
	got := fmt.Sprint(Targets(ws, Shares(ws)))
	if want := "map[a:20 b:20 c:19 d:19 e:19]"; got != want { // 97 / 5 = 19.4: two get the extra one, by id
		t.Fatalf("targets %s, want %s", got, want)
	}
	// The worker below its tolerance (17 < 19.4 − 2) pulls from those
	// above their targets, though none is a whole session above its share.
	if got := fmt.Sprint(Compute(ws, Settings{}).Moves); got != "[{c e 1} {d e 1}]" {
		t.Fatalf("moves %s", got)
	}
}

// From any fleet, repeated rounds reach balance (the state in which
// nothing moves) within a bounded number of rounds, no worker both sends
// and receives in a round, and no receiver is filled above its capacity.
func TestRoundsAlwaysReachBalance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1130, 14))
	for trial := 0; trial < 2000; trial++ {
		var ws []Worker
		for i := range 2 + rng.IntN(7) {
			c := 40 + rng.IntN(3)*30
			ws = append(ws, Worker{ID: fmt.Sprintf("w%d", i), Load: rng.IntN(c + 1), Capacity: c, Draining: rng.IntN(10) == 0})
		}
		start := fmt.Sprint(ws)
		for round := 0; ; round++ {
			p := Compute(ws, Settings{})
			if len(p.Moves) == 0 {
				if !Balanced(ws, Settings{}) && !overloaded(ws) {
					t.Fatalf("%s: stuck after %d rounds at %v: not balanced, nothing moves", start, round, ws)
				}
				break
			}
			if round == 60 {
				t.Fatalf("%s: still moving after 60 rounds: %v", start, ws)
			}
			senders := map[string]bool{}
			for _, m := range p.Moves {
				senders[m.From] = true
			}
			for _, m := range p.Moves {
				if senders[m.To] {
					t.Fatalf("%s: %s both sends and receives", start, m.To)
				}
			}
			l := loads(ws, p)
			for i := range ws {
				ws[i].Load = l[ws[i].ID]
				if ws[i].Load > ws[i].Capacity && !ws[i].Draining {
					t.Fatalf("%s: %s filled to %d over its capacity %d", start, ws[i].ID, ws[i].Load, ws[i].Capacity)
				}
			}
		}
	}
}

// overloaded: the fleet holds more than the counted workers can (shares
// capped at capacity), or only draining workers hold sessions; balance is
// then not reachable by moves between counted workers.
func overloaded(ws []Worker) bool {
	total, capSum, counted := 0, 0, 0
	for _, w := range ws {
		total += w.Load
		if !w.Draining {
			capSum += w.Capacity
			counted++
		}
	}
	if counted == 0 || total > capSum {
		return true
	}
	for _, w := range ws {
		if w.Draining && w.Load > 0 {
			return true // theirs land by their own shutdown, not by a round
		}
	}
	return false
}

func TestEven(t *testing.T) {
	ws := Even(map[string]int{"d": 0, "a": 1000, "c": 0, "b": 1000})
	if got := fmt.Sprint(Shares(ws)); got != "map[a:500 b:500 c:500 d:500]" {
		t.Fatalf("shares %s: the capacity must not cap a share", got)
	}
	if ws[0].ID != "a" || ws[3].ID != "d" {
		t.Fatalf("workers %v: want them by id", ws)
	}
	if tol, share := MinMoves(ws, Settings{}); tol != 900 || share != 1000 {
		t.Fatalf("MinMoves = %d, %d; want 900, 1000", tol, share)
	}
}

func TestDrain(t *testing.T) {
	for _, c := range []struct {
		name string
		ws   []Worker
		want []Move
	}{
		{"two even survivors take half each", []Worker{{"v", 100, 1000, false}, {"a", 50, 1000, false}, {"b", 50, 1000, false}},
			[]Move{{"v", "a", 50}, {"v", "b", 50}}},
		{"the emptier survivor takes more", []Worker{{"v", 90, 1000, false}, {"a", 0, 1000, false}, {"b", 60, 1000, false}},
			[]Move{{"v", "a", 75}, {"v", "b", 15}}},
		{"draining and full workers take nothing", []Worker{{"v", 10, 100, false}, {"d", 0, 100, true}, {"f", 100, 100, false}, {"a", 0, 100, false}},
			[]Move{{"v", "a", 10}}},
		{"uneven capacities", []Worker{{"v", 30, 100, false}, {"a", 0, 200, false}, {"b", 0, 100, false}},
			[]Move{{"v", "a", 20}, {"v", "b", 10}}},
		{"more than the fleet has room for", []Worker{{"v", 100, 100, false}, {"a", 90, 100, false}, {"b", 95, 100, false}},
			[]Move{{"v", "a", 10}, {"v", "b", 5}}},
		{"alone", []Worker{{"v", 10, 100, false}}, nil},
		{"nothing to hand off", []Worker{{"v", 0, 100, false}, {"a", 3, 100, false}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Drain(c.ws, "v")
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("Drain = %v, want %v", got, c.want)
			}
		})
	}
}

// A worker listed twice (a listing that repeats an entry) is one receiver:
// the drain names it once and hands off at most the leaver's load. Before,
// each listing got a move of the worker's whole part: 92 of 91 here, and a
// takeover slicing its sessions by the plan panicked.
func TestDrainCountsAWorkerListedTwiceOnce(t *testing.T) {
	ws := []Worker{{"v", 91, 1000, false}, {"a", 0, 100, false}, {"b", 0, 100, false}, {"b", 0, 100, false}}
	moves := Drain(ws, "v")
	sent, to := 0, map[string]int{}
	for _, m := range moves {
		sent += m.Count
		to[m.To]++
	}
	if sent > 91 || to["b"] != 1 || to["a"] != 1 {
		t.Fatalf("Drain = %v: %d handed off of 91, moves by receiver %v", moves, sent, to)
	}
}

// TestDrainNeverOverfills: over random fleets, a drain hands off at most
// the leaver's load, never pushes a receiver above its capacity or sends to
// a draining worker, and hands off everything when the fleet has room.
func TestDrainNeverOverfills(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 13))
	for i := 0; i < 2000; i++ {
		n := 1 + r.IntN(8)
		ws := []Worker{{ID: "v", Load: r.IntN(300), Capacity: 300}}
		room := 0
		for k := 0; k < n; k++ {
			w := Worker{ID: fmt.Sprintf("w%d", k), Capacity: 50 + r.IntN(300), Draining: r.IntN(5) == 0}
			w.Load = r.IntN(w.Capacity + 1)
			ws = append(ws, w)
			if !w.Draining {
				room += w.Capacity - w.Load
			}
		}
		moves := Drain(ws, "v")
		sent := 0
		after := map[string]int{}
		for _, w := range ws {
			after[w.ID] = w.Load
		}
		for _, m := range moves {
			if m.From != "v" || m.To == "v" || m.Count <= 0 {
				t.Fatalf("fleet %v: bad move %v", ws, m)
			}
			sent += m.Count
			after[m.To] += m.Count
		}
		for _, w := range ws[1:] {
			if w.Draining && after[w.ID] != w.Load {
				t.Fatalf("fleet %v: a draining worker receives: %v", ws, moves)
			}
			if after[w.ID] > w.Capacity {
				t.Fatalf("fleet %v: %s above capacity: %v", ws, w.ID, moves)
			}
		}
		if sent > ws[0].Load {
			t.Fatalf("fleet %v: hands off %d of %d", ws, sent, ws[0].Load)
		}
		// With room for everything fleet-wide, the targets (fair shares in
		// whole sessions) take it all.
		if room >= ws[0].Load+n && sent != ws[0].Load {
			t.Fatalf("fleet %v (room %d): hands off %d of %d: %v", ws, room, sent, ws[0].Load, moves)
		}
	}
}
