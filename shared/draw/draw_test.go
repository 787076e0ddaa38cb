package draw

import (
	"slices"
	"testing"
)

func floats(s *Stream, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = s.Float64()
	}
	return out
}

// The same seed and name give the same draws; another seed, another name or
// another derived source give others; and a stream's draws do not depend on
// how another stream's draws interleave with them.
func TestStreamsReplayTheirSeed(t *testing.T) {
	a := floats(New(1).Stream("reconcile"), 8)
	if b := floats(New(1).Stream("reconcile"), 8); !slices.Equal(a, b) {
		t.Errorf("seed 1 drew %v, then %v", a, b)
	}
	for what, s := range map[string]*Stream{
		"seed 2":          New(2).Stream("reconcile"),
		"name rebalance":  New(1).Stream("rebalance"),
		"derived w-001":   New(1).Derive("w-001").Stream("reconcile"),
		"seed 0 (usable)": New(0).Stream("reconcile"),
	} {
		if b := floats(s, 8); slices.Equal(a, b) {
			t.Errorf("%s drew what seed 1's reconcile did: %v", what, b)
		}
	}
	if x, y := floats(New(1).Derive("w-001").Stream("r"), 4), floats(New(1).Derive("w-002").Stream("r"), 4); slices.Equal(x, y) {
		t.Errorf("two workers of one fleet drew the same %v", x)
	}

	src := New(1)
	r, other := src.Stream("reconcile"), src.Stream("session/s1/1")
	var got []float64
	for range 8 {
		got = append(got, r.Float64())
		other.Float64()
		other.Int64N(10)
	}
	if !slices.Equal(got, a) {
		t.Errorf("reconcile drew %v with another stream's draws in between, %v alone", got, a)
	}
}

// A nil source derives nil streams, and a nil stream draws (from the global
// source): the shipped worker's randomness.
func TestNilDrawsFromTheGlobalSource(t *testing.T) {
	var src *Source
	s := src.Derive("w-001").Stream("reconcile")
	if s != nil {
		t.Fatalf("a nil source derived the stream %v", s)
	}
	if u := s.Float64(); u < 0 || u >= 1 {
		t.Errorf("Float64 = %v", u)
	}
	if n := s.Int64N(3); n < 0 || n >= 3 {
		t.Errorf("Int64N(3) = %d", n)
	}
	xs := []int{1, 2, 3}
	s.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	slices.Sort(xs)
	if !slices.Equal(xs, []int{1, 2, 3}) {
		t.Errorf("Shuffle lost elements: %v", xs)
	}
}

// A stream is safe for concurrent use (run with -race).
func TestStreamIsSafeForConcurrentUse(t *testing.T) {
	s := New(3).Stream("dial")
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 100 {
				s.Float64()
				s.Int64N(5)
				s.Shuffle(3, func(int, int) {})
			}
		}()
	}
	for range 4 {
		<-done
	}
}
