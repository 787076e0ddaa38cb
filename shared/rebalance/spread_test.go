package rebalance

import (
	"fmt"
	"testing"
)

// countsOf are a plan's counts by receiver, and their sum.
func countsOf(moves []Move) (map[string]int, int) {
	got, sum := map[string]int{}, 0
	for _, m := range moves {
		got[m.To] += m.Count
		sum += m.Count
	}
	return got, sum
}

// A takeover's sessions spread in proportion to capacity whatever the
// receivers hold (not into the least loaded ones), never above a
// receiver's room, never to a draining worker, all of them placed while
// there is room.
func TestSpread(t *testing.T) {
	for _, c := range []struct {
		name string
		ws   []Worker
		want map[string]int
	}{
		{"even, whatever the loads", []Worker{{ID: "dead", Load: 10}, {ID: "a", Load: 0, Capacity: 100}, {ID: "b", Load: 50, Capacity: 100}}, map[string]int{"a": 5, "b": 5}},
		{"by capacity", []Worker{{ID: "dead", Load: 9}, {ID: "a", Capacity: 200}, {ID: "b", Capacity: 100}}, map[string]int{"a": 6, "b": 3}},
		{"a full one gets its room", []Worker{{ID: "dead", Load: 10}, {ID: "a", Load: 98, Capacity: 100}, {ID: "b", Capacity: 100}, {ID: "c", Capacity: 100}}, map[string]int{"a": 2, "b": 4, "c": 4}},
		{"more than the room", []Worker{{ID: "dead", Load: 10}, {ID: "a", Load: 97, Capacity: 100}, {ID: "b", Load: 99, Capacity: 100}}, map[string]int{"a": 3, "b": 1}},
		{"the remainder by id", []Worker{{ID: "dead", Load: 2}, {ID: "c", Capacity: 100}, {ID: "a", Capacity: 100}, {ID: "b", Capacity: 100}}, map[string]int{"a": 1, "b": 1}},
		{"draining and capacity-less take nothing", []Worker{{ID: "dead", Load: 4}, {ID: "a", Capacity: 100, Draining: true}, {ID: "b", Capacity: 100}, {ID: "c"}}, map[string]int{"b": 4}},
	} {
		got, sum := countsOf(Spread(c.ws, "dead"))
		want, wantSum := countsOf(nil)
		for id, n := range c.want {
			want[id], wantSum = n, wantSum+n
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || sum != wantSum {
			t.Errorf("%s: %v, want %v", c.name, got, want)
		}
	}
	if m := Spread([]Worker{{ID: "dead", Load: 5}, {ID: "a", Load: 100, Capacity: 100}}, "dead"); m != nil {
		t.Errorf("no room: %v", m)
	}
}

// Many takeovers planning at once from the same records: Drain fills the
// least loaded receivers from every one of them, Spread gives each
// receiver about the same from each.
func TestSpreadDoesNotPileOnTheLeastLoaded(t *testing.T) {
	ws := []Worker{{ID: "dead", Load: 100}}
	for i := range 64 {
		ws = append(ws, Worker{ID: fmt.Sprintf("w%02d", i), Load: 95 + i%11, Capacity: 1400})
	}
	most := func(moves []Move) int {
		top := 0
		for _, m := range moves {
			top = max(top, m.Count)
		}
		return top
	}
	if d, s := most(Drain(ws, "dead")), most(Spread(ws, "dead")); s > 2 || d <= 2*s {
		t.Fatalf("largest part: Drain %d, Spread %d; want Spread at most 2 (100 over 64) and Drain's far above it", d, s)
	}
	if _, sum := countsOf(Spread(ws, "dead")); sum != 100 {
		t.Fatalf("spread %d of 100", sum)
	}
}
