// Distributions: percentiles (nearest rank) and their summaries.

package bench

import (
	"math"
	"sort"
	"time"
)

// Dist summarises latency samples in milliseconds. Percentiles are nearest
// rank: the p-th percentile of n sorted samples is the ⌈p·n⌉-th one, so p99
// of 200 samples is the 198th smallest (two samples lie above it).
type Dist struct {
	N    int     `json:"n"`
	Min  float64 `json:"min_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
	// Samples, sorted, for the distributions drawn as CDFs (WithSamples);
	// absent on the others.
	Samples []float64 `json:"samples_ms,omitempty"`
}

// WithSamples is the Dist of samples keeping them (the report draws it as
// a CDF).
func WithSamples(samples []time.Duration) Dist {
	d := Summarize(samples)
	for _, v := range samples {
		d.Samples = append(d.Samples, float64(v)/float64(time.Millisecond))
	}
	sort.Float64s(d.Samples)
	return d
}

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted, or 0 when it is empty.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Summarize computes the Dist of samples.
func Summarize(samples []time.Duration) Dist {
	ms := make([]float64, len(samples))
	for i, d := range samples {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	return SummarizeMs(ms)
}

// SummarizeMs computes the Dist of samples given in milliseconds.
func SummarizeMs(ms []float64) Dist {
	if len(ms) == 0 {
		return Dist{}
	}
	s := append([]float64(nil), ms...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return Dist{
		N: len(s), Min: s[0], Max: s[len(s)-1], Mean: sum / float64(len(s)),
		P50: Percentile(s, 50), P90: Percentile(s, 90), P99: Percentile(s, 99),
	}
}

// BucketPercentile is the p-th percentile of a histogram whose bucket i
// holds the values ≤ bounds[i] (the last bucket, one past bounds, the
// larger ones): it returns the upper bound of the bucket holding the
// nearest-rank sample, or -1 when that sample is above every bound, and
// false when the histogram is empty.
func BucketPercentile(bounds, counts []int64, p float64) (int64, bool) {
	var n int64
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		return 0, false
	}
	rank := int64(math.Ceil(p / 100 * float64(n)))
	rank = max(rank, 1)
	var seen int64
	for i, c := range counts {
		seen += c
		if seen >= rank {
			if i < len(bounds) {
				return bounds[i], true
			}
			return -1, true
		}
	}
	return -1, true
}

// subCounts returns b − a element-wise (histogram deltas; a may be shorter).
func subCounts(b, a []int64) []int64 {
	out := make([]int64, len(b))
	for i := range b {
		out[i] = b[i]
		if i < len(a) {
			out[i] -= a[i]
		}
	}
	return out
}
