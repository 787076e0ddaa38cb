// The capacity phase's side-by-side runs in the report: issue 27's goals
// judged on them and section 5's table of the worker against the bare
// client.

package bench

import (
	"fmt"
	"strings"
)

// compareGoals are issue 27's goals on the side-by-side runs at a set rate
// on the default transport: memory per session (RSS above the idle
// process) ≤ the bare client's + GoalMemOverBareKiB, CPU per 1,000 msg/s
// ≤ GoalCPUOverBare × the bare client's.
func compareGoals(r *Report) []Goal {
	c := r.Capacity
	if c == nil {
		return nil
	}
	var gs []Goal
	for _, x := range c.Compare {
		if x.Transport != c.Transport || !x.paced() || x.Worker.Held == 0 || x.Bare.Held == 0 {
			continue
		}
		label := fmt.Sprintf("%s, %s", x.Label(), x.Transport)
		gs = append(gs, judged("memory per session against the bare client, "+label,
			fmt.Sprintf("%.1f vs %.1f KiB (%+.1f)", x.Worker.RSSAboveIdleKB, x.Bare.RSSAboveIdleKB, x.Diff.RSSAboveIdleKB),
			fmt.Sprintf("≤ bare + %g KiB", GoalMemOverBareKiB), x.Diff.RSSAboveIdleKB <= GoalMemOverBareKiB,
			fmt.Sprintf("+%.1f KiB", x.Diff.RSSAboveIdleKB-GoalMemOverBareKiB)))
		gs = append(gs, judgedIf(x.Ratio.CPUPer1k > 0, "CPU per 1,000 msg/s against the bare client, "+label,
			fmt.Sprintf("×%.2f (%.2f vs %.2f %%)", x.Ratio.CPUPer1k, x.Worker.CPUPer1k, x.Bare.CPUPer1k),
			fmt.Sprintf("≤ %g× bare", GoalCPUOverBare), x.Ratio.CPUPer1k <= GoalCPUOverBare,
			fmt.Sprintf("×%.2f over (+%.2f points)", x.Ratio.CPUPer1k/GoalCPUOverBare, x.Worker.CPUPer1k-GoalCPUOverBare*x.Bare.CPUPer1k)))
	}
	return gs
}

