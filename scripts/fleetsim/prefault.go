//go:build fleetsim

package fleetsim

import (
	"time"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
)

// PreFault is what a held fleet wrote in the PreFaultWindow before a run's
// first fault, taken only when the run had no steady window (its fault
// came before every session delivered: the 1,000 × 1,000,000 az's at
// 375 s, at the tail of a ramp claiming at the fleet's budget). The AZ
// goal's headroom bound counts these writes as the steady ones then: the
// table's writes in that window include the ramp's last claims, which the
// headroom above a steady fleet does not.
type PreFault struct {
	From float64 `json:"from"` // seconds from the fleet's start
	To   float64 `json:"to"`
	// HeldWriteUnits are the base table's write units per second of the
	// operations a fleet makes while nothing moves (heldOps).
	HeldWriteUnits float64 `json:"held_write_units_per_second"`
}

// PreFaultWindow is how long before the first fault PreFault measures.
const PreFaultWindow = 30 * time.Second

// heldOps are the writes of a fleet holding its sessions: the workers'
// liveness, the sessions' checkpoints and the fleet summary.
var heldOps = []string{dynamostore.OpHeartbeat, dynamostore.OpCheckpoint, dynamostore.OpPutSummary, dynamostore.OpPutMembers}

// markPreFault takes PreFault's marks around a first fault at at: it
// sleeps until PreFaultWindow before it (at once when that is past) and
// returns the mark to pass to endPreFault at the fault. Nothing when the
// steady window began.
func (fl *Fleet) markPreFault(at time.Duration) *steadyMark {
	fl.mu.Lock()
	steady := fl.steady[0] != nil
	fl.mu.Unlock()
	if steady || at < PreFaultWindow {
		return nil
	}
	start := fl.t0.Add(at - PreFaultWindow)
	if time.Now().After(start) {
		return nil
	}
	time.Sleep(time.Until(start))
	mk := markNow(fl.Table.Meter())
	return &mk
}

// endPreFault records PreFault from a's mark to now.
func (fl *Fleet) endPreFault(a *steadyMark) {
	if a == nil {
		return
	}
	b := markNow(fl.Table.Meter())
	d := b.at.Sub(a.at).Seconds()
	if d <= 0 {
		return
	}
	var units float64
	for _, op := range heldOps {
		units += b.ops[op].WriteUnits - a.ops[op].WriteUnits
	}
	fl.mu.Lock()
	fl.preFault = &PreFault{From: a.at.Sub(fl.t0).Seconds(), To: b.at.Sub(fl.t0).Seconds(), HeldWriteUnits: units / d}
	fl.mu.Unlock()
}
