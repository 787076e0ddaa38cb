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

// Keep reports whether e is taken (true) or dropped.
func (f *Filter) Keep(e Envelope) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[e.ConnectionID]
	if s == nil {
		if f.sessions == nil {
			f.sessions = map[string]*seen{}
		}
		s = &seen{epoch: e.LeaseEpoch, taken: map[position]struct{}{}}
		f.sessions[e.ConnectionID] = s
	}
	if !f.Unordered {
		if e.LeaseEpoch < s.epoch {
			return false
		}
		s.epoch = e.LeaseEpoch
	}
	p := position{seq: e.Seq, sub: e.Sub}
	if e.Sub > 0 {
		p.epoch = e.LeaseEpoch
	}
	if _, dup := s.taken[p]; dup {
		return false
	}
	s.taken[p] = struct{}{}
	return true
}

// Forget drops what f remembers of a session (one that ended: its
// envelopes will not come again).
func (f *Filter) Forget(connectionID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions, connectionID)
}
