// Package suggest owns "did you mean": the known name nearest to a
// misspelled one (an environment variable, a JSON field, a flag, a
// command), by edit distance after folding case and separators.
package suggest

import (
	"slices"
	"strings"
)

// Nearest is the name of known nearest to name: one equal to it once case,
// '_' and '-' are ignored ("wsurl", "connectionId"), else the nearest by
// edit distance (the first in sorted order on a tie) within limit edits,
// else "". A limit below 1 means max(2, len(name)/3): a name further off
// is not a typo of a known one.
func Nearest(name string, known []string, limit int) string {
	if limit < 1 {
		limit = max(2, len(name)/3)
	}
	sorted := slices.Sorted(slices.Values(known))
	folded := fold(name)
	for _, k := range sorted {
		if k != name && fold(k) == folded {
			return k
		}
	}
	best, bestD := "", limit+1
	for _, k := range sorted {
		if k == name {
			continue
		}
		if d := Distance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func fold(s string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
}

// Distance is the Levenshtein distance of a and b (insertions, deletions
// and substitutions of single bytes).
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
