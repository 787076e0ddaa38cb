//go:build fleetsim

package fleetsim

import (
	"maps"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/testkit/simddb"
)

// Steady is what the table served in a scenario's steady state: from twice
// the ramp (the sessions started, and as long again to settle) or, when
// later, the first second every session started has delivered, to the
// first fault or the end (no window when that second never came before
// it). The busiest seconds (TableFigures' peaks) are the whole run's;
// these are the window's.
type Steady struct {
	From float64 `json:"from"` // seconds from the fleet's start
	To   float64 `json:"to"`
	// Throttled are the calls throttled in the window, by reason.
	Throttled map[string]int64 `json:"throttled"`
	// WriteUnits and ReadUnits are the table's (indexes excluded) per
	// second over the window.
	WriteUnits float64 `json:"write_units_per_second"`
	ReadUnits  float64 `json:"read_units_per_second"`
	// WorkerHours are the workers' lives in the window; ReadUnitsPerWorkerHour
	// the workers' read units (indexes included) per worker-hour in it, and
	// Ops by operation (readkinds.go): the whole run's figures without the
	// ramp.
	WorkerHours            float64           `json:"worker_hours,omitempty"`
	ReadUnitsPerWorkerHour float64           `json:"read_units_per_worker_hour,omitempty"`
	Ops                    map[string]OpRate `json:"ops,omitempty"`
}

// steadyMark is the table's meter at one instant.
type steadyMark struct {
	at                time.Time
	throttled         map[string]int64
	writeUnits, reads float64
	ops               map[string]simddb.Usage
}

func markNow(m simddb.Meter) steadyMark {
	return steadyMark{at: time.Now(), throttled: maps.Clone(m.Throttled), writeUnits: m.Table.Write.Total, reads: m.Table.Read.Total, ops: maps.Clone(m.Ops)}
}

// awaitSteady marks the steady window's start (Steady): at twice the ramp,
// or at the first whole second after it when every session started has
// delivered; not at all when that comes no sooner than sc's first fault or
// end.
func (fl *Fleet) awaitSteady(sc Scenario) {
	end := sc.Duration
	if len(sc.Faults) > 0 {
		end = sc.Faults[0].At
	}
	at := 2 * sc.Ramp
	for ; at < end; at += time.Second {
		time.Sleep(time.Until(fl.t0.Add(at)))
		fl.mu.Lock()
		started := len(fl.sessions)
		fl.mu.Unlock()
		if fl.Record.Delivering() >= started {
			fl.markSteady(true)
			return
		}
	}
}

// markSteady records the meter at the window's start (begin) or end.
func (fl *Fleet) markSteady(begin bool) {
	mk := markNow(fl.Table.Meter())
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if begin {
		fl.steady[0] = &mk
	} else if fl.steady[0] != nil && fl.steady[1] == nil {
		fl.steady[1] = &mk
	}
}

// steadyFigures is the window between the marks (zero when the run had no
// steady window: a fault before twice the ramp).
func (fl *Fleet) steadyFigures() Steady {
	fl.mu.Lock()
	a, b := fl.steady[0], fl.steady[1]
	fl.mu.Unlock()
	if a == nil || b == nil {
		return Steady{}
	}
	s := Steady{From: a.at.Sub(fl.t0).Seconds(), To: b.at.Sub(fl.t0).Seconds(), Throttled: map[string]int64{}}
	for k, v := range b.throttled {
		if d := v - a.throttled[k]; d > 0 {
			s.Throttled[k] = d
		}
	}
	if d := b.at.Sub(a.at).Seconds(); d > 0 {
		s.WriteUnits, s.ReadUnits = (b.writeUnits-a.writeUnits)/d, (b.reads-a.reads)/d
	}
	s.WorkerHours = workerHours(fl.Members(), a.at, b.at)
	s.Ops = opRates(b.ops, a.ops, s.WorkerHours)
	s.ReadUnitsPerWorkerHour = readUnitsOf(s.Ops)
	return s
}

// heartbeatsThrottled are the workers' heartbeats the table refused over
// the whole run.
func heartbeatsThrottled(m simddb.Meter) int64 { return m.Ops[dynamostore.OpHeartbeat].Throttled }
