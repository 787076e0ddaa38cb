//go:build fleetsim

package fleetsim

import (
	"context"
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

// Record is the simulator's own record: every delivery (the sink of every
// worker is the Record) and every fault. Safe for concurrent use.
type Record struct {
	mu     sync.Mutex
	by     map[string][]Delivery
	n      int64
	faults []Fault
}

func newRecord() *Record { return &Record{by: map[string][]Delivery{}} }

// Handle records m (sink.Handler): the destination takes every message.
func (r *Record) Handle(_ context.Context, m sink.Message) error {
	at := time.Now() // the bubble's clock: virtual
	r.mu.Lock()
	r.n++
	r.by[m.ConnectionID] = append(r.by[m.ConnectionID], Delivery{N: r.n, Session: m.ConnectionID, Seq: m.Seq, Worker: m.WorkerID, Epoch: m.LeaseEpoch, At: at})
	r.mu.Unlock()
	return nil
}

func (r *Record) fault(f Fault) {
	r.mu.Lock()
	f.N = r.n
	r.faults = append(r.faults, f)
	r.mu.Unlock()
}

// Count is how many deliveries were recorded.
func (r *Record) Count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// snapshot is a copy of the deliveries by session and of the faults.
func (r *Record) snapshot() (map[string][]Delivery, []Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	by := make(map[string][]Delivery, len(r.by))
	for k, v := range r.by {
		by[k] = append([]Delivery(nil), v...)
	}
	return by, append([]Fault(nil), r.faults...)
}
