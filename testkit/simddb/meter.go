package simddb

import (
	"maps"
	"sync"
	"time"
)

// Meters: what the store's requests consumed, by the billing rules of
// testkit/ddbrules, by lease.Store operation, by partition key value, by
// index key value and for the table, each as a total and as its busiest
// second; and the requests throttled, by operation and by reason.

// Series is units consumed over time: the total and the busiest second
// (whole seconds of the store's clock).
type Series struct {
	Total  float64   `json:"total"`
	Peak   float64   `json:"peak"`    // units in the busiest second
	PeakAt time.Time `json:"peak_at"` // the start of that second
	sec    int64
	cur    float64
}

func (s *Series) add(now time.Time, u float64) {
	if u == 0 {
		return
	}
	if sec := now.Unix(); sec != s.sec {
		s.sec, s.cur = sec, 0
	}
	s.cur += u
	s.Total += u
	if s.cur > s.Peak {
		s.Peak, s.PeakAt = s.cur, time.Unix(s.sec, 0).UTC()
	}
}

// RW is write and read units of one key (or the table).
type RW struct {
	Write Series `json:"write"`
	Read  Series `json:"read"`
}

// Usage is what the calls of one lease.Store operation cost.
type Usage struct {
	Calls           int64   `json:"calls"`             // lease.Store calls
	Requests        int64   `json:"requests"`          // DynamoDB requests they stand for (Query pages, classifying reads included; a BatchGetItem is one)
	WriteUnits      float64 `json:"write_units"`       // base table write units
	IndexWriteUnits float64 `json:"index_write_units"` // index write units, all indexes
	ReadUnits       float64 `json:"read_units"`        // read units (index reads included)
	ConditionFailed int64   `json:"condition_failed"`  // writes whose condition failed (billed)
	Throttled       int64   `json:"throttled"`         // calls refused for throughput (not applied, not billed)
}

func (u *Usage) add(v Usage) {
	u.Calls += v.Calls
	u.Requests += v.Requests
	u.WriteUnits += v.WriteUnits
	u.IndexWriteUnits += v.IndexWriteUnits
	u.ReadUnits += v.ReadUnits
	u.ConditionFailed += v.ConditionFailed
	u.Throttled += v.Throttled
}

// Meter is a snapshot of the store's meters.
type Meter struct {
	// Ops is the usage by lease.Store operation (and OpSeed, OpIngest: the
	// harness's own writes).
	Ops map[string]Usage `json:"ops"`
	// Table is the table's units over time (its indexes' not included).
	Table RW `json:"table"`
	// Partitions is the units by partition key value of the table (a
	// session id, "spec#" + id + ref, "worker#" + id).
	Partitions map[string]RW `json:"partitions"`
	// IndexKeys is the units by index, then by index key value.
	IndexKeys map[string]map[string]RW `json:"index_keys"`
	// Indexes is the units by index (all its key values).
	Indexes map[string]RW `json:"indexes"`
	// Throttled is the calls throttled by reason (a call throttled for
	// two reasons counts under both).
	Throttled map[string]int64 `json:"throttled"`
	// Contended is the calls on an item that met another call on the same
	// item in flight, a write either of them: the order in which they reach
	// the store is the scheduler's, which no seed fixes. A simulator
	// reports it as what it could not make deterministic.
	Contended int64 `json:"contended"`
}

// Total is the usage over all operations.
func (m Meter) Total() Usage {
	var u Usage
	for _, v := range m.Ops {
		u.add(v)
	}
	return u
}

type meters struct {
	mu         sync.Mutex
	ops        map[string]Usage
	table      RW
	partitions map[string]*RW
	indexKeys  map[string]map[string]*RW
	indexes    map[string]*RW
	throttled  map[string]int64
	contended  int64
}

func newMeters() *meters {
	return &meters{ops: map[string]Usage{}, partitions: map[string]*RW{}, indexKeys: map[string]map[string]*RW{}, indexes: map[string]*RW{}, throttled: map[string]int64{}}
}

func rwOf[K comparable](m map[K]*RW, k K) *RW {
	r := m[k]
	if r == nil {
		r = &RW{}
		m[k] = r
	}
	return r
}

// record meters the requests of one call of op at now.
func (m *meters) record(now time.Time, op string, reqs []request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := Usage{Calls: 1}
	for _, r := range reqs {
		if r.op != "" {
			u.Requests++
		}
		switch {
		case r.index != "":
			u.ReadUnits += r.units
			rwOf(m.indexes, r.index).Read.add(now, r.units)
			keys := m.indexKeys[r.index]
			if keys == nil {
				keys = map[string]*RW{}
				m.indexKeys[r.index] = keys
			}
			rwOf(keys, r.value).Read.add(now, r.units)
		case r.write:
			u.WriteUnits += r.units
			m.table.Write.add(now, r.units)
			rwOf(m.partitions, r.key).Write.add(now, r.units)
			if r.failed {
				u.ConditionFailed++
			}
			for _, w := range r.entries {
				u.IndexWriteUnits += w.Units
				rwOf(m.indexes, w.Index).Write.add(now, w.Units)
				keys := m.indexKeys[w.Index]
				if keys == nil {
					keys = map[string]*RW{}
					m.indexKeys[w.Index] = keys
				}
				rwOf(keys, w.Value).Write.add(now, w.Units)
			}
		default:
			u.ReadUnits += r.units
			m.table.Read.add(now, r.units)
			rwOf(m.partitions, r.key).Read.add(now, r.units)
		}
	}
	v := m.ops[op]
	v.add(u)
	m.ops[op] = v
}

// throttle meters one call of op refused for reasons.
func (m *meters) throttle(op string, reasons []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.ops[op]
	v.add(Usage{Calls: 1, Throttled: 1})
	m.ops[op] = v
	for _, r := range reasons {
		m.throttled[r]++
	}
}

func (m *meters) contend() {
	m.mu.Lock()
	m.contended++
	m.mu.Unlock()
}

func deref[K comparable](m map[K]*RW) map[K]RW {
	out := make(map[K]RW, len(m))
	for k, v := range m {
		out[k] = *v
	}
	return out
}

func (m *meters) snapshot() Meter {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := Meter{
		Ops: maps.Clone(m.ops), Table: m.table, Partitions: deref(m.partitions), IndexKeys: map[string]map[string]RW{},
		Indexes: deref(m.indexes), Throttled: maps.Clone(m.throttled), Contended: m.contended,
	}
	for ix, keys := range m.indexKeys {
		out.IndexKeys[ix] = deref(keys)
	}
	return out
}

// TableMeter is a snapshot of the meters that do not grow with the keys:
// Ops, Table, Throttled and Contended (Partitions, IndexKeys and Indexes
// left nil). Cheap enough to take while a big table runs (a simulator's
// progress lines), where Meter copies every key's series.
func (s *Store) TableMeter() Meter {
	m := s.meters
	m.mu.Lock()
	defer m.mu.Unlock()
	return Meter{Ops: maps.Clone(m.ops), Table: m.table, Throttled: maps.Clone(m.throttled), Contended: m.contended}
}
