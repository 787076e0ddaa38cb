// The lease phases on the DynamoDB model (testkit/dynamodel): their results
// beside dynalite's, the goals on both, and the model's own billing meter
// beside the workers' store counters.

package bench

import (
	"context"
	"strings"

	"github.com/wsfleet/wsfleet/testkit/dynamodel"
)

// ModelResults are the ModelPhases' results on the DynamoDB model, measured
// in the same run as the report's own (dynalite) results.
type ModelResults struct {
	Profile      string           `json:"profile"`
	Claim        *ClaimResult     `json:"claim,omitempty"`
	Failover     *HandoverResult  `json:"failover,omitempty"`
	Handoff      *HandoverResult  `json:"handoff,omitempty"`
	HandoffSmall *HandoverResult  `json:"handoff_small,omitempty"`
	Stop         *StopResult      `json:"stop,omitempty"`
	Rebalance    *RebalanceResult `json:"rebalance,omitempty"`
	Cost         *CostResult      `json:"cost,omitempty"`
}

// Report is m as a Report of its own (for Goals).
func (m *ModelResults) Report(mode Mode) *Report {
	return &Report{Mode: mode, Claim: m.Claim, Failover: m.Failover, Handoff: m.Handoff, HandoffSmall: m.HandoffSmall,
		Stop: m.Stop, Rebalance: m.Rebalance, Cost: m.Cost}
}

// MeterRates are a cost window's usage as the DynamoDB model billed it
// (its own meter: 1 KB write units on the larger of the item before and
// after, index writes, 4 KB read units), per session-hour, beside the
// workers' store counters (CostRun.Steady).
type MeterRates struct {
	WRUPerSH      float64 `json:"wru_per_session_hour"`
	IndexWRUPerSH float64 `json:"index_wru_per_session_hour"`
	RRUPerSH      float64 `json:"rru_per_session_hour"`
	Requests      int64   `json:"requests"`
	Throttled     int64   `json:"throttled"`
	Faults        int64   `json:"ambiguous"`
	// MonthlyMeasured is the on-demand cost per 1,000 sessions a month at
	// these rates (as CostRun.MonthlyMeasured from the store counters).
	MonthlyMeasured float64 `json:"monthly_usd_per_1000_sessions_measured"`
}

// table is the stack's table name.
func (ls *leaseStack) table() string { return ls.st.Config().Table }

// tableUsage is the model's usage of table so far (zero without a model).
func (ls *leaseStack) tableUsage(ctx context.Context, table string) (dynamodel.Usage, error) {
	if ls.st.Model == nil {
		return dynamodel.Usage{}, nil
	}
	m, err := ls.st.Model.Meter(ctx)
	if err != nil {
		return dynamodel.Usage{}, err
	}
	return m.Tables[table].Total(), nil
}

// meterRates are the model's usage between u0 and u1 over sessionHours.
func meterRates(u0, u1 dynamodel.Usage, sessionHours float64) *MeterRates {
	if sessionHours <= 0 {
		return nil
	}
	m := &MeterRates{
		WRUPerSH:      (u1.WriteUnits - u0.WriteUnits) / sessionHours,
		IndexWRUPerSH: (u1.IndexWriteUnits - u0.IndexWriteUnits) / sessionHours,
		RRUPerSH:      (u1.ReadUnits - u0.ReadUnits) / sessionHours,
		Requests:      u1.Requests - u0.Requests, Throttled: u1.Throttled - u0.Throttled, Faults: u1.Faults - u0.Faults,
	}
	m.MonthlyMeasured = MonthlyPer1000(m.WRUPerSH+m.IndexWRUPerSH, m.RRUPerSH)
	return m
}

// renderOnModel is the side-by-side section: every goal's figure on
// dynalite and on the model, then the cost as the model billed it.
func renderOnModel(p printer, r *Report) {
	m := r.OnModel
	if m == nil {
		return
	}
	p("## On the DynamoDB model (profile `%s`) beside dynalite\n\n", m.Profile)
	var ran []string
	for _, ph := range []struct {
		name string
		done bool
	}{{PhaseClaim, m.Claim != nil}, {PhaseFailover, m.Failover != nil}, {PhaseHandoff, m.Handoff != nil}, {PhaseStop, m.Stop != nil},
		{PhaseRebalance, m.Rebalance != nil}, {PhaseCost, m.Cost != nil}} {
		if _, failed := r.Errors[ph.name+"@"+m.Profile]; ph.done && !failed {
			ran = append(ran, ph.name)
		}
	}
	p("These phases ran twice in this run (or its re-run): %s, on dynalite (the sections above) and again on the DynamoDB model (`testkit/dynamodel`, `bin/dynamodel` in front of dynalite: AWS latency with rare multi-second spikes, index lag, stale eventually consistent reads, throttling at DynamoDB's limits, 0.1 %% each of writes answered 500 before applying, 500 after, and dropped after; each default and its source in [references.md](references.md#dynamodb-as-the-model-testkitdynamodel-behaves)). Same sizes, same machine, minutes apart.\n\n", strings.Join(ran, ", "))
	onModel := map[string]Goal{}
	for _, g := range Goals(m.Report(r.Mode)) {
		onModel[g.Figure] = g
	}
	p("| figure | dynalite | model (%s) | goal | met on the model | missed by |\n|---|---|---|---|---|---|\n", m.Profile)
	for _, g := range Goals(r) {
		mg, ok := onModel[g.Figure]
		if !ok {
			continue
		}
		met := "yes"
		if !mg.Met {
			met = "**no**"
		}
		p("| %s | %s | %s | %s | %s | %s |\n", g.Figure, g.Measured, mg.Measured, g.Goal, met, mg.Miss)
	}
	p("\n")
	if m.Failover != nil {
		var dyn *StandbyRun
		if r.Failover != nil {
			dyn = r.Failover.Standby
		}
		renderStandbyOnModel(p, dyn, m.Failover.Standby, m.Profile)
	}
	if c := m.Cost; c != nil {
		p("Cost on the model: the workers' store counters (what the store believes it wrote) and the model's own meter (what DynamoDB would bill), over the same window:\n\n")
		p("| run | store: write units / session-hour | model: write units / session-hour (of which index) | store: read units / session-hour | model: read units / session-hour | model: requests, throttled, ambiguous | $ per 1,000 sessions a month (store / model) |\n|---|---|---|---|---|---|---|\n")
		for _, run := range []*CostRun{c.Active, c.Idle} {
			if run == nil || run.Meter == nil {
				continue
			}
			t, mt := run.Steady.Total, run.Meter
			p("| %s | %.2f | %.2f (%.2f) | %.2f | %.2f | %s, %d, %d | %.2f / %.2f |\n", run.Name, t.WRUPerSH, mt.WRUPerSH+mt.IndexWRUPerSH, mt.IndexWRUPerSH,
				t.RRUPerSH, mt.RRUPerSH, thousands(int(mt.Requests)), mt.Throttled, mt.Faults, run.MonthlyMeasured, mt.MonthlyMeasured)
		}
		p("\n")
	}
	var failed []string
	for k := range r.Errors {
		if strings.HasSuffix(k, "@"+m.Profile) {
			failed = append(failed, k)
		}
	}
	if len(failed) > 0 {
		p("Failed on the model: %s (see \"Phases that failed\").\n\n", strings.Join(failed, ", "))
	}
}
