package dynamodel

import (
	"fmt"
	"sync"
	"time"
)

// Ambiguous errors. Each write (PutItem, UpdateItem, DeleteItem,
// BatchWriteItem) draws one fault kind, or none, from the profile's shares
// (or a storm's, while it lasts):
//
//   - FaultBefore: answered 500 InternalServerError; the write is not
//     applied (nor billed);
//   - FaultAfter: the write is applied (billed, and reaches the lagging
//     state), then answered 500 InternalServerError;
//   - FaultDrop: the write is applied, then the connection is closed
//     without a reply (the client sees its connection reset or EOF).
//
// DynamoDB documents that a write answered 500 "may have succeeded or
// failed". The After and Drop kinds apply only to writes that succeed: a
// write refused (a failed condition, a validation error) is answered as
// dynalite answers it.

// Fault is a kind of ambiguous error.
type Fault string

const (
	FaultBefore Fault = "before"
	FaultAfter  Fault = "after"
	FaultDrop   Fault = "drop"
)

var faultKinds = []Fault{FaultBefore, FaultAfter, FaultDrop}

// ParseFault is the Fault named s.
func ParseFault(s string) (Fault, error) {
	for _, f := range faultKinds {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("dynamodel: unknown fault kind %q (before, after or drop)", s)
}

type storm struct {
	share float64
	until time.Time
}

type faulter struct {
	mu     sync.Mutex
	storms map[Fault]storm
}

// Storm sets the share of writes answered with fault kind for dur (then
// the profile's share again).
func (m *Model) Storm(kind Fault, share float64, dur time.Duration) error {
	if _, err := ParseFault(string(kind)); err != nil {
		return err
	}
	if share < 0 || share > 1 {
		return fmt.Errorf("dynamodel: storm share %v not in [0, 1]", share)
	}
	m.faults.mu.Lock()
	m.faults.storms[kind] = storm{share, time.Now().Add(dur)}
	m.faults.mu.Unlock()
	return nil
}

func (m *Model) share(kind Fault, now time.Time) float64 {
	m.faults.mu.Lock()
	s, ok := m.faults.storms[kind]
	m.faults.mu.Unlock()
	if ok && now.Before(s.until) {
		return s.share
	}
	switch kind {
	case FaultBefore:
		return m.prof.Faults.Before
	case FaultAfter:
		return m.prof.Faults.After
	}
	return m.prof.Faults.Drop
}

// drawFault is the fault kind of one write ("" for none).
func (m *Model) drawFault() Fault {
	now := time.Now()
	var shares [3]float64
	total := 0.0
	for i, k := range faultKinds {
		shares[i] = m.share(k, now)
		total += shares[i]
	}
	if total == 0 {
		return ""
	}
	u := m.float()
	for i, k := range faultKinds {
		if u < shares[i] {
			return k
		}
		u -= shares[i]
	}
	return ""
}

// internalError is DynamoDB's 500.
func internalError() *reply {
	return &reply{status: 500, body: []byte(`{"__type":"` + errNS + `InternalServerError","message":"Internal server error"}`)}
}

// faulted turns the reply to an applied write into the fault's; a write
// that failed is answered as it was.
func faulted(f Fault, rep *reply) *reply {
	if rep.status != 200 {
		return rep
	}
	switch f {
	case FaultAfter:
		return internalError()
	case FaultDrop:
		return &reply{drop: true}
	}
	return rep
}
