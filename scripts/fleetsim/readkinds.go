//go:build fleetsim

package fleetsim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/testkit/simddb"
)

// OpRate is what the workers' calls of one lease.Store operation cost, per
// worker-hour: where the read units and the refused acquires come from
// (issue 37's read-scaling goal), over the whole run and over the steady
// window (the ramp's claims excluded).
type OpRate struct {
	Calls     float64 `json:"calls"`
	ReadUnits float64 `json:"read_units"` // the classifying reads of refused writes included
	Refused   float64 `json:"refused"`    // conditional writes refused (each billed a write unit)
	// Throttled: calls the table refused for throughput (each retried by
	// the SDK or failed: which calls a read spike at the account limit
	// delayed).
	Throttled float64 `json:"throttled,omitempty"`
}

// opRates is the usage between base and now (base nil: from the start) per
// worker-hour, by operation, the harness's own writes excluded.
func opRates(now, base map[string]simddb.Usage, hours float64) map[string]OpRate {
	out := map[string]OpRate{}
	if hours <= 0 {
		return out
	}
	for op, u := range now {
		if op == simddb.OpSeed || op == simddb.OpIngest {
			continue
		}
		b := base[op]
		r := OpRate{Calls: float64(u.Calls-b.Calls) / hours, ReadUnits: (u.ReadUnits - b.ReadUnits) / hours, Refused: float64(u.ConditionFailed-b.ConditionFailed) / hours,
			Throttled: float64(u.Throttled-b.Throttled) / hours}
		if r != (OpRate{}) {
			out[op] = r
		}
	}
	return out
}

// readUnitsOf is the read units per worker-hour of ops.
func readUnitsOf(ops map[string]OpRate) float64 {
	var s float64
	for _, r := range ops {
		s += r.ReadUnits
	}
	return s
}

// workerHours is the members' lives within [from, to] in hours.
func workerHours(ms []*Member, from, to time.Time) float64 {
	var h float64
	for _, m := range ms {
		end := m.Ended
		if end.IsZero() || end.After(to) {
			end = to
		}
		start := m.Started
		if start.Before(from) {
			start = from
		}
		if end.After(start) {
			h += end.Sub(start).Hours()
		}
	}
	return h
}

// kindsOps are the operations SCALE.md's by-kind table names one by one
// (the rest summed as "other"): the claims, the holders' and the watches'
// record reads, the listings of orphans, the session reads.
var kindsOps = []string{dynamostore.OpAcquire, dynamostore.OpGetWorker, dynamostore.OpUnowned, dynamostore.OpGet, dynamostore.OpOwnedBy}

