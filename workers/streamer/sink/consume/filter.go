package consume

import "sync"

// Filter applies the consumer rule of docs/worker.md (Sinks) to the
// envelopes of a destination, per connection_id, in the order they are
// read:
//  1. on an ordered destination (a FIFO queue, a Kinesis shard), an
//     envelope whose lease_epoch is below the highest seen is dropped: a
//     late write of an older tenure, which the newer tenure sent again
//     after its checkpoint; otherwise its lease_epoch becomes the highest
//     seen;
//  2. a replay is dropped: an envelope whose (seq, sub) was taken already,
//     for sub 0 by any tenure (a message's seq names it across tenures),
//     for sub ≥ 1 by the same tenure (each tenure numbers the messages
//     without a seq of their own anew, so another tenure's seq.sub is
//     another message);
//  3. otherwise it is taken.
//
// On a standard queue, which keeps no order, a lower epoch may be an
// acknowledged envelope arriving late: Unordered skips rule 1.
//
// A Filter remembers every position it took until Forget; it is safe for
// concurrent use. The zero Filter applies the rule of an ordered
// destination.
type Filter struct {
	// Unordered: the destination keeps no order (an SQS standard queue).
	Unordered bool

	mu       sync.Mutex
	sessions map[string]*seen
}

// seen is what a Filter remembers of one session.
type seen struct {
	epoch int64
	taken map[position]struct{}
}

type position struct{ seq, sub, epoch int64 }

// Keep reports whether e is taken (true: Took(e) done) or dropped.
func (f *Filter) Keep(e Envelope) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.wanted(e) {
		return false
	}
	f.took(e)
	return true
}

// Wanted reports whether the rule takes e, remembering only its epoch
// (rule 1: an epoch seen fences the older ones, whatever becomes of e). A
// consumer that stores e calls Took once it stored it, so that an envelope
// it failed to store is wanted again when it comes back.
func (f *Filter) Wanted(e Envelope) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wanted(e)
}

// Took records e's position as taken.
func (f *Filter) Took(e Envelope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.took(e)
}

func (f *Filter) wanted(e Envelope) bool {
	s := f.session(e)
	if !f.Unordered {
		if e.LeaseEpoch < s.epoch {
			return false
		}
		s.epoch = e.LeaseEpoch
	}
	_, dup := s.taken[positionOf(e)]
	return !dup
}

func (f *Filter) took(e Envelope) { f.session(e).taken[positionOf(e)] = struct{}{} }

// session is what f remembers of e's session (made at its first envelope).
func (f *Filter) session(e Envelope) *seen {
	s := f.sessions[e.ConnectionID]
	if s == nil {
		if f.sessions == nil {
			f.sessions = map[string]*seen{}
		}
		s = &seen{epoch: e.LeaseEpoch, taken: map[position]struct{}{}}
		f.sessions[e.ConnectionID] = s
	}
	return s
}

// positionOf is e's position as rule 2 compares it.
func positionOf(e Envelope) position {
	p := position{seq: e.Seq, sub: e.Sub}
	if e.Sub > 0 {
		p.epoch = e.LeaseEpoch
	}
	return p
}

// Forget drops what f remembers of a session (one that ended: its
// envelopes will not come again).
func (f *Filter) Forget(connectionID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions, connectionID)
}