// renderCompare writes section 5's side-by-side table, the goals' verdicts
// and the charts.
func renderCompare(p printer, r *Report) {
	c := r.Capacity
	if c == nil || len(c.Compare) == 0 {
		return
	}
	p("### Worker against a bare client (same feed, same N, one after the other)\n\n")
	p("Every size runs twice on the same feed process: the worker, then (the worker stopped) bin/bareclient, the same number of connections doing nothing but reading and discarding (settings above). Per session = above the idle process of the same kind and transport (idle figures below), divided by the sessions held, and for the worker without the lease table it seeded (bin/memstreamer's lease store is in its process, the stand-in for DynamoDB's table, which the shipped worker keeps out of its process: its live heap right after seeding, below); \"RSS ÷ N\" subtracts neither. The goals are judged on **%s**%s.\n\n", c.Transport, transportNote(c.Transport))
	p("| size | transport | client | held | msg/s | CPU (%% of a core) | CPU per 1,000 msg/s | msg/s per core | RSS per session (RSS ÷ N) | heap per session | stacks per session | goroutines per session | RSS mean | reconnects in the window (dialled again since the start; failed dials) | load start → end |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range c.Compare {
		size := x.Label()
		row := func(who string, f ClientFigures) {
			if f.Error != "" && f.Held == 0 {
				p("| %s | %s | %s | failed: %s | | | | | | | | | | | |\n", size, x.Transport, who, oneLine(f.Error))
				return
			}
			// One session's memory is the process's (RSS mean): per
			// session above the idle process it is noise.
			mem := fmt.Sprintf("%.1f KiB (%.1f) | %.1f KiB | %.1f KiB | %.2f", f.RSSAboveIdleKB, f.RSSPerSessKB, f.HeapPerSessKB, f.StackPerSessKB, f.GoroutinesPerSess)
			if !x.paced() {
				mem = "— | — | — | —"
			}
			p("| %s | %s | %s | %s | %s | %.1f %% | %.2f %% | %s | %s | %.0f MiB | %d (%s; %s) | %s → %s |\n",
				size, x.Transport, who, thousands(f.Held), thousands(int(f.MsgRate+0.5)), f.CPUPct, f.CPUPer1k, thousands(int(f.MsgPerCore+0.5)),
				mem, f.RSSMeanMB, f.Reconnects, thousands(int(f.Redials)), thousands(int(f.DialErrors)), f.LoadStart, f.LoadEnd)
		}
		row("wsfleet", x.Worker)
		row("bare client", x.Bare)
		d, q := x.Diff, x.Ratio
		dm := fmt.Sprintf("%+.1f KiB (%+.1f) | %+.1f KiB | %+.1f KiB | %+.2f", d.RSSAboveIdleKB, d.RSSKB, d.HeapKB, d.StackKB, d.GoroutinesPerSess)
		qm := fmt.Sprintf("%s (%s) | %s | %s | %s", times(q.RSSAboveIdleKB), times(q.RSSKB), times(q.HeapKB), times(q.StackKB), times(q.GoroutinesPerSess))
		dr, qr := "", ""
		if !x.paced() {
			dm, qm = "— | — | — | —", "— | — | — | —"
			dr, qr = fmt.Sprintf("%+.0f MiB", x.Worker.RSSMeanMB-x.Bare.RSSMeanMB), times(ratio(x.Worker.RSSMeanMB, x.Bare.RSSMeanMB))
		}
		p("| %s | %s | wsfleet − bare | | | %+.1f points | %+.2f points | %s | %s | %s | | |\n",
			size, x.Transport, x.Worker.CPUPct-x.Bare.CPUPct, d.CPUPer1k, signedThousands(d.MsgPerCore), dm, dr)
		p("| %s | %s | wsfleet ÷ bare | | | %s | %s | %s | %s | %s | | |\n",
			size, x.Transport, times(ratio(x.Worker.CPUPct, x.Bare.CPUPct)), times(q.CPUPer1k), times(q.MsgPerCore), qm, qr)
	}
	p("\nIdle processes (no session) the per-session figures are taken above (RSS after 3 s; heap and stacks in use after a collection):\n\n| process | transport | RSS | heap in use | stacks in use | goroutines |\n|---|---|---|---|---|---|\n")
	for _, f := range c.Idle {
		who := "wsfleet worker"
		if f.Kind == KindBare {
			who = "bare client"
		}
		p("| %s | %s | %.1f MiB | %.1f MiB | %.2f MiB | %d |\n", who, f.Transport, f.RSSMB, f.HeapInuseMB, f.StackInuseMB, f.Goroutines)
	}
	p("\n")
	renderStores(p, c.Compare)
	var verdicts []string
	for _, g := range compareGoals(r) {
		v := "**met**"
		if !g.Met {
			v = "**missed** by " + g.Miss
		}
		verdicts = append(verdicts, fmt.Sprintf("- %s: %s, goal %s: %s", g.Figure, g.Measured, g.Goal, v))
	}
	if len(verdicts) > 0 {
		p("Goals (issue 27, from the ratios above on %s): memory per session ≤ the bare client's + %g KiB, CPU per 1,000 msg/s ≤ %g× the bare client's.\n\n%s\n\n", c.Transport, GoalMemOverBareKiB, GoalCPUOverBare, strings.Join(verdicts, "\n"))
	}
	for _, f := range c.Charts {
		p("![%s](%s)\n\n", chartTitle(f), f)
	}
}

// renderStores lists the worker's seeded table per run (ClientFigures.
// StoreMB), taken out of its per-session figures.
func renderStores(p printer, xs []CapCompare) {
	var runs []string
	for _, x := range xs {
		if f := x.Worker; f.StoreMB > 0 && f.Held > 0 && x.paced() { // one session's memory is the process's
			runs = append(runs, fmt.Sprintf("%s on %s %.1f MiB (%.0f B a session)", x.Label(), x.Transport, f.StoreMB, f.StoreMB*(1<<20)/float64(f.Held)))
		}
	}
	if len(runs) > 0 {
		p("The worker's seeded lease table (the in-process stand-in for DynamoDB's; HeapAlloc after a collection, after seeding less before; the owner and epoch the acquires later write on each item are not counted), taken out of its per-session figures above: %s.\n\n", strings.Join(runs, "; "))
	}
}

// times formats a ratio ("—" when undefined).
func times(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("×%.2f", v)
}

func signedThousands(v float64) string {
	if v >= 0 {
		return "+" + thousands(int(v+0.5))
	}
	return "−" + thousands(int(-v+0.5))
}

func transportNote(t string) string {
	if t == "ws" {
		return " (this run's -plain-ws)"
	}
	return " (ws:// beside it for comparison)"
}
