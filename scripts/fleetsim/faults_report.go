//go:build fleetsim

package fleetsim

import (
	"fmt"
	"strings"
)

// faultsMarkdown is docs/SCALE.md's section on the fault scenarios
// (faults.go): every run's first delivery and source refusals, and every
// judged fault with its own bound and quiet span.
func faultsMarkdown(runs []Measured) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("## Fault scenarios and first delivery\n\n")
	p("`ddb-down`: the table unreachable for every worker for 60 s at the fault time (each call hangs until its deadline,\n")
	p("then fails with the SDK's error); judged from the outage's end over every session, and no delivery may\n")
	p("happen from the TTL after it began to its end (`unfenced`: each worker must have stopped on its own).\n")
	p("`burst-start`: every session started within one minute. `source-limit`: every session on one host that\n")
	p("refuses a worker's address (each worker dials from its own) beyond 300 attempts per 5 min (Binance's\n")
	p("limit; refused attempts count) with HTTP 429; the busiest worker is killed at the fault time; `source-limit-paced`:\n")
	p("the same with every worker told the limit (`WSFLEET_DIAL_LIMITS`). `crash-big`: one\n")
	p("worker takes every session, the others start 30 s after the ramp (rebalancing off, so it keeps them all\n")
	p("until), and it is killed at the fault time, 30 s after they started at the earliest. `lag-sweep`: `by_owner` held 60 s behind (twice\n")
	p("`IndexLagBound`) while a new session is acquired, its owner killed at once: that session's bound is the\n")
	p("README's (the lag plus `DoneSweepEvery`) plus 5 s. Delivering again: from the fault (for a `term`, an upper\n")
	p("bound of the dark time); dark: the exact dark time of the tenure change that ended each session's recovery,\n")
	p("and of the run's rebalancing moves (the judge's; how many measured in brackets).\n\n")
	p("| scenario | first delivery from the start write p50 / p99 / max | source refusals | moves: dark p50 / p99 / max | fault | sessions | delivering again | p50 / p99 / max | dark p50 / p99 / max | bound | unfenced |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range runs {
		fd := fmt.Sprintf("%.1f / %.1f / %.1f s", m.FirstDelivery.P50, m.FirstDelivery.P99, m.FirstDelivery.Max)
		if len(m.Faults) == 0 {
			p("| %s | %s | %d | %s | – | – | – | – | – | – | – |\n", runLabel(runs, m), fd, m.SourceRefused, m.Moves)
		}
		for _, r := range m.Faults {
			bound := "default"
			if r.Bound > 0 {
				bound = fmt.Sprintf("%.0f s", r.Bound)
			}
			p("| %s | %s | %d | %s | %s at %.0f s | %d | %d | %.1f / %.1f / %.1f s | %s | %s | %d |\n", runLabel(runs, m), fd, m.SourceRefused, m.Moves,
				r.Kind, r.At, r.Sessions, r.Recovered, r.P50, r.P99, r.Max, r.Dark, bound, r.Unfenced)
		}
	}
	p("\n")
	return b.String()
}
