//go:build fleetsim

package fleetsim

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// Delivery is one message a worker handed to its sink, as the simulator's
// destination recorded it.
type Delivery struct {
	N       int64 // its place in the record: the destination's total order
	Session string
	Seq     int64
	Worker  string
	Epoch   int64
	At      time.Time // virtual
}

// Fault is one operation the scenario did to the fleet.
type Fault struct {
	Kind    string // kill, term, add
	Workers []string
	At      time.Time // virtual, when it began
	// Sessions are the sessions the faulted workers owned in the table when
	// it began: those that must deliver again.
	Sessions []string
	// N is the record's length when it began: deliveries after it have a
	// greater N.
	N int64
	// Quiet, when set, begins a span (to At) in which no worker may
	// deliver: every lease was untrusted by then (an outage of the table).
	Quiet time.Time
	// Bound, when set, is how soon its sessions must deliver again, in
	// place of the judge's default bound.
	Bound time.Duration
}

// Record is the simulator's own record of every delivery (the sink of every
// worker is the Record) and every fault. It keeps no delivery: the judge's
// figures are computed as the deliveries arrive (sessionLog, faultLog), so
// its memory is bounded per session (and per tenure and fault hit), not per
// delivery. Safe for concurrent use.
type Record struct {
	mu     sync.Mutex
	by     map[string]*sessionLog
	n      int64
	faults []*faultLog
	// delivering is how many sessions delivered at least once.
	delivering int
	// quiet are the spans in which no worker may deliver (quietSpan).
	quiet []*quietLog
	// produced is when the source produced a session's seq (the fleet's:
	// feed.Server.ProducedAt), for the exact dark time (dark.go); moves
	// are the rebalancing moves' dark times.
	produced func(session string, seq int64) (time.Time, bool)
	moves    darkHist
}

// quietLog is a span (from, to) in which no worker may deliver, and how
// many deliveries (of any session) were recorded in it.
type quietLog struct {
	from, to time.Time
	n        int64
}

// quietSpan counts, from now on, the deliveries made after from and before
// to (virtual): a fault recorded later with Quiet from and At to reports
// them (Recovery.Unfenced). Register it before from (an outage of the
// table: from its start, the TTL after which no lease is trusted).
func (r *Record) quietSpan(from, to time.Time) {
	r.mu.Lock()
	r.quiet = append(r.quiet, &quietLog{from: from, to: to})
	r.mu.Unlock()
}

func newRecord() *Record { return &Record{by: map[string]*sessionLog{}} }

// Handle records m (sink.Handler): the destination takes every message.
// It returns once m is recorded, and records it on a goroutine of its own,
// as every destination does its work away from the session's goroutine (the
// binary's sinks hand a message to their batcher; the service is another
// process): the record's bookkeeping run on the session's goroutine grew its
// stack, which the session keeps for its life, from 4 to 8 KiB (measured at
// 10 × 10,000: peak stacks 80 MiB, 40 MiB this way), which at 1,000,000
// sessions is 4 GiB of the simulator's memory that no worker spends.
func (r *Record) Handle(_ context.Context, m sink.Message) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.handleAt(m, time.Now()) // the bubble's clock: virtual
	}()
	<-done
	return nil
}

// handleAt records m as taken at at.
func (r *Record) handleAt(m sink.Message, at time.Time) {
	r.mu.Lock()
	for _, q := range r.quiet {
		if at.After(q.from) && at.Before(q.to) {
			q.n++
		}
	}
	r.n++
	s := r.by[m.ConnectionID]
	if s == nil {
		s = &sessionLog{}
		r.by[m.ConnectionID] = s
	}
	r.observe(s, Delivery{N: r.n, Session: m.ConnectionID, Seq: m.Seq, Worker: m.WorkerID, Epoch: m.LeaseEpoch, At: at})
	r.mu.Unlock()
}

