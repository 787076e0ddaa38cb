package bench

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// zeroReport holds a zero result of every phase.
func zeroReport() *Report {
	return &Report{Mode: Quick, Micro: &MicroResult{}, Claim: &ClaimResult{}, Failover: &HandoverResult{Kind: kindKill}, Handoff: &HandoverResult{Kind: kindTerm},
		HandoffSmall: &HandoverResult{Kind: kindTerm}, Stop: &StopResult{}, Rebalance: &RebalanceResult{}, Cost: &CostResult{}, Reads: &ReadsResult{},
		Capacity: &CapacityResult{}, StandbyMem: &StandbyMemResult{}, Dynalite: &DynaliteResult{}, Throughput: &ThroughputResult{},
		TLSClaim: &TLSClaimResult{}, Bill: []BillResult{{}}}
}

// TestPhasesRegistered: every phase is registered once, runs, has a
// section and, when it states goals, a place in the goals table.
func TestPhasesRegistered(t *testing.T) {
	var names []string
	for _, ph := range phases {
		if ph.name == "" || ph.run == nil || ph.render == nil {
			t.Errorf("phase %q lacks a name, run or render", ph.name)
		}
		if slices.Contains(names, ph.name) {
			t.Errorf("phase %q registered twice", ph.name)
		}
		names = append(names, ph.name)
		if n := count(sectionOrder, ph.name); n != 1 {
			t.Errorf("phase %q has %d sections", ph.name, n)
		}
		if n := count(goalOrder, ph.name); n != 1 && ph.goals != nil || n != 0 && ph.goals == nil {
			t.Errorf("phase %q: %d places in the goals table (goals: %v)", ph.name, n, ph.goals != nil)
		}
	}
	if len(sectionOrder) != len(phases) {
		t.Errorf("%d sections for %d phases", len(sectionOrder), len(phases))
	}
	want := []string{PhaseMicro, PhaseClaim, PhaseFailover, PhaseHandoff, PhaseStop, PhaseRebalance, PhaseCost, PhaseReads, PhaseCapacity, PhaseStandbyMem, PhaseTLS, PhaseDynalite, PhaseThroughput, PhaseBill}
	if !slices.Equal(AllPhases, want) {
		t.Errorf("run order %v, want %v", AllPhases, want)
	}
	if want := []string{PhaseClaim, PhaseFailover, PhaseHandoff, PhaseStop, PhaseRebalance, PhaseCost}; !slices.Equal(ModelPhases, want) {
		t.Errorf("model phases %v, want %v", ModelPhases, want)
	}
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// TestPhasesRenderZero: every phase renders and judges a zero result
// without panicking, its section where it always was, and nothing when it
// did not run.
func TestPhasesRenderZero(t *testing.T) {
	for _, ph := range phases {
		var b strings.Builder
		ph.render(func(f string, a ...any) { b.WriteString(f) }, &Report{})
		if b.Len() != 0 {
			t.Errorf("phase %s renders %q without a result", ph.name, b.String())
		}
		if ph.goals != nil && len(ph.goals(&Report{})) != 0 {
			t.Errorf("phase %s judges goals without a result", ph.name)
		}
	}
	rep := zeroReport()
	Goals(rep)
	md := Render(rep)
	at := 0
	for _, h := range []string{"## 1. Claim latency", "## 2. Crash failover", "## 3. Graceful handoff", "## 3b. Graceful handoff", "## 4. Stop", "## 4b. Rebalancing",
		"## 5. One worker's capacity", "## 5b. One worker's capacity with dynalite", "## 5c. The claim path over TLS", "## 5d. A hot standby's memory",
		"## 6. DynamoDB cost", "## 7. Finding dead workers", "## 8. Sinks at real rates", "## 9. The all-in bill", "## Microbenchmarks"} {
		i := strings.Index(md[at:], h)
		if i < 0 {
			t.Errorf("no %q after byte %d", h, at)
			continue
		}
		at += i
	}
}

// TestGoalsOrder: the goals table lists the phases' goals in the order it
// always did.
func TestGoalsOrder(t *testing.T) {
	rep := sampleReport()
	rep.Throughput = &ThroughputResult{LatencyMs: 15, Runs: []ThroughputRun{{Name: TPSQSBatched, Sessions: 1, FeedRate: MaxFeedRate, MsgPerSec: 4000}}}
	at := 0
	for _, prefix := range []string{"Claim latency", "Crash failover", "Graceful handoff", "POST stop", "Write units per session-hour", "Read units per worker-hour", "One session into", "RSS per session"} {
		i := slices.IndexFunc(Goals(rep)[at:], func(g Goal) bool { return strings.HasPrefix(g.Figure, prefix) })
		if i < 0 {
			t.Errorf("no goal %q after row %d", prefix, at)
			continue
		}
		at += i
	}
}

// TestRunPhasesOnModel: the selected phases run in registry order; a model
// phase runs again on the DynamoDB model, its result filed under OnModel
// and its failure under name@model, the dynalite result staying the
// report's own.
func TestRunPhasesOnModel(t *testing.T) {
	registered := phases
	t.Cleanup(func() { phases = registered })
	var ran []string
	phases = []phase{
		{name: PhaseMicro, run: func(r *runner, _ context.Context) error {
			ran = append(ran, PhaseMicro+r.model)
			r.rep.Micro = &MicroResult{}
			return nil
		}},
		{name: PhaseStop, onModel: stopPhase.onModel, run: func(r *runner, _ context.Context) error {
			ran = append(ran, PhaseStop+r.model)
			r.rep.Stop = &StopResult{Unclosed: len(r.model)}
			if r.model != "" {
				return errors.New("boom")
			}
			return nil
		}},
		{name: PhaseReads, run: func(r *runner, _ context.Context) error { return errors.New("not selected") }},
	}
	r := &runner{cfg: Config{Phases: []string{PhaseStop, PhaseMicro}, Model: "aws"}, log: zerolog.Nop(), rep: &Report{Errors: map[string]string{}}}
	n, failed := r.runPhases(context.Background())
	if want := []string{PhaseMicro, PhaseStop, PhaseStop + "aws"}; n != 2 || !slices.Equal(ran, want) {
		t.Fatalf("ran %d: %v, want %v", n, ran, want)
	}
	if !slices.Equal(failed, []string{"stop@aws"}) || r.rep.Errors["stop@aws"] != "boom" || len(r.rep.Errors) != 1 {
		t.Fatalf("failed %v, errors %v", failed, r.rep.Errors)
	}
	if r.rep.Stop.Unclosed != 0 || r.rep.OnModel == nil || r.rep.OnModel.Profile != "aws" || r.rep.OnModel.Stop.Unclosed != 3 || r.model != "" {
		t.Fatalf("stop %+v, on the model %+v", r.rep.Stop, r.rep.OnModel)
	}
}
