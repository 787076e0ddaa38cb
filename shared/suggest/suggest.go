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
// is not a typo of a known one. A known name whose length differs from
// name's by more than limit is skipped unmeasured (see DistanceAtMost), so
// a name longer than the longest known one plus limit (a 256 KiB JSON key)
// costs one pass over it, not an edit-distance table per known name.
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
		if d := DistanceAtMost(name, k, limit); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func fold(s string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(s))
}

// DistanceAtMost is Distance(a, b) when it can be at most limit, and
// limit+1, without measuring, when the lengths alone rule that out: every
// edit changes the length by at most one byte, so the distance is at least
// the difference of the lengths. Measuring costs len(a) × len(b).
func DistanceAtMost(a, b string, limit int) int {
	if abs(len(a)-len(b)) > limit {
		return limit + 1
	}
	return Distance(a, b)
}

func abs(n int) int { return max(n, -n) }

// Distance is the optimal string alignment distance of a and b: the
// Levenshtein distance (insertions, deletions and substitutions of single
// bytes) with a swap of two adjacent bytes counted as one edit, the most
// common typo.
func Distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