// observe folds d into its session's log and closes the recoveries it ends
// (its first delivery by a worker a fault did not hit, after the fault).
// Under r.mu.
func (r *Record) observe(s *sessionLog, d Delivery) {
	if s.n == 0 {
		r.delivering++
	}
	from, move := s.next(d)
	i := int32(s.add(d))
	kept := s.pending[:0]
	for _, p := range s.pending {
		fl := r.faults[p.fault]
		if d.N > fl.N && !fl.gone[d.Worker] {
			fl.took[p.at] = d.At.Sub(fl.At).Seconds()
			s.waits = append(s.waits, darkWait{tenure: i, fault: p.fault, at: p.at, from: from})
			move = false
			continue
		}
		kept = append(kept, p)
	}
	s.pending = kept
	if move {
		s.waits = append(s.waits, darkWait{tenure: i, fault: -1, from: from})
	}
	r.darken(s, d, i)
}

func (r *Record) fault(f Fault) {
	r.mu.Lock()
	f.N = r.n
	fl := &faultLog{Fault: f, gone: map[string]bool{}, took: make([]float64, len(f.Sessions)), dark: make([]float64, len(f.Sessions))}
	for _, w := range f.Workers {
		fl.gone[w] = true
	}
	for _, q := range r.quiet {
		if !f.Quiet.IsZero() && q.from.Equal(f.Quiet) && q.to.Equal(f.At) {
			fl.quiet = q
		}
	}
	i := int32(len(r.faults))
	for at, id := range f.Sessions {
		fl.took[at], fl.dark[at] = math.NaN(), math.NaN()
		s := r.by[id]
		if s == nil {
			s = &sessionLog{}
			r.by[id] = s
		}
		s.pending = append(s.pending, pending{fault: i, at: int32(at)})
	}
	r.faults = append(r.faults, fl)
	r.mu.Unlock()
}

// Delivering is how many sessions delivered at least once.
func (r *Record) Delivering() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.delivering
}

// Count is how many deliveries were recorded.
func (r *Record) Count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// faultLog is one fault and, for each session it hit, the seconds from the
// fault to the session's first delivery by a worker it did not hit, and
// that tenure change's exact dark time (dark.go) (NaN: none yet).
type faultLog struct {
	Fault
	quiet *quietLog // its quiet span's count (Fault.Quiet); nil: none
	gone  map[string]bool
	took  []float64 // by index in Sessions
	dark  []float64 // by index in Sessions
}

// pending is a fault whose session (the sessionLog holding it) has not
// delivered again yet: the fault's index in Record.faults and the session's
// in its Sessions.
type pending struct{ fault, at int32 }

// sessionLog is what the judge needs of one session's deliveries, folded as
// they arrive (in the destination's order): its tenures' spans, the highest
// epoch, the seqs as an interval set, the silences.
type sessionLog struct {
	n        int64 // deliveries
	tenures  []tenure
	pairs    map[[2]int32]*pairLog // by (earlier, later) index in tenures; nil while one tenure
	maxEpoch int64
	fenced   int64
	seqs     []span // disjoint, sorted, not adjacent
	replays  int64
	firstAt  time.Time // its first delivery
	lastAt   time.Time
	silence  float64 // longest time between two deliveries, seconds
	pending  []pending
	last     int32      // the tenure of the last delivery
	waits    []darkWait // tenure changes not yet delivering a new seq (dark.go)
}

// tenure is one (worker, epoch) of a session that delivered: its first and
// last place in the destination's order and how many it delivered.
type tenure struct {
	worker      string
	epoch       int64
	first, last int64 // N
	count       int64
}

// pairLog is what the overlap of tenure a (earlier) and b (later) needs:
// a's count when b began (a's deliveries from b.first on are a.count -
// aBefore) and b's count at a's last delivery (b's deliveries up to a.last).
type pairLog struct {
	aBefore, bAtALast int64
}

// span is seqs lo..hi, all delivered.
type span struct{ lo, hi int64 }

