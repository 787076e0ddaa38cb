package bench

import (
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	s := make([]float64, 200)
	for i := range s {
		s[i] = float64(i + 1) // 1..200
	}
	for _, tc := range []struct {
		p    float64
		want float64
	}{{50, 100}, {90, 180}, {99, 198}, {100, 200}, {0.1, 1}} {
		if got := Percentile(s, tc.p); got != tc.want {
			t.Errorf("p%v of 1..200 = %v, want %v", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 99) != 0 {
		t.Error("empty: want 0")
	}
	if got := Percentile([]float64{7}, 99); got != 7 {
		t.Errorf("one sample: %v", got)
	}
}

func TestSummarize(t *testing.T) {
	d := Summarize([]time.Duration{30 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond})
	if d.N != 4 || d.Min != 10 || d.Max != 40 || d.P50 != 20 || d.P99 != 40 || d.Mean != 25 {
		t.Fatalf("%+v", d)
	}
	if e := Summarize(nil); e.N != 0 || e.Max != 0 || e.Samples != nil {
		t.Fatal("empty: want zero Dist")
	}
	if w := WithSamples([]time.Duration{30 * time.Millisecond, 10 * time.Millisecond}); w.N != 2 || len(w.Samples) != 2 || w.Samples[0] != 10 || w.Samples[1] != 30 {
		t.Fatalf("WithSamples: %+v", w)
	}
}

func TestBucketPercentile(t *testing.T) {
	bounds := []int64{1, 2, 5, 10}
	if v, ok := BucketPercentile(bounds, []int64{0, 0, 0, 0, 0}, 50); ok || v != 0 {
		t.Fatalf("empty: %v %v", v, ok)
	}
	counts := []int64{50, 30, 15, 4, 1} // 100 samples
	for _, tc := range []struct {
		p    float64
		want int64
	}{{50, 1}, {80, 2}, {95, 5}, {99, 10}, {100, -1}} {
		if got, _ := BucketPercentile(bounds, counts, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if d := subCounts([]int64{5, 7, 9}, []int64{1, 2}); d[0] != 4 || d[1] != 5 || d[2] != 9 {
		t.Fatalf("subCounts: %v", d)
	}
}
