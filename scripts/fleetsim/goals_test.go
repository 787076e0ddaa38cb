//go:build fleetsim

package fleetsim

import (
	"strings"
	"testing"
)

// The goals table is computed from the runs' figures: each goal met,
// missed, or not measured when no run measures it.
func TestGoalsComputedFromFigures(t *testing.T) {
	steady := func(workers int, reads, hours float64) Measured {
		var m Measured
		m.Scenario, m.Workers, m.Sessions = "steady", workers, workers*1000
		m.Table.ReadUnits, m.Table.WorkerHours = reads, hours
		m.Table.WritePartition = Peak{Key: "s-1", Units: 10, Limit: 1000}
		m.Table.WriteIndexKey = Peak{Key: "by_unowned/x", Units: 400, Limit: 1000}
		m.Steady = Steady{From: 60, To: 600}
		return m
	}
	az := steady(100, 1, 1)
	az.Scenario = "az"
	az.Table.WriteTable = Peak{Limit: 4000}
	az.Table.WriteUnitsPerTenure = 10
	az.Steady.WriteUnits = 2000
	// 33,000 sessions × 10 units ÷ 2,000 units/s of headroom: 165 s, ×1.2.
	az.Faults = []Recovery{{Kind: "kill", Sessions: 33000, Recovered: 33000, Max: 190}}
	r := Report{TTL: 10, Runs: []Measured{steady(10, 1000, 1), steady(100, 25000, 20), az}}
	byGoal := map[string]Goal{}
	for _, g := range r.goals() {
		byGoal[strings.Fields(g.Goal)[0]+" "+strings.Fields(g.Goal)[1]] = g
	}
	want := map[string]string{
		"0 double":          goalMet,
		"coordination read": goalMissed, // 1,250 vs 1,000 per worker-hour: ×1.25
		"no partition":      goalMet,    // 40 % of the index key's limit, nothing throttled
		"loss of":           goalMet,    // 190 s ≤ 1.2 × 165 s
		"rolling deploy:":   goalNotMeasured,
	}
	for k, st := range want {
		if g, ok := byGoal[k]; !ok || g.Status != st {
			t.Errorf("goal %q: %+v, want %s", k, g, st)
		}
	}

	// A heartbeat throttled misses the AZ goal; a throttle in the steady
	// window misses the limits goal; one size leaves the scaling unmeasured.
	az.Table.HeartbeatsThrottled = 1
	az.Steady.Throttled = map[string]int64{"PartitionWrite": 2}
	r = Report{TTL: 10, Runs: []Measured{az}}
	gs := r.goals()
	if gs[1].Status != goalNotMeasured || gs[2].Status != goalMissed || gs[3].Status != goalMissed {
		t.Errorf("goals %+v", gs)
	}
	if md := r.Markdown(); !strings.Contains(md, "## Goals (issue 36)") || !strings.Contains(md, "**missed**") {
		t.Errorf("SCALE.md has no goals table:\n%s", md)
	}
}