// add folds d into s and returns its tenure's index.
func (s *sessionLog) add(d Delivery) int {
	i := -1
	for k := range s.tenures {
		if s.tenures[k].worker == d.Worker && s.tenures[k].epoch == d.Epoch {
			i = k
			break
		}
	}
	if i < 0 {
		i = len(s.tenures)
		for a := range s.tenures {
			if s.pairs == nil {
				s.pairs = map[[2]int32]*pairLog{}
			}
			s.pairs[[2]int32{int32(a), int32(i)}] = &pairLog{aBefore: s.tenures[a].count}
		}
		s.tenures = append(s.tenures, tenure{worker: d.Worker, epoch: d.Epoch, first: d.N})
	}
	t := &s.tenures[i]
	t.last = d.N
	t.count++
	// Every later tenure's deliveries so far are before this one: up to
	// i's last, for now.
	for b := i + 1; b < len(s.tenures); b++ {
		s.pairs[[2]int32{int32(i), int32(b)}].bAtALast = s.tenures[b].count
	}
	if d.Epoch < s.maxEpoch {
		s.fenced++
	}
	s.maxEpoch = max(s.maxEpoch, d.Epoch)
	if !s.insert(d.Seq) {
		s.replays++
	}
	if s.n > 0 {
		s.silence = max(s.silence, d.At.Sub(s.lastAt).Seconds())
	} else {
		s.firstAt = d.At
	}
	s.lastAt = d.At
	s.last = int32(i)
	s.n++
	return i
}

// insert adds seq to the interval set; false when it was already there.
func (s *sessionLog) insert(seq int64) bool {
	n := len(s.seqs)
	if n > 0 && seq == s.seqs[n-1].hi+1 { // the common case: the next seq
		s.seqs[n-1].hi = seq
		return true
	}
	// The first span whose hi+1 >= seq: seq is in it, extends it, or
	// falls before it.
	lo, hi := 0, n
	for lo < hi {
		m := (lo + hi) / 2
		if s.seqs[m].hi+1 < seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < n && s.seqs[lo].lo <= seq && seq <= s.seqs[lo].hi {
		return false
	}
	switch {
	case lo < n && seq == s.seqs[lo].hi+1: // extends it up (it is the last: handled above unless a later span follows)
		s.seqs[lo].hi = seq
		if lo+1 < n && s.seqs[lo+1].lo == seq+1 {
			s.seqs[lo].hi = s.seqs[lo+1].hi
			s.seqs = append(s.seqs[:lo+1], s.seqs[lo+2:]...)
		}
	case lo < n && seq == s.seqs[lo].lo-1: // extends it down
		s.seqs[lo].lo = seq
	default:
		s.seqs = append(s.seqs, span{})
		copy(s.seqs[lo+1:], s.seqs[lo:])
		s.seqs[lo] = span{seq, seq}
	}
	return true
}

// judge adds the session's figures to f (now: the end of the run, for the
// silence since its last delivery) and its lost seqs to *lost (f.Gaps, or
// a standby run's control's: StandbyFigures.ControlLost).
func (s *sessionLog) judge(now time.Time, f *Figures, lost *int64) {
	f.Deliveries += s.n
	f.Fenced += s.fenced
	f.Replays += s.replays
	f.LongestSilence = max(f.LongestSilence, s.silence, now.Sub(s.lastAt).Seconds())
	// Lost: the seqs between the first and the last not delivered.
	var distinct int64
	for _, sp := range s.seqs {
		distinct += sp.hi - sp.lo + 1
	}
	*lost += (s.seqs[len(s.seqs)-1].hi - s.seqs[0].lo + 1) - distinct
	f.Tenures += len(s.tenures)
	double := false
	for i := range s.tenures {
		a := &s.tenures[i]
		for j := i + 1; j < len(s.tenures); j++ { // b began after a (first in N order)
			b := &s.tenures[j]
			if b.first >= a.last {
				continue
			}
			double = true
			f.DoublePairs++
			p := s.pairs[[2]int32{int32(i), int32(j)}]
			f.Overlapping += (a.count - p.aBefore) + p.bAtALast
		}
	}
	if double {
		f.DoubleOwners++
	}
}
