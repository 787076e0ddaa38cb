//go:build fleetsim

package fleetsim

import (
	"fmt"
	"math"
	"slices"
)

// The exact dark time of a tenure change (a drain's hand-off, a takeover
// after a fault, a rebalancing move), from what the Record and the source
// know.
//
// The source produces seq N of a session at t0 + N/rate (testkit/feed,
// Server.ProducedAt), and a connection live at that instant is written it
// then: in the simulator a message read live reaches the destination at
// the instant it was produced (virtual time; the pipes and the sink take
// none). When a new tenure begins, from is the first seq the destination
// has not received (the highest delivered + 1, in the destination's order:
// the old tenure's last + 1 in a clean hand-off). The change's dark time
// is
//
//	(the new tenure's first delivery of a seq >= from) − (when from was produced)
//
// how late the first message nobody had delivered reached the destination:
// 0 when the new tenure was reading before from was produced (a hand-off
// between two messages leaves nothing late), the whole gap otherwise. It
// excludes the old tenure's streaming before its turn in a drain, which
// the time from the SIGTERM to delivering again (Recovery.P99) includes;
// the replays the new tenure delivers first (seqs < from, from its
// checkpoint) do not end it. The instant the old tenure stopped reading is
// known to neither the Record nor the source (a worker stops reading
// before it closes), so the dark time is measured at the next message, as
// a consumer sees it; at a low rate most hand-offs fall between two
// messages and are not dark at all.

// Dark summarizes dark times (seconds): how many were measured and their
// nearest-rank p50, p99 and max.
type Dark struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// String is d as the report writes it: p50 / p99 / max in ms, and n.
func (d Dark) String() string {
	if d.N == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f / %.1f / %.1f ms (%d)", 1000*d.P50, 1000*d.P99, 1000*d.Max, d.N)
}

// darkOf is the summary of the dark times xs (sorted), exact.
func darkOf(xs []float64) Dark {
	return Dark{N: len(xs), P50: rank(xs, 0.50), P99: rank(xs, 0.99), Max: rank(xs, 1)}
}

// darkWait is a tenure change whose dark time is not known yet: tenure (its
// index in sessionLog.tenures) has not delivered a seq >= from. fault and
// at are the fault hit it ends (faultLog.dark's index), fault -1 a move.
type darkWait struct {
	tenure, fault, at int32
	from              int64
}

// next is, before d is added, the first seq the destination has not
// received of s and whether d begins a move: the first delivery of a
// tenure on another worker than the last delivery's (the fault it ends,
// if any, takes it instead: observe).
func (s *sessionLog) next(d Delivery) (from int64, move bool) {
	if s.n == 0 {
		return 0, false
	}
	from = s.seqs[len(s.seqs)-1].hi + 1
	for _, t := range s.tenures {
		if t.worker == d.Worker && t.epoch == d.Epoch {
			return from, false
		}
	}
	return from, s.tenures[s.last].worker != d.Worker
}

// darken ends the waits d (by tenure i of s) ends: their dark time goes to
// their fault hit or to the moves. A session the source cannot date (no
// Record.produced) stays unmeasured. Under r.mu.
func (r *Record) darken(s *sessionLog, d Delivery, i int32) {
	if len(s.waits) == 0 {
		return
	}
	kept := s.waits[:0]
	for _, w := range s.waits {
		if w.tenure != i || d.Seq < w.from {
			kept = append(kept, w)
			continue
		}
		dark := math.NaN()
		if r.produced != nil {
			if at, ok := r.produced(d.Session, w.from); ok {
				dark = max(0, d.At.Sub(at).Seconds())
			}
		}
		switch {
		case w.fault >= 0:
			r.faults[w.fault].dark[w.at] = dark
		case !math.IsNaN(dark):
			r.moves.add(dark)
		}
	}
	s.waits = kept
	if len(kept) == 0 {
		s.waits = nil
	}
}

// Bounds of darkHist: the dark times are kept exactly while at most
// darkExact of them; past that, in buckets of 1 ms up to 1 s and of 10 ms
// up to 60 s, one above.
const (
	darkExact    = 1 << 14
	darkFineMs   = 1000
	darkCoarseMs = 60_000
	darkCoarseW  = 10
)

// darkHist summarizes a run's moves' dark times in bounded memory: exact
// (every value kept) up to darkExact values, then a fixed-bucket histogram
// whose p50 and p99 are their bucket's upper edge (at most 1 ms above the
// exact value below 1 s, 10 ms below 60 s; the exact max above), the max
// always exact. Zero is a bucket of its own.
type darkHist struct {
	exact  []float64
	counts []int64 // nil until the exact values overflow
	n      int
	max    float64
}

func (h *darkHist) add(x float64) {
	h.n++
	h.max = max(h.max, x)
	if h.counts == nil && len(h.exact) < darkExact {
		h.exact = append(h.exact, x)
		return
	}
	if h.counts == nil {
		h.counts = make([]int64, darkBucket(math.Inf(1))+1)
		for _, v := range h.exact {
			h.counts[darkBucket(v)]++
		}
		h.exact = nil
	}
	h.counts[darkBucket(x)]++
}

// darkBucket is x's bucket: 0 for 0, then (k-1, k] ms, then 10 ms wide,
// then one above 60 s.
func darkBucket(x float64) int {
	ms := x * 1000
	switch {
	case ms <= 0:
		return 0
	case ms <= darkFineMs:
		return int(math.Ceil(ms))
	case ms <= darkCoarseMs:
		return darkFineMs + int(math.Ceil((ms-darkFineMs)/darkCoarseW))
	}
	return darkFineMs + (darkCoarseMs-darkFineMs)/darkCoarseW + 1
}

// darkEdge is bucket b's upper edge, seconds (+Inf for the last).
func darkEdge(b int) float64 {
	switch {
	case b <= darkFineMs:
		return float64(b) / 1000
	case b <= darkFineMs+(darkCoarseMs-darkFineMs)/darkCoarseW:
		return float64(darkFineMs+(b-darkFineMs)*darkCoarseW) / 1000
	}
	return math.Inf(1)
}

// summary is the moves' Dark.
func (h *darkHist) summary() Dark {
	if h.counts == nil {
		xs := slices.Clone(h.exact)
		slices.Sort(xs)
		return darkOf(xs)
	}
	q := func(p float64) float64 {
		want := int64(max(1, math.Ceil(p*float64(h.n))))
		var seen int64
		for b, c := range h.counts {
			if seen += c; seen >= want {
				return min(darkEdge(b), h.max)
			}
		}
		return h.max
	}
	return Dark{N: h.n, P50: q(0.50), P99: q(0.99), Max: h.max}
}
