package feed

import "testing"

// TestOwnerGroups: one tenure's connections are one owner (a planned
// reconnect), two tenures two (an overlap), and each connection without a
// tenure an owner of its own.
func TestOwnerGroups(t *testing.T) {
	for _, c := range []struct {
		tenures []string
		want    int
	}{
		{nil, 0},
		{[]string{"w1/3"}, 1},
		{[]string{"w1/3", "w1/3"}, 1},
		{[]string{"w1/3", "w2/4"}, 2},
		{[]string{"", ""}, 2},
		{[]string{"w1/3", "", "w1/3"}, 2},
	} {
		if got := OwnerGroups(c.tenures); got != c.want {
			t.Errorf("OwnerGroups(%q) = %d, want %d", c.tenures, got, c.want)
		}
	}
}
