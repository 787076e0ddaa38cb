// The one shape of a bench phase (run and measure, render, judge) and the
// registry of them: the run loop, the report's sections, the goals table
// and the DynamoDB model's second run all go through it.

package bench

import "context"

// phase is one bench phase. Its file holds its result type and the
// functions named here.
type phase struct {
	name string
	// run measures, filling the phase's result in r.rep (a failure is
	// reported beside whatever it filled in).
	run func(r *runner, ctx context.Context) error
	// render writes the phase's section of docs/BENCHMARKS.md, nothing
	// when rep holds no result of it.
	render func(p printer, rep *Report)
	// goals judges the phase's figures (none when it did not run); nil:
	// the phase states no goal.
	goals func(rep *Report) []Goal
	// onModel, set for the phases that run again on the DynamoDB model,
	// files that run's result (in got) under m.
	onModel func(m *ModelResults, got *Report)
}

// phases are the bench's phases in run order.
var phases = []phase{microPhase, claimPhase, failoverPhase, handoffPhase, stopPhase, rebalancePhase, costPhase, readsPhase,
	capacityPhase, standbyMemPhase, tlsPhase, dynalitePhase, throughputPhase, billPhase}

// sectionOrder is the order of the phases' sections in the report (by
// their numbers; the microbenchmarks last).
var sectionOrder = []string{PhaseClaim, PhaseFailover, PhaseHandoff, PhaseStop, PhaseRebalance, PhaseCapacity, PhaseDynalite, PhaseTLS,
	PhaseStandbyMem, PhaseCost, PhaseReads, PhaseThroughput, PhaseBill, PhaseMicro}

// goalOrder is the order of the phases' rows in the goals table (the
// phases with goals).
var goalOrder = []string{PhaseClaim, PhaseFailover, PhaseHandoff, PhaseStop, PhaseRebalance, PhaseCost, PhaseReads, PhaseThroughput,
	PhaseCapacity, PhaseStandbyMem, PhaseBill}

// AllPhases lists every phase in run order.
var AllPhases = phaseNames(func(phase) bool { return true })

// ModelPhases are the phases that run a second time on the DynamoDB model
// (Config.Model), in the same run, right after their run on dynalite: the
// report puts the two side by side.
var ModelPhases = phaseNames(func(p phase) bool { return p.onModel != nil })

func phaseNames(keep func(phase) bool) []string {
	var out []string
	for _, p := range phases {
		if keep(p) {
			out = append(out, p.name)
		}
	}
	return out
}

// phaseNamed is the registered phase called name.
func phaseNamed(name string) phase {
	for _, p := range phases {
		if p.name == name {
			return p
		}
	}
	panic("bench: no phase " + name)
}

// Goals evaluates the goals against the report, phase by phase (each
// phase's goals are with its code).
func Goals(r *Report) []Goal {
	var gs []Goal
	for _, name := range goalOrder {
		gs = append(gs, phaseNamed(name).goals(r)...)
	}
	return gs
}

// renderSections writes the phases' sections in the report's order.
func renderSections(p printer, r *Report) {
	for _, name := range sectionOrder {
		phaseNamed(name).render(p, r)
	}
}
