package lease

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// fullRanking is Watchers by its definition: every other alive worker
// sorted by (score desc, id asc), the first n (the oracle of the
// single-scan selection and of Targets' early exit).
func fullRanking(target string, alive []string, n int) []string {
	var rs []ranked
	for _, w := range alive {
		if w != target {
			rs = append(rs, ranked{w, rendezvous(target, w)})
		}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if a.before(b) {
			return -1
		}
		if b.before(a) {
			return 1
		}
		return 0
	})
	out := []string{}
	for i := 0; i < len(rs) && i < n; i++ {
		out = append(out, rs[i].id)
	}
	return out
}

// Watchers and Targets give the full ranking's answer on fleets of many
// sizes, n from 0 to 3, and a self or target that is not listed alive.
func TestWatchersAndTargetsMatchTheFullRanking(t *testing.T) {
	rnd := rand.New(rand.NewPCG(36, 37))
	for _, size := range []int{0, 1, 2, 3, 4, 5, 7, 10, 16, 33, 64, 150} {
		alive := make([]string, 0, size)
		for i := range size {
			alive = append(alive, fmt.Sprintf("w-%d-%d", i, rnd.IntN(1000)))
		}
		rnd.Shuffle(len(alive), func(i, j int) { alive[i], alive[j] = alive[j], alive[i] })
		ids := append(slices.Clone(alive), "not-listed")
		for n := range 4 {
			ranking := map[string][]string{}
			for _, target := range ids {
				ranking[target] = fullRanking(target, alive, n)
				if got := Watchers(target, alive, n); !slices.Equal(got, ranking[target]) {
					t.Fatalf("Watchers(%s) of %d, n=%d: %v, want %v", target, size, n, got, ranking[target])
				}
			}
			for _, self := range ids {
				var want []string
				for _, tg := range alive {
					if tg != self && slices.Contains(ranking[tg], self) {
						want = append(want, tg)
					}
				}
				if got := Targets(self, alive, n); !slices.Equal(got, want) {
					t.Fatalf("Targets(%s) of %d, n=%d: %v, want %v", self, size, n, got, want)
				}
			}
		}
	}
}

// What a Keeper's refresh costs in a fleet of 1,000 (go test -bench
// Targets ./shared/lease/): the early-exit scan against the full ranking.
func BenchmarkTargets1000(b *testing.B) {
	alive := make([]string, 1000)
	for i := range alive {
		alive[i] = fmt.Sprintf("w-%04d", i)
	}
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			Targets("w-0500", alive, 2)
		}
	})
	b.Run("full-ranking", func(b *testing.B) {
		for b.Loop() {
			n := 0
			for _, tg := range alive {
				if tg != "w-0500" && slices.Contains(fullRanking(tg, alive, 2), "w-0500") {
					n++
				}
			}
			if n == 0 {
				b.Fatal("w-0500 watches nobody")
			}
		}
	})
}