// kindsMarkdown is SCALE.md's table of the read units and refused acquires
// by kind, the whole run's beside the steady window's.
func kindsMarkdown(runs []Measured) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## Reads and refused acquires by kind\n\n")
	p("Per worker-hour, by `lease.Store` operation (simddb's meter), over the whole run (the ramp's start of every\n")
	p("session included) and over the steady window (`steady`: from twice the ramp, or the first second every\n")
	p("session delivers, to the first fault or the end). `acquire`'s read units are the classifying reads of its\n")
	p("refused writes; `get_worker` is the watches' consistent reads (2 records every half heartbeat: 14,400 a\n")
	p("worker-hour) plus the reads of a holder's record after a claim lost a race; acquires per session started\n")
	p("count every acquire of the run (both paths: the work queue's and the reconciler's), and of them \"held\"\n")
	p("the ones refused because another worker held the session (a lost race).\n\n")
	p("| run | window | read units | acquires per session started (held) | acquire: calls / refused / read units | get_worker: calls / read units | unowned: calls / read units | get: calls / read units | owned_by: calls / read units | other read units |\n")
	p("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range runs {
		t, s := m.Table, m.Steady
		row := func(window string, ops map[string]OpRate, total string, acq string) {
			p("| %s | %s | %s | %s", runLabel(runs, m), window, total, acq)
			other := readUnitsOf(ops)
			for _, op := range kindsOps {
				r := ops[op]
				other -= r.ReadUnits
				if op == dynamostore.OpAcquire {
					p(" | %.0f / %.0f / %.0f", r.Calls, r.Refused, r.ReadUnits)
				} else {
					p(" | %.0f / %.0f", r.Calls, r.ReadUnits)
				}
			}
			p(" | %.0f |\n", other)
		}
		if len(t.Ops) == 0 {
			continue // a report written before these figures
		}
		acq := fmt.Sprintf("%.2f (%.2f)", t.AcquiresPerSession, t.AcquiresHeldPerSession)
		row("whole run", t.Ops, fmt.Sprintf("%.0f", readUnitsOf(t.Ops)), acq)
		if s.WorkerHours > 0 {
			row(fmt.Sprintf("steady %.0f–%.0f s", s.From, s.To), s.Ops, fmt.Sprintf("%.0f", s.ReadUnitsPerWorkerHour), "–")
		}
	}
	first := true
	for _, m := range runs {
		c := m.Claims
		if c.Budget <= 0 || c.Total == 0 {
			continue
		}
		if first {
			p("\nClaims against the fleet claim budget (`WSFLEET_FLEET_CLAIMS_PER_SECOND`): the workers' acquires (refused\n")
			p("ones included; not a directed hand-off's given tenure, which its sender paces), the busiest %.0f s of the run.\n\n", ClaimWindow.Seconds())
			first = false
		}
		p("- %s: %d claims; busiest %.0f s from %.0f s: %.1f claims/s, %.2f × the budget of %g/s\n",
			runLabel(runs, m), c.Total, ClaimWindow.Seconds(), c.At, c.Busiest, c.Busiest/c.Budget, c.Budget)
	}
	first = true
	for _, m := range runs {
		if len(m.Claims.Paths) == 0 {
			continue
		}
		if first {
			p("\nThe workers' claims by the path that sent them and their outcome (workers/streamer claimpath.go: `queue`\n")
			p("a start notification, `reconcile` a reconcile pass, `own` a takeover's own part, `takeover` a takeover's part told\n")
			p("to a receiver, `move` and `given` hand-offs, `audit` a claim back), from the first fault on (the whole run\n")
			p("without one): a claim refused because another worker held the session (`held_elsewhere`) took a claim slot.\n\n")
			first = false
		}
		p("- %s, from %.0f s: %s\n", runLabel(runs, m), m.Claims.From, pathsLine(m.Claims.Paths))
		if len(m.Claims.Windows) > 0 {
			p("  - per %.0f s from then (claims / acquired per second, the budget's: every path but `given`): %s\n",
				ClaimWindow.Seconds(), windowsLine(m.Claims.Windows))
		}
	}
	return b.String()
}

// windowsLine is ClaimRate.Windows as one line: "+Ns a/b" per window,
// seconds from the first.
func windowsLine(ws []ClaimSpan) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("+%.0f s %.0f / %.0f", w.At-ws[0].At, float64(w.Claims)/ClaimWindow.Seconds(), float64(w.Acquired)/ClaimWindow.Seconds())
	}
	return strings.Join(parts, ", ")
}

// pathsLine is claims by "path outcome" as one line, by path, the
// largest counts first within each.
func pathsLine(paths map[string]int64) string {
	byPath := map[string][]string{}
	var order []string
	keys := slices.Sorted(maps.Keys(paths))
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(paths[b], paths[a]) })
	for _, k := range keys {
		path, outcome, _ := strings.Cut(k, " ")
		if byPath[path] == nil {
			order = append(order, path)
		}
		byPath[path] = append(byPath[path], fmt.Sprintf("%d %s", paths[k], strings.ReplaceAll(outcome, "_", " ")))
	}
	parts := make([]string, len(order))
	for i, path := range order {
		parts[i] = fmt.Sprintf("`%s` %s", path, strings.Join(byPath[path], ", "))
	}
	return strings.Join(parts, "; ")
}
