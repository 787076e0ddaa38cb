// Package draw is the worker's randomness (its jitters, shuffles and
// back-off delays) as streams a seed can replay. A Source is a seed; each
// component draws from a Stream of its own, derived from the Source and the
// component's name, so that one component's draws do not depend on how
// another's interleave with them (the fleet simulator's reruns: the same
// seed gives the same draws, whatever the goroutines' order). testkit/simddb
// keeps its draws apart the same way (its Config.Seed).
//
// A nil *Source and a nil *Stream draw from math/rand/v2's global source,
// which cannot be seeded: the shipped worker's way (streamer.Deps.Rand nil),
// random in every process, and nothing allocated per stream.
package draw

import (
	"hash/fnv"
	"math/rand/v2"
	"sync"
)

// Source derives named streams from one seed. It is immutable: safe for
// concurrent use, and deriving the same name twice gives the same stream.
type Source struct {
	seed uint64
}

// New is the source of seed (any value, 0 included).
func New(seed uint64) *Source { return &Source{seed: seed} }

// Derive is the source of name under s (a worker's source under a fleet's
// seed: Derive(workerID)); nil when s is nil.
func (s *Source) Derive(name string) *Source {
	if s == nil {
		return nil
	}
	return &Source{seed: mix(s.seed ^ hash(name))}
}

// Stream is the stream of draws of name under s; nil (the global source)
// when s is nil.
func (s *Source) Stream(name string) *Stream {
	if s == nil {
		return nil
	}
	return &Stream{r: rand.New(rand.NewPCG(s.seed, mix(hash(name))))}
}

// Stream is one component's sequence of draws. Safe for concurrent use; a
// nil Stream draws from math/rand/v2's global source.
type Stream struct {
	mu sync.Mutex
	r  *rand.Rand
}

// Float64 is a uniform draw from [0, 1).
func (s *Stream) Float64() float64 {
	if s == nil {
		return rand.Float64()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Float64()
}

// Int64N is a uniform draw from [0, n); it panics if n <= 0.
func (s *Stream) Int64N(n int64) int64 {
	if s == nil {
		return rand.Int64N(n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Int64N(n)
}

// Shuffle permutes n elements with swap (rand.Shuffle).
func (s *Stream) Shuffle(n int, swap func(i, j int)) {
	if s == nil {
		rand.Shuffle(n, swap)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.Shuffle(n, swap)
}

func hash(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}

// mix is SplitMix64's finalizer: nearby inputs (seeds 1, 2, 3 …) give
// unrelated outputs.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
