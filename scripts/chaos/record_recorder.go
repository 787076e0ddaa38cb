// The recorder: every delivery the stack's pumps hand over, stamped on
// arrival and kept (a stdout sink line here: onSink; a destination record:
// onDest in sink.go), with the latest per session for the orchestration's
// waits.

package chaos

import (
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
)

// recorder stamps and keeps every sink record the stack's pumps hand over,
// and keeps the latest per session for the orchestration's waits.
type recorder struct {
	mu     sync.Mutex
	broken int64 // destination messages that were not sink envelopes
	all    []Delivery
	// poisoned are the destination records of poisoned messages.
	poisoned []PoisonArrival
	last     map[string]Delivery
	maxSq    map[string]int64
}

func newRecorder() *recorder {
	return &recorder{last: map[string]Delivery{}, maxSq: map[string]int64{}}
}

// onSink is devstack's OnSink: called from each worker's stdout reader.
func (r *recorder) onSink(s devstack.SinkRecord) {
	r.mu.Lock()
	d := Delivery{Session: s.ConnectionID, Seq: s.Seq, Epoch: s.LeaseEpoch, Worker: s.WorkerID, ReceivedAtMs: s.ReceivedAtMs, AtNs: time.Now().UnixNano(),
		FeedSeq: int64(s.DataSeq)}
	r.all = append(r.all, d)
	r.last[d.Session] = d
	r.maxSq[d.Session] = max(r.maxSq[d.Session], d.Seq)
	r.mu.Unlock()
}

func (r *recorder) deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.all...)
}

// lastOf is the latest delivery of every session in ids.
func (r *recorder) lastOf(ids []string) map[string]Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Delivery, len(ids))
	for _, id := range ids {
		if d, ok := r.last[id]; ok {
			out[id] = d
		}
	}
	return out
}

// maxSeqOf is the highest seq delivered for each of ids.
func (r *recorder) maxSeqOf(ids []string) map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(ids))
	for _, id := range ids {
		out[id] = r.maxSq[id]
	}
	return out
}

// owners maps each of ids to the worker of its latest delivery, if that
// arrived within recent of now.
func (r *recorder) owners(ids []string, recent time.Duration) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	cut := time.Now().Add(-recent).UnixNano()
	out := map[string]string{}
	for _, id := range ids {
		if d, ok := r.last[id]; ok && d.AtNs >= cut {
			out[id] = d.Worker
		}
	}
	return out
}
