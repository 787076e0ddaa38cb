package bench

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
)

// Report is everything one run measured (docs/benchmarks.json) and what
// docs/BENCHMARKS.md is rendered from.
type Report struct {
	Mode       Mode            `json:"mode"`
	Invocation string          `json:"invocation"`
	Sizes      string          `json:"sizes"`
	Started    time.Time       `json:"started"`
	Finished   time.Time       `json:"finished"`
	Machine    Machine         `json:"machine"`
	LoadBefore LoadAvg         `json:"load_before_wait"`
	LoadStart  LoadAvg         `json:"load_start"`
	LoadEnd    LoadAvg         `json:"load_end"`
	Quiet      *QuietWait      `json:"quiet_wait,omitempty"`
	Micro      *MicroResult    `json:"micro,omitempty"`
	Claim      *ClaimResult    `json:"claim,omitempty"`
	Failover   *HandoverResult `json:"failover,omitempty"`
	Handoff    *HandoverResult `json:"handoff,omitempty"`
	// HandoffSmall: fewer sessions per SIGTERM (full mode).
	HandoffSmall *HandoverResult   `json:"handoff_small,omitempty"`
	Stop         *StopResult       `json:"stop,omitempty"`
	Rebalance    *RebalanceResult  `json:"rebalance,omitempty"`
	Cost         *CostResult       `json:"cost,omitempty"`
	Reads        *ReadsResult      `json:"reads,omitempty"`
	Capacity     *CapacityResult   `json:"capacity,omitempty"`
	Dynalite     *DynaliteResult   `json:"dynalite,omitempty"`
	Throughput   *ThroughputResult `json:"throughput,omitempty"`
	Errors       map[string]string `json:"errors,omitempty"`
	// Reruns are later runs of some phases merged into this report (bench
	// -merge); those phases' figures are from them.
	Reruns []Rerun `json:"reruns,omitempty"`
}

// Rerun is one later run of some phases, merged into a report.
type Rerun struct {
	Phases     []string  `json:"phases"`
	Invocation string    `json:"invocation"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished"`
	Commit     string    `json:"commit"`
}

// QuietWait records the wait for a quiet machine before the run.
type QuietWait struct {
	Threshold float64 `json:"threshold"`
	Waited    string  `json:"waited"`
	Quiet     bool    `json:"quiet"`
}

// Phase is what every figure states besides its values.
type Phase struct {
	Command   string            `json:"command"`
	Started   time.Time         `json:"started"`
	Seconds   float64           `json:"seconds"`
	LoadStart LoadAvg           `json:"load_start"`
	LoadEnd   LoadAvg           `json:"load_end"`
	Settings  map[string]string `json:"settings"`
}

// Goal is one stated goal and how the run did against it.
type Goal struct {
	Figure   string
	Measured string
	Goal     string
	Met      bool
	Known    bool // false: not measured in this run
	Miss     string
}

// Goals evaluates the goals against the report.
func Goals(r *Report) []Goal {
	var gs []Goal
	if c := r.Claim; c != nil && c.SQS.N > 0 {
		g := Goal{Figure: "Claim latency via SQS, p99", Measured: ms(c.SQS.P99), Goal: "≤ 100 ms", Known: true, Met: c.SQS.P99 <= 100}
		if !g.Met {
			g.Miss = fmt.Sprintf("+%s (×%.1f)", ms(c.SQS.P99-100), c.SQS.P99/100)
		}
		gs = append(gs, g)
	}
	if f := r.Failover; f != nil && f.Gap.N > 0 {
		g := Goal{Figure: "Crash failover (kill -9 → first message by the new owner), p99", Measured: ms(f.Gap.P99), Goal: "≤ TTL + 1 s = " + ms(f.GoalP99Ms), Known: true, Met: f.Gap.P99 <= f.GoalP99Ms && f.Unrecovered == 0}
		if !g.Met {
			g.Miss = fmt.Sprintf("+%s", ms(f.Gap.P99-f.GoalP99Ms))
			if f.Unrecovered > 0 {
				g.Miss += fmt.Sprintf("; %d session(s) never recovered", f.Unrecovered)
			}
		}
		gs = append(gs, g)
		g2 := Goal{Figure: "Crash failover: messages lost / skipped (the no-loss check)", Measured: fmt.Sprintf("%d / %d", f.Lost, f.Gaps), Goal: "0 / 0", Known: true, Met: f.Lost == 0 && f.Gaps == 0}
		if !g2.Met {
			g2.Miss = fmt.Sprintf("%d lost, %d skipped", f.Lost, f.Gaps)
		}
		gs = append(gs, g2)
	}
	for _, h := range []*HandoverResult{r.Handoff, r.HandoffSmall} {
		if h == nil || h.Gap.N == 0 {
			continue
		}
		what := fmt.Sprintf("%d sessions per SIGTERM", h.SessionsPerRound)
		g := Goal{Figure: "Graceful handoff: a session's dark time (old connection closed at the source → first message by the new owner), p99, " + what,
			Measured: ms(h.Dark.P99), Goal: "≤ 250 ms", Known: true, Met: h.Dark.N > 0 && h.Dark.P99 <= 250}
		if !g.Met {
			g.Miss = fmt.Sprintf("+%s (×%.1f)", ms(h.Dark.P99-250), h.Dark.P99/250)
		}
		gs = append(gs, g)
		deadline := float64(DefaultShutdownDeadline.Milliseconds())
		gd := Goal{Figure: "Graceful handoff: SIGTERM → the last session's first message by its new owner (the drain), " + what,
			Measured: ms(h.Gap.Max), Goal: "≤ the shutdown deadline, " + ms(deadline), Known: true, Met: h.Gap.Max <= deadline}
		if !gd.Met {
			gd.Miss = fmt.Sprintf("+%s", ms(h.Gap.Max-deadline))
		}
		gs = append(gs, gd)
		g2 := Goal{Figure: "Graceful handoff: messages lost / duplicated, " + what, Measured: fmt.Sprintf("%d / %d", h.Lost, h.Duplicated), Goal: "0 / 0", Known: true, Met: h.Lost == 0 && h.Duplicated == 0}
		if !g2.Met {
			g2.Miss = fmt.Sprintf("%d lost, %d duplicated", h.Lost, h.Duplicated)
		}
		gs = append(gs, g2)
	}
	if s := r.Stop; s != nil {
		for _, x := range []struct {
			what string
			d    Dist
		}{{"reaching the owner", s.Owner}, {"reaching a non-owner", s.NonOwner}, {"reaching no worker (mailbox only)", s.Mailbox}} {
			if x.d.N == 0 {
				continue
			}
			g := Goal{Figure: "POST stop → connection closed at the source, p99, notification " + x.what, Measured: ms(x.d.P99), Goal: "≤ " + ms(s.GoalP99Ms), Known: true, Met: x.d.P99 <= s.GoalP99Ms && s.Unclosed == 0}
			if !g.Met {
				g.Miss = fmt.Sprintf("+%s", ms(x.d.P99-s.GoalP99Ms))
				if s.Unclosed > 0 {
					g.Miss = fmt.Sprintf("%s; %d stop(s) never closed", g.Miss, s.Unclosed)
				}
			}
			gs = append(gs, g)
		}
	}
	if rb := r.Rebalance; rb != nil && rb.Sessions > 0 && len(rb.LoadsAtJoin) > 0 {
		what := fmt.Sprintf("%s sessions, %d → %d workers", thousands(rb.Sessions), rb.WorkersBefore, rb.WorkersAfter)
		g := Goal{Figure: "Rebalancing: join → every worker within ±10 % of its share, " + what, Known: true,
			Goal: "≤ " + ms(rb.GoalToBalancedMs), Met: rb.ToBalancedMs >= 0 && rb.ToBalancedMs <= rb.GoalToBalancedMs}
		g.Measured = "never"
		if rb.ToBalancedMs >= 0 {
			g.Measured = ms(rb.ToBalancedMs)
		}
		if !g.Met {
			g.Miss = "not balanced in time"
			if rb.ToBalancedMs >= 0 {
				g.Miss = "+" + ms(rb.ToBalancedMs-rb.GoalToBalancedMs)
			}
		}
		gs = append(gs, g)
		g = Goal{Figure: "Rebalancing: moves made ÷ the minimum to reach ±10 %", Measured: fmt.Sprintf("%d ÷ %d = %.2f", rb.Moves, rb.MinMoves, rb.Ratio),
			Goal: "≤ 1.2", Known: true, Met: rb.MinMoves > 0 && rb.Ratio <= 1.2}
		if !g.Met {
			g.Miss = fmt.Sprintf("%.2f", rb.Ratio)
		}
		gs = append(gs, g)
		g = Goal{Figure: "Rebalancing: gap per move (the source's dark time), p99", Measured: ms(rb.Gap.P99), Goal: "≤ 500 ms", Known: true, Met: rb.Gap.N > 0 && rb.Gap.P99 <= 500}
		if !g.Met {
			g.Miss = "+" + ms(rb.Gap.P99-500)
		}
		gs = append(gs, g)
		g = Goal{Figure: "Rebalancing: messages lost / duplicated; sessions moved twice within the minimum hold", Measured: fmt.Sprintf("%d / %d; %d", rb.Lost, rb.Duplicated, rb.MovedTwiceWithinHold),
			Goal: "0 / 0; 0", Known: true, Met: rb.Lost == 0 && rb.Gaps == 0 && rb.Duplicated == 0 && rb.MovedTwiceWithinHold == 0 && len(rb.Violations) == 0}
		if !g.Met {
			g.Miss = fmt.Sprintf("%d lost, %d skipped, %d duplicated, %d moved twice, %d violation(s)", rb.Lost, rb.Gaps, rb.Duplicated, rb.MovedTwiceWithinHold, len(rb.Violations))
		}
		gs = append(gs, g)
	}
	if c := r.Cost; c != nil && c.Active != nil && c.Active.WorkerHours > 0 {
		a := c.Active
		tot := a.Steady.Total.NormWRUPerSH
		lo := a.Steady.Category(dynamostore.CatLiveness).NormWRUPerSH + a.Steady.Category(dynamostore.CatOwnership).NormWRUPerSH
		add := func(fig string, v, limit float64, unit string) {
			g := Goal{Figure: fig, Measured: fmt.Sprintf("%.2f%s", v, unit), Goal: fmt.Sprintf("≤ %g%s", limit, unit), Known: true, Met: v <= limit}
			if !g.Met {
				g.Miss = fmt.Sprintf("+%.2f", v-limit)
			}
			gs = append(gs, g)
		}
		add("Write units per session-hour at the defaults (1,000 sessions per worker, 1 msg/s)", tot, 64, "")
		add("— of which liveness + ownership", lo, 4, "")
		if i := c.Idle; i != nil && i.WorkerHours > 0 {
			add("Write units per idle session-hour at the defaults", i.Steady.Total.NormWRUPerSH, 4, "")
		}
		g := Goal{Figure: "Table ceiling (40,000 WRU/s ÷ write units per session-second at the defaults)", Measured: thousands(c.TableCeiling) + " sessions", Goal: "≥ 1,000,000", Known: true, Met: c.TableCeiling >= 1_000_000}
		if !g.Met {
			g.Miss = thousands(1_000_000-c.TableCeiling) + " sessions short"
		}
		gs = append(gs, g)
		idx := a.IndexWritesInWindow
		if c.Idle != nil {
			idx += c.Idle.IndexWritesInWindow
		}
		g = Goal{Figure: "Index write units in the steady windows (no hot index key)", Measured: fmt.Sprint(idx), Goal: "0", Known: true, Met: idx == 0}
		if !g.Met {
			g.Miss = fmt.Sprintf("%d index write units", idx)
		}
		gs = append(gs, g)
	}
	if rd := r.Reads; rd != nil && len(rd.Runs) >= 2 && rd.Runs[0].RRUPerWH > 0 {
		a, b := rd.Runs[0], rd.Runs[len(rd.Runs)-1]
		ratio := b.RRUPerWH / a.RRUPerWH
		g := Goal{Figure: fmt.Sprintf("Read units per worker-hour, %d workers ÷ %d workers (N² reads would be ×%d)", b.Workers, a.Workers, b.Workers/max(a.Workers, 1)), Measured: fmt.Sprintf("%.0f ÷ %.0f = ×%.2f", b.RRUPerWH, a.RRUPerWH, ratio), Goal: "about ×1 (< ×2)", Known: true, Met: ratio < 2}
		if !g.Met {
			g.Miss = fmt.Sprintf("×%.2f", ratio)
		}
		gs = append(gs, g)
	}
	if t := r.Throughput; t != nil {
		gs = append(gs, throughputGoals(t)...)
	}
	if c := r.Capacity; c != nil {
		for _, run := range c.Runs {
			if run.Held == 0 {
				continue
			}
			label := fmt.Sprintf("%s sessions × %g msg/s%s", thousands(run.Held), run.Rate, envLabel(run.Env))
			if run.Rate <= 1 {
				g := Goal{Figure: "RSS per session, " + label, Measured: fmt.Sprintf("%.1f KiB", run.RSSPerSessKB), Goal: "≤ 32 KiB", Known: true, Met: run.RSSPerSessKB <= 32}
				if !g.Met {
					g.Miss = fmt.Sprintf("+%.1f KiB (+%.0f %%)", run.RSSPerSessKB-32, 100*(run.RSSPerSessKB/32-1))
				}
				gs = append(gs, g)
			}
			g := Goal{Figure: "CPU per 1,000 msg/s, " + label, Measured: fmt.Sprintf("%.2f %% of a core", run.CPUPer1k), Goal: "≤ 2.5 %", Known: true, Met: run.CPUPer1k <= 2.5}
			if !g.Met {
				g.Miss = fmt.Sprintf("+%.2f points (×%.1f)", run.CPUPer1k-2.5, run.CPUPer1k/2.5)
			}
			gs = append(gs, g)
		}
	}
	return gs
}

// Render writes the report as Markdown.
func Render(r *Report) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# wsfleet benchmarks\n\n")
	p("<!-- Generated by scripts/bench (make bench / make bench-full); do not edit by hand. -->\n\n")
	if r.Mode == Quick {
		p("**Mode: quick** (`make bench`, ≤ 5 minutes): smaller counts than the goals are stated for. ")
		p("`make bench-full` runs the full sizes: 19,000 sessions on one worker (and again with Go's default GOGC=100 against the binary's 50), 5,000 at 10 msg/s, dynalite stepped from 2,000 sessions until it is the bottleneck, 3 rounds of failover and handoff, more claim samples, a 90 s cost window.\n\n")
	} else {
		p("**Mode: full** (`make bench-full`). `make bench` runs a quick mode (≤ 5 minutes) with smaller counts.\n\n")
	}
	if r.Sizes != "" {
		p("Sizes of this run: %s.\n\n", r.Sizes)
	}
	m := r.Machine
	p("| run | |\n|---|---|\n")
	p("| command | `%s` |\n", r.Invocation)
	p("| date | %s → %s (%s) |\n", r.Started.Format("2006-01-02 15:04:05 UTC"), r.Finished.Format("15:04:05 UTC"), r.Finished.Sub(r.Started).Round(time.Second))
	p("| machine | %d cores (%s), %s MiB memory, Linux %s, open files %s |\n", m.Cores, m.CPU, thousands(int(m.MemoryMB)), m.Kernel, m.NoFile)
	p("| build | %s, commit %s |\n", m.Go, m.Commit)
	if q := r.Quiet; q != nil {
		state := "quiet"
		if !q.Quiet {
			state = "NOT quiet (gave up waiting)"
		}
		p("| quiet wait | waited %s for the 1-minute load to drop below %.2f (from %s): %s |\n", q.Waited, q.Threshold, r.LoadBefore, state)
	}
	p("| load average (1/5/15 min) | start %s, end %s |\n", r.LoadStart, r.LoadEnd)
	for _, rr := range r.Reruns {
		p("| re-run: %s | `%s`, %s → %s, commit %s (same machine kind; each phase states its own load) |\n", strings.Join(rr.Phases, ", "), rr.Invocation,
			rr.Started.Format("2006-01-02 15:04:05 UTC"), rr.Finished.Format("15:04:05 UTC"), rr.Commit)
	}
	p("\n")
	p("The machine is shared; every phase below states the load average at its start and end. All processes (engines, feed, ingest, workers, driver) run on this one machine.\n\n")

	if len(r.Errors) > 0 {
		p("## Phases that failed\n\n")
		var ks []string
		for k := range r.Errors {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			p("- **%s**: %s\n", k, oneLine(r.Errors[k]))
		}
		p("\n")
	}

	p("## Goals\n\n| figure | measured | goal | met | missed by |\n|---|---|---|---|---|\n")
	for _, g := range Goals(r) {
		met := "yes"
		if !g.Met {
			met = "**no**"
		}
		p("| %s | %s | %s | %s | %s |\n", g.Figure, g.Measured, g.Goal, met, g.Miss)
	}
	p("\nWhere a goal is missed, its section says what bounds it.\n\n")

	renderClaim(p, r)
	renderHandover(p, r.Failover, "2. Crash failover: kill -9 of the owner → first message by the new owner")
	renderHandover(p, r.Handoff, "3. Graceful handoff: SIGTERM of the owner → first message by the new owner")
	if r.HandoffSmall != nil {
		renderHandover(p, r.HandoffSmall, fmt.Sprintf("3b. Graceful handoff, %d sessions per SIGTERM", r.HandoffSmall.SessionsPerRound))
	}
	renderStop(p, r)
	renderRebalance(p, r)
	renderCapacity(p, r)
	renderDynalite(p, r)
	renderCost(p, r)
	renderReads(p, r)
	renderThroughput(p, r)
	renderMicro(p, r)
	return b.String()
}

type printer func(format string, a ...any)

func renderPhase(p printer, ph Phase) {
	p("- command: `%s` (machine and date above; phase took %.0f s; load %s → %s)\n", ph.Command, ph.Seconds, ph.LoadStart, ph.LoadEnd)
	var ks []string
	for k := range ph.Settings {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		p("- %s: %s\n", k, ph.Settings[k])
	}
	p("\n")
}

func distRow(p printer, name string, d Dist) {
	if d.N == 0 {
		p("| %s | 0 | | | | | |\n", name)
		return
	}
	note := ""
	if d.N < 200 {
		note = " (n < 200: p99 indicative)"
	}
	p("| %s | %d%s | %s | %s | %s | %s | %s |\n", name, d.N, note, ms(d.Min), ms(d.P50), ms(d.P90), ms(d.P99), ms(d.Max))
}

const distHeader = "| | samples | min | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|---|\n"

func renderClaim(p printer, r *Report) {
	c := r.Claim
	if c == nil {
		return
	}
	p("## 1. Claim latency: POST /sessions → first message at the sink\n\n")
	renderPhase(p, c.Phase)
	p(distHeader)
	distRow(p, "via SQS (start notification)", c.SQS)
	distRow(p, "— of which the POST round trip", c.SQSPost)
	distRow(p, "via reconciliation alone (no consumer)", c.Reconcile)
	p("\n")
	if c.SQSTimeouts+c.ReconcileTimeouts > 0 {
		p("Samples that saw no message within the timeout (10 s SQS, 30 s reconcile): %d via SQS, %d via reconciliation.\n\n", c.SQSTimeouts, c.ReconcileTimeouts)
	}
	feedMs := 1000 / c.FeedRate
	if c.SQS.N > 0 {
		p("On the SQS path the p50 of %s is: the POST (ingest writes the item, then sends the notification: p50 %s), the worker's long poll returning, the conditional acquire on dynalite, the WebSocket dial, and the feed's first message, produced %s after the connection opens. ",
			ms(c.SQS.P50), ms(c.SQSPost.P50), ms(feedMs))
		if c.SQS.P99 > 100 {
			p("The goal (p99 ≤ 100 ms) is missed by %s; the tail above p90 (%s) is where the engines on this shared 2-core machine (dynalite and fauxqs are single-threaded Node processes) stall a request. ", ms(c.SQS.P99-100), ms(c.SQS.P90))
		}
		p("\n\n")
	}
	if c.Reconcile.N > 0 {
		p("Without notifications a new session waits for the next reconcile pass of either worker: each passes every 5 s ± 20 %%, so the wait is at most 6 s plus the claim path, about 5 s / (workers + 1) = %s on average with %d workers (measured mean %s). The reconcile pass is a safety net; it bounds how long a start whose notification was lost stays dark.\n\n",
			ms(5000.0/float64(c.Workers+1)), c.Workers, ms(c.Reconcile.Mean))
	}
}

func renderHandover(p printer, h *HandoverResult, title string) {
	if h == nil {
		return
	}
	p("## %s\n\n", title)
	renderPhase(p, h.Phase)
	p(distHeader)
	if h.Dark.N > 0 && h.Kind == kindTerm {
		distRow(p, "old connection closed at the source → first message by another worker (the session's dark time)", h.Dark)
	}
	distRow(p, "signal → first message by another worker", h.Gap)
	for i, d := range h.PerRound {
		distRow(p, fmt.Sprintf("— round %d", i+1), d)
	}
	distRow(p, "signal → old connection closed at the source", h.OldClosed)
	distRow(p, "signal → new owner's connection opened", h.NewOpened)
	distRow(p, "new connection opened → first message at the sink", h.OpenToFirst)
	if h.VictimRelease.N > 0 {
		distRow(p, "the victim's release per session (one write: the session item with the final checkpoint as release_seq, reserved for the receiver; conditional on owner and epoch)", h.VictimRelease)
	}
	if h.VictimPublish.N > 0 {
		distRow(p, "the victim telling the receiver per session (POST /handoff; a start notification when it cannot)", h.VictimPublish)
	}
	if h.NotifyToOpen.N > 0 {
		distRow(p, "receiver told → new connection open (the survivors' ClaimLatencyMs: admission, acquire and fence, dial)", h.NotifyToOpen)
	}
	if h.KillToDead.N > 0 {
		distRow(p, "kill → victim declared dead (its record's ended_at_ms: sessions takeable)", h.KillToDead)
		distRow(p, "declared dead → first message by the new owner", h.DeadToFirst)
	}
	p("\n")
	p("| judged from the feed's and the sinks' records | |\n|---|---|\n")
	p("| sessions never delivered again | %d |\n", h.Unrecovered)
	p("| messages lost (sent by the feed, never delivered) | %d |\n", h.Lost)
	p("| messages skipped (never sent: the new owner resumed past them) | %d |\n", h.Gaps)
	if h.Kind == "sigterm" {
		p("| messages duplicated across the handoff | %d |\n", h.Duplicated)
	} else {
		p("| messages duplicated across the crash (all sessions / most in one session / checkpoint bound) | %d / %d / %d |\n", h.Duplicated, h.DuplicatedMax, h.ReplayBound)
	}
	p("| deliveries under a stale epoch | %d |\n", h.Stale)
	p("| most connections of one session open at once at the source | %d |\n\n", h.MaxConcurrent)
	if len(h.Violations) > 0 {
		p("Evidence violations: %s\n\n", strings.Join(h.Violations, "; "))
	}
	if h.Kind == "kill-9" {
		p("What bounds it: nothing is renewed per session; the victim's one heartbeat a second keeps all its sessions. After the kill its heartbeat counter stops; each of its 2 watchers (chosen by rendezvous hashing) reads the record every %s and may declare it dead once the counter stood still for the TTL on the watcher's own clock (no wall-clock skew enters), by a conditional write that bumps the victim's epoch. The declaring watcher then lists the victim's sessions and spreads them like a graceful shutdown: it reads the fleet once, gives each alive worker (itself included) a part by its room below its fair share, tells the other survivor its part at once (POST /handoff with the dead tenure, which the receiver checks against the victim's record) and claims its own; each acquire is conditional on the dead owner and its epoch, and only what nobody could be told of goes on the queue. So no two survivors race for one session (a lost race is a failed write and a read in dynalite's queue), and each claims at most its share, within one admission burst. ", ms(float64((DefaultHeartbeatEvery / 2).Milliseconds())))
		p("So the gap is kill → declared dead, at most TTL + one watch interval = %s after the last heartbeat the watcher saw (less when the kill came up to a heartbeat interval after it), plus the claim (admission, acquire, fence, dial, the backlog's first message). ", ms(h.TTLPlusWatchMs))
		if h.DeadToFirst.N > 0 {
			p("Measured: kill → declared dead p50 %s, max %s (one sample per round: the wall-clock ended_at_ms against the driver's kill time); declared dead → first message p50 %s, p99 %s, max %s. ", ms(h.KillToDead.P50), ms(h.KillToDead.Max), ms(h.DeadToFirst.P50), ms(h.DeadToFirst.P99), ms(h.DeadToFirst.Max))
			p("The worst case is TTL + watch interval + the claim ≈ %s, against the goal TTL + 1 s = %s. ", ms(h.TTLPlusWatchMs+h.DeadToFirst.P99), ms(h.GoalP99Ms))
		}
		if h.Gap.P99 > h.GoalP99Ms {
			p("The goal is missed by %s: the claim path above exceeds the %s left between TTL + watch interval and the goal (claims are admitted at %d/s per worker, burst %d). ", ms(h.Gap.P99-h.GoalP99Ms), ms(h.GoalP99Ms-h.TTLPlusWatchMs), h.ClaimRateLimit, h.ClaimRateLimit)
		}
		p("Messages are repeated after a crash by design: the new owner resumes after the last checkpoint, written every 60 s when last_seq advanced (bound: rate × (checkpoint interval × 1.1 + 1 s) + 1 = %d at %g msg/s; a round's sessions are younger than one checkpoint interval, so each replays from its start).\n\n", h.ReplayBound, h.FeedRate)
	} else {
		p("A SIGTERMed worker reads the alive workers' records once and spreads its sessions over them by their room below their fair share; it hands them off at least %d at a time (WSFLEET_SHUTDOWN_IN_FLIGHT; more when the rest would not be done by a third of the deadline), the others streaming until their turn. Each hand-off is: the close handshake with the source (status 1001), the sink flush, the release (one write: the session item, with the final checkpoint as release_seq, reserved for the receiver), POST /handoff to the receiver, its claim admission (%d claims/s per worker, burst %d), the acquire and the fence of the checkpoint item (two writes), the dial, and the first message: the backlog the source replays from last_seq + 1 at once, or the source's next message, up to 1/rate = %s later. ",
			DefaultShutdownInFlight, h.ClaimRateLimit, h.ClaimRateLimit, ms(1000/max(h.FeedRate, 0.001)))
		p("The dark time (the first row) is that chain for one session; \"signal → first message\" adds the wait for its turn, so its maximum is the whole drain of %d sessions to %d survivors (bound: the shutdown deadline, %s; at half of it whatever is left goes at once). ",
			h.SessionsPerRound, h.Survivors, ms(float64(DefaultShutdownDeadline.Milliseconds())))
		if h.Dark.N > 0 && h.Dark.P99 > 250 {
			p("The goal (dark time p99 ≤ 250 ms) is missed by %s: the hand-offs in flight queue their writes (3 each) in dynalite's single Node.js thread, which shares the 2 cores with the workers, the feed and fauxqs; the release row and the receivers' claim latency above show how much each side waited. ", ms(h.Dark.P99-250))
		}
		p("\n\n")
	}
}

func renderCapacity(p printer, r *Report) {
	c := r.Capacity
	if c == nil {
		return
	}
	p("## 5. One worker's capacity (no-I/O store)\n\n")
	renderPhase(p, c.Phase)
	p("| run | held | msg/s (expected) | worker CPU (%% of a core) | CPU per 1,000 msg/s | RSS mean / max | RSS per session (above the idle worker's) | heartbeats/s (needed) | tenures lost | goroutines | open files | feed CPU | machine CPU (of %d %%) | load start → end |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", 100*r.Machine.Cores)
	var renewed, needed float64
	var lost int64
	for _, run := range c.Runs {
		label := fmt.Sprintf("%s × %g msg/s, %s=%s%s", thousands(run.Sessions), run.Rate, EnvMaxRenews, run.MaxRenews, envLabel(withoutKey(run.Env, EnvMaxRenews)))
		renewed, needed, lost = renewed+run.RenewsPerSec, needed+run.NeededPerSec, lost+run.LeaseLost
		p("| %s | %s | %s (%s) | %.1f %% | %.2f %% | %.0f / %.0f MiB | %.1f KiB (%.1f KiB) | %.2f (%.0f) | %d | %s | %s | %.0f %% | %.0f %% | %s → %s |\n",
			label, thousands(run.Held), thousands(int(run.MsgRate)), thousands(int(run.Expected)),
			run.CPUPct, run.CPUPer1k, run.RSSMeanMB, run.RSSMaxMB, run.RSSPerSessKB, run.RSSMarginalKB, run.RenewsPerSec, run.NeededPerSec, run.LeaseLost,
			thousands(run.Goroutines), thousands(run.OpenFiles), run.FeedCPUPct, run.MachineCPU, run.LoadStart, run.LoadEnd)
	}
	p("\n**Writes in flight are not the bound.** Since issue 13 a held session writes only its checkpoint (every 60 s when last_seq advanced) and the worker one heartbeat a second; `%s` (the runs set 64) caps the checkpoints in flight, so a worker sustains 64 ÷ (the store's write latency) checkpoints/s. With the no-I/O store that bounds nothing: over the runs above the workers heartbeat %.1f times/s against %.0f needed (one per worker per second) and lost %d tenures. Against DynamoDB at, say, 5 ms per UpdateItem, 64 in flight write 12,800 checkpoints/s, enough for about %s sessions at one checkpoint a minute — far above the default MaxSessions (1,000); section 5b measures the store itself.\n", EnvMaxRenews, renewed, needed, lost, thousands(WriteBound(64, 5*time.Millisecond, DefaultCheckpointEvery)))
	if c.IdleRSSMB > 0 {
		p("\nAn idle worker (memory store, no session) has an RSS of %.1f MiB; the goal is judged on the total RSS divided by the sessions held (the stricter figure).\n", c.IdleRSSMB)
	}
	p("\nFor scale (docs/references.md, a client-only probe on the same machine kind): a bare coder/websocket client reading 1 msg/s on 19,800 connections, nothing else, ≈ 33 KiB and ≈ 2.3 %% of a core per 1,000 msg/s; gorilla/websocket ≈ 24 KiB and ≈ 1.5 %%.\n\n")
	for _, run := range c.Runs {
		renderProfiles(p, run)
	}
}

func renderProfiles(p printer, run CapRunResult) {
	pr := run.Profiles
	held := max(run.Held, 1)
	p("### Where it goes: %s sessions × %g msg/s%s\n\n", thousands(run.Held), run.Rate, envLabel(run.Env))
	if ms := pr.MemStats; len(ms) > 0 {
		kib := func(k string) float64 { return float64(ms[k]) / 1024 / float64(held) }
		idle := float64(ms["HeapIdle"]-ms["HeapReleased"]) / 1024 / float64(held)
		live := pr.LiveHeapBytes / 1024 / float64(held)
		meta := kib("MSpan") + kib("MCache") + kib("GCSys") + kib("OtherSys") + kib("BuckHashSys")
		accounted := kib("HeapInuse") + kib("Stack") + idle + meta
		p("RSS per session %.1f KiB. From the Go runtime's MemStats at the end of the window, per session: heap in use %.1f KiB — objects live at the last GC %.1f KiB (the heap profile's total) and %.1f KiB allocated since (GC headroom: with GOGC=%s the heap grows by that percentage of the live heap before a collection); goroutine stacks %.1f KiB (%s goroutines for %s sessions); idle heap not yet returned to the OS %.1f KiB; span, GC and other runtime metadata %.1f KiB — %.1f KiB accounted in all (the RSS also holds the binary's pages). GC cycles so far: %d.\n\n",
			run.RSSPerSessKB, kib("HeapInuse"), live, kib("HeapInuse")-live, gogc(run.Env), kib("Stack"), thousands(run.Goroutines), thousands(run.Held), idle, meta, accounted, ms["NumGC"])
	}
	if len(pr.CPUParts) > 0 {
		p("Where the worker's CPU goes (cumulative share of the CPU profile's samples; the lines overlap where one loop calls another):\n\n| loop | share |\n|---|---|\n")
		for _, c := range pr.CPUParts {
			p("| %s | %.1f %% |\n", c.What, c.Pct)
		}
		p("\n")
	}
	if pr.Err != "" {
		p("Profile errors: %s\n\n", oneLine(pr.Err))
	}
	block := func(title string, lines []string) {
		if len(lines) == 0 {
			return
		}
		p("%s:\n\n```\n%s\n```\n\n", title, strings.Join(lines, "\n"))
	}
	block(fmt.Sprintf("Heap in use, top entries (`go tool pprof -top -sample_index=inuse_space %s`)", relProfile(pr.HeapFile)), pr.HeapTop)
	block(fmt.Sprintf("CPU, flat (`go tool pprof -top %s`)", relProfile(pr.CPUFile)), pr.CPUTop)
	block(fmt.Sprintf("CPU, cumulative (`go tool pprof -top -cum %s`)", relProfile(pr.CPUFile)), pr.CPUCum)
}

func relProfile(path string) string {
	if i := strings.Index(path, "/out/bench/"); i >= 0 {
		return path[i+1:]
	}
	return path
}

func renderDynalite(p printer, r *Report) {
	d := r.Dynalite
	if d == nil {
		return
	}
	p("## 5b. One worker's capacity with dynalite as the lease store\n\n")
	renderPhase(p, d.Phase)
	// The memory store's CPU per session at 1 msg/s, to tell the store's
	// share of the worker's CPU apart.
	var memPerSess float64
	if r.Capacity != nil {
		for _, run := range r.Capacity.Runs {
			if run.Rate == 1 && run.Held > 0 && len(run.Env) == 0 {
				memPerSess = run.CPUPct / float64(run.Held)
			}
		}
	}
	p("| sessions | held | heartbeats/s (needed) | checkpoints/s | heartbeat p50 / p99 | heartbeat errors | tenures lost | dynalite CPU | worker CPU | worker CPU above the memory store's for as many sessions | RSS per session | feed CPU | machine CPU (of %d %%) | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", 100*r.Machine.Cores)
	for _, s := range d.Steps {
		store := "—"
		if memPerSess > 0 {
			store = fmt.Sprintf("%.1f %%", s.WorkerCPU-memPerSess*float64(s.Held))
		}
		p("| %s | %s | %.2f (%.0f) | %.1f | %s / %s | %d | %d | %.0f %% | %.0f %% | %s | %.1f KiB | %.0f %% | %.0f %% | %s |\n",
			thousands(s.Target), thousands(s.Held), s.RenewsPerSec, s.NeededPerSec, s.CheckpointsPerSec, bucket(s.RenewP50Ms), bucket(s.RenewP99Ms), s.RenewErrors, s.LeaseLost,
			s.DynaliteCPU, s.WorkerCPU, store, s.RSSPerSessKB, s.FeedCPU, s.MachineCPU, s.Verdict)
	}
	if memPerSess > 0 {
		p("\nThe worker's CPU above what the memory store run used per session (%.4f %% of a core per session at 1 msg/s) is the DynamoDB client's: signing, HTTP and JSON for every heartbeat, checkpoint and reconcile query.\n", memPerSess)
	}
	p("\nHeartbeat latencies are histogram buckets (≤ 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000 ms) kept by the worker. Bottleneck: %s. Largest healthy step: %s sessions. ", d.Bottleneck, thousands(d.MaxHealthy))
	p("Since issue 13 a held session costs dynalite one checkpoint a minute (when it advanced) and the worker one heartbeat a second, so N sessions need 1 + N/60 writes/s, plus the reconcile queries every pass; a probe measured dynalite at ~2,200–3,800 UpdateItems/s from 16 goroutines on an idle machine (docs/references.md). In AWS the table's partitions scale out; the table ceiling of section 6 applies instead.\n\n")
}

func renderCost(p printer, r *Report) {
	c := r.Cost
	if c == nil {
		return
	}
	p("## 6. DynamoDB cost: write and read units per session-hour\n\n")
	renderPhase(p, c.Phase)
	for _, run := range []*CostRun{c.Active, c.Idle} {
		if run == nil || run.WorkerHours == 0 {
			continue
		}
		renderCostRun(p, run)
	}
	a, idle := c.Active, c.Idle
	if a == nil || a.WorkerHours == 0 {
		return
	}
	tot := a.Steady.Total
	live, own, ckpt, rd := a.Steady.Category(dynamostore.CatLiveness), a.Steady.Category(dynamostore.CatOwnership), a.Steady.Category(dynamostore.CatCheckpoint), a.Steady.Category(dynamostore.CatReads)
	p("**What each figure is, at 1 msg/s per session.**\n\n")
	p("- **Liveness** is the worker's heartbeat: one conditional write of its own record per second, whatever it holds (the record is well below 1 KB: 1 write unit each, nothing indexed changes). Measured: %.0f heartbeats and %.0f write units per worker-hour. Per session it scales as (heartbeat write units per worker-hour) ÷ (sessions per worker): %.2f write units per session-hour measured at this run's %.0f sessions per worker; **at the defaults' 1,000 sessions per worker %.0f ÷ 1,000 = %.2f** (the figure the goals use).\n",
		a.HeartbeatsPerWH, a.HeartbeatWRUPerWH, live.WRUPerSH, a.SessionsPerWorker, a.HeartbeatWRUPerWH, live.NormWRUPerSH)
	p("- **Ownership** (acquire, its fence of the checkpoint item, release, fail) is written only when a session changes hands: %.2f write units per session-hour in the steady window (%d index write units in it, all kinds). Its cost is per tenure, below.\n", own.WRUPerSH, a.IndexWritesInWindow)
	p("- **Checkpoints**: each session writes its small checkpoint item (`ckpt#<id>`, about 60 bytes: 1 write unit whatever the 1 KB Authorization header makes the session item) every 60 s when its last_seq advanced: %.1f checkpoints and %.1f write units per session-hour.\n", a.CheckpointsPerSH, ckpt.WRUPerSH)
	p("- **Reads**: the watchers' reads of the records they watch (`get_worker`, consistent, 1 unit each), the reconcile passes (`unowned`: the 16 by_unowned shards; `list_workers`: the alive and GONE workers; `owned_by`: the by_owner audit of the worker's own sessions, whose pages grow with them) and single-session reads (`get`: a stop or a new generation); the mailbox comes back with the heartbeat at no cost. %.2f read units per session-hour measured, %.2f at 1,000 sessions per worker (the per-worker reads divided by 1,000).\n\n", rd.RRUPerSH, rd.NormRRUPerSH)
	p("**Total at the defaults (1,000 sessions per worker, 1 msg/s): %.1f write units per session-hour**, of which liveness + ownership %.2f, checkpoints %.1f; and %.2f read units. Measured at this run's %.0f sessions per worker: %.1f write units, %.2f read units. Before issue 13 it was %s write units per session-hour (a renewal every 3.33 s, 1 base + 2 index units each).\n\n",
		tot.NormWRUPerSH, live.NormWRUPerSH+own.NormWRUPerSH, ckpt.NormWRUPerSH, tot.NormRRUPerSH, a.SessionsPerWorker, tot.WRUPerSH, tot.RRUPerSH, thousands(PreviousWRUPerSH))
	if idle != nil && idle.WorkerHours > 0 {
		it := idle.Steady.Total
		p("**Idle sessions** (the feed sends nothing): %.2f write units per session-hour at the defaults' 1,000 sessions per worker (%.2f measured at %.0f sessions per worker), of which checkpoints %.2f: a session whose last_seq does not advance writes nothing; only its worker's heartbeat is shared among its sessions.\n\n",
			it.NormWRUPerSH, it.WRUPerSH, idle.SessionsPerWorker, idle.Steady.Category(dynamostore.CatCheckpoint).NormWRUPerSH)
	}
	p("**Projected on-demand cost per 1,000 sessions per month** (%d h, $%.3f per million WRU, $%.3f per million RRU): **$%s at the defaults** (1,000 sessions per worker, 1 msg/s), **against $%s before issue 13**; $%s measured at this run's %.0f sessions per worker.",
		HoursPerMonth, PriceWriteMillion, PriceReadMillion, money(a.MonthlyDefaults), money(PreviousMonthly), money(a.MonthlyMeasured), a.SessionsPerWorker)
	if idle != nil && idle.WorkerHours > 0 {
		p(" Idle sessions: $%s at the defaults.", money(idle.MonthlyDefaults))
	}
	p("\n\n")
	if len(a.Tenure) > 0 {
		p("**Per tenure** (one claim to one release), from the ramp (acquire, fence) and the stop of all %s sessions after the window (release, final checkpoint):\n\n| request | requests | write units (of which index) | read units |\n|---|---|---|---|\n", thousands(a.Sessions))
		for _, t := range a.Tenure {
			p("| %s | %.2f | %.2f (%.2f) | %.2f |\n", t.Kind, t.Requests, t.WRU, t.IndexWRU, t.RRU)
		}
		p("| **per tenure** | | **%.2f** | **%.2f** |\n\n", a.TenureWRU, a.TenureRRU)
		p("The acquire and the release are billed on the session item, which the 1 KB header puts above 1 KB, and each moves the item's by_owner and by_unowned index entries. A session that starts and ends once an hour adds %.1f write units per session-hour.\n\n", a.TenureWRU)
	}
	p("**Table ceiling.** An on-demand table's default write quota is %s write units per second (docs/references.md). At the defaults' %.1f write units per session-hour (%.5f per session-second) one table holds %s ÷ %.5f = **%s sessions** (%s at this run's %.0f sessions per worker; before issue 13: %s, the index shards' limit). The ceiling is set by the checkpoints: it grows with WSFLEET_CHECKPOINT_EVERY.\n\n",
		thousands(TableWRULimit), tot.NormWRUPerSH, tot.NormWRUPerSH/3600, thousands(TableWRULimit), tot.NormWRUPerSH/3600, thousands(c.TableCeiling), thousands(c.TableCeilingMeasured), a.SessionsPerWorker, thousands(PreviousTableLimit))
	idx := a.IndexWritesInWindow
	if idle != nil {
		idx += idle.IndexWritesInWindow
	}
	p("**Hot keys.** No key takes more than one worker's heartbeats or one session's checkpoints: the busiest base-table key is a worker record, %.2f write units/s (its heartbeats) and about %.1f read units/s (its watchers), against %s write and %s read units/s per partition; a checkpoint item takes %.4f write units/s. The store meters index writes by kind: **%d index write units in the steady windows** (both runs, every kind), so no index key value took a write in steady state — nothing indexed changes on a heartbeat or a checkpoint. Index entries move only with ownership (per tenure above), on the by_owner value of the acquiring worker (at most its claim rate: 50/s by default) and the 16 by_unowned shards.\n\n",
		c.WorkerKeyWRUPerSec, c.WorkerKeyRRUPerSec, thousands(PartitionWCU), thousands(PartitionRCU), c.CheckpointKeyWRUPerSec, idx)
}

func renderCostRun(p printer, run *CostRun) {
	what := "1 msg/s per session"
	if run.Name == "idle" {
		what = "idle: the feed sends nothing"
	}
	p("### %s sessions, %s\n\n", thousands(run.Sessions), what)
	p("%d workers holding %.0f sessions (%.0f per worker; every session held %.0f s after the first start); steady window %.0f s: %.2f session-hours, %.3f worker-hours.\n\n",
		run.Workers, run.Held, run.SessionsPerWorker, run.RampSec, run.WindowSec, run.SessionHours, run.WorkerHours)
	p("| category | write units per session-hour (of which index) | at 1,000 sessions per worker | read units per session-hour | at 1,000 sessions per worker |\n|---|---|---|---|---|\n")
	for _, c := range run.Steady.Categories {
		p("| %s | %.2f (%.2f) | %.2f | %.2f | %.2f |\n", c.Category, c.WRUPerSH, c.IndexWRUPerSH, c.NormWRUPerSH, c.RRUPerSH, c.NormRRUPerSH)
	}
	t := run.Steady.Total
	p("| **total** | **%.2f (%.2f)** | **%.2f** | **%.2f** | **%.2f** |\n\n", t.WRUPerSH, t.IndexWRUPerSH, t.NormWRUPerSH, t.RRUPerSH, t.NormRRUPerSH)
	p("| request kind | category | scales with | writes (condition failed) | reads | write units (index) | read units | per worker-hour: write / read units |\n|---|---|---|---|---|---|---|---|\n")
	for _, k := range run.Steady.Kinds {
		scale := "sessions"
		if k.PerWorker {
			scale = "workers"
		}
		p("| %s | %s | %s | %d (%d) | %d | %d (%d) | %.1f | %.0f / %.0f |\n", k.Kind, k.Category, scale, k.Usage.Writes, k.Usage.ConditionFailed, k.Usage.Reads,
			k.Usage.TotalWriteUnits(), k.Usage.IndexWriteUnits, k.Usage.ReadUnits, k.WRUPerWH, k.RRUPerWH)
	}
	p("\n")
}

func renderStop(p printer, r *Report) {
	s := r.Stop
	if s == nil {
		return
	}
	p("## 4. Stop: POST stop → the connection closed at the source\n\n")
	renderPhase(p, s.Phase)
	p(distHeader)
	distRow(p, "the stop notification reaches the owner", s.Owner)
	distRow(p, "it reaches a non-owner (the owner reads its mailbox)", s.NonOwner)
	distRow(p, "no worker consumes it (the owner's mailbox alone)", s.Mailbox)
	p("\n")
	if s.Unclosed+s.NoOwner > 0 {
		p("Stops whose connection was still open 10 s later: %d; stops of sessions nobody owned (not timed): %d.\n\n", s.Unclosed, s.NoOwner)
	}
	p("Ingest's stop write returns the item, which names the owner; ingest then puts the id in the owner's mailbox (one more write) and sends the stop notification. The owner closes at once when the notification reaches it (a consistent read confirms the stop). Otherwise it finds the id in the record its next heartbeat returns, at most one heartbeat interval (%s) later, re-reads the session and closes: the bound is one heartbeat + the heartbeat's and the re-read's round trips + the close handshake, whichever worker the notification reaches, or none. Goal: p99 ≤ %s on every path.\n\n",
		ms(float64(DefaultHeartbeatEvery.Milliseconds())), ms(s.GoalP99Ms))
}

func renderRebalance(p printer, r *Report) {
	rb := r.Rebalance
	if rb == nil {
		return
	}
	p("## 4b. Rebalancing: %s sessions on %d workers, then %d more join\n\n", thousands(rb.Sessions), rb.WorkersBefore, rb.WorkersAfter-rb.WorkersBefore)
	renderPhase(p, rb.Phase)
	p("| figure | value |\n|---|---|\n")
	bal := "never (within the run's deadline)"
	if rb.ToBalancedMs >= 0 {
		bal = ms(rb.ToBalancedMs)
	}
	p("| join → every worker within ±10 %% (or 2 sessions) of its share | %s |\n", bal)
	p("| loads at the join → when balanced → at the end | %s → %s → %s |\n", loadList(rb.LoadsAtJoin), loadList(rb.LoadsAtBalanced), loadList(rb.LoadsAtEnd))
	p("| moves made | %d (the minimum to reach ±10 %%: %d, to reach the exact shares: %d; ratio to the ±10 %% minimum %.2f) |\n", rb.Moves, rb.MinMoves, rb.MinMovesToShare, rb.Ratio)
	p("| moves after the fleet was balanced (observed %s) | %d |\n", ms(rb.ObservedAfterMs), rb.MovesAfterBalanced)
	p("| sessions moved twice within the minimum hold (%s) | %d |\n", ms(rb.MinHoldMs), rb.MovedTwiceWithinHold)
	p("| messages lost / skipped / duplicated | %d / %d / %d |\n\n", rb.Lost, rb.Gaps, rb.Duplicated)
	p(distHeader)
	distRow(p, "gap per move: old connection closed → new one opened (at the source)", rb.Gap)
	distRow(p, "new connection opened → its first message at the sink", rb.OpenToFirst)
	p("\n")
	for _, v := range rb.Violations {
		p("- violation: %s\n", v)
	}
	if len(rb.Violations) > 0 {
		p("\n")
	}
	p("Each worker, every %s, reads the alive workers' records (load, capacity, draining) and computes the same plan (shared/rebalance): nothing moves while every worker is within ±10 %% (or 2 sessions) of its capacity-weighted share; otherwise every worker above its share sends and every one below receives, at most 10 %% of the sender's sessions per round, only sessions held at least %s. A move is a graceful hand-off reserved for the receiver: close 1001, flush, release with the final checkpoint and the receiver's name on the session (handoff_to), then a POST /handoff to the receiver's admin address so that it claims at once; only the receiver may acquire until the hand-off bound lapses, then anyone may. So the time to balance is about the rounds the 10 %% bound needs (1,000 → 550 sessions is 6 rounds) plus the joiners' claim admission; moves are directed, so none is wasted on a session that comes back.\n\n",
		ms(rb.RebalanceEveryMs), ms(rb.MinHoldMs))
}

func loadList(m map[string]int) string {
	if len(m) == 0 {
		return "–"
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprint(m[k]))
	}
	return strings.Join(parts, " / ")
}

func renderReads(p printer, r *Report) {
	rd := r.Reads
	if rd == nil {
		return
	}
	p("## 7. Finding dead workers: units per worker-hour as the fleet grows\n\n")
	renderPhase(p, rd.Phase)
	if len(rd.Runs) == 0 {
		return
	}
	kinds := map[string]bool{}
	for _, run := range rd.Runs {
		for _, k := range run.Kinds {
			kinds[k.Kind] = true
		}
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		ci, cj := catRank(dynamostore.Category(ks[i])), catRank(dynamostore.Category(ks[j]))
		if ci != cj {
			return ci < cj
		}
		return ks[i] < ks[j]
	})
	p("| per worker-hour |")
	for _, run := range rd.Runs {
		p(" %d workers |", run.Workers)
	}
	p("\n|---|")
	for range rd.Runs {
		p("---|")
	}
	p("\n")
	for _, k := range ks {
		p("| %s: write / read units |", k)
		for _, run := range rd.Runs {
			var kc KindCost
			for _, x := range run.Kinds {
				if x.Kind == k {
					kc = x
				}
			}
			p(" %.0f / %.0f |", kc.WRUPerWH, kc.RRUPerWH)
		}
		p("\n")
	}
	p("| **total: write / read units** |")
	for _, run := range rd.Runs {
		p(" **%.0f / %.0f** |", run.WRUPerWH, run.RRUPerWH)
	}
	p("\n| heartbeats (one a second would be 3,600; the Keeper sends the next a second after the 50 ms tick that sent the last: about 3,550) |")
	for _, run := range rd.Runs {
		p(" %.0f |", run.HeartbeatsPerWH)
	}
	p("\n| heartbeat errors / workers declared dead in the window |")
	for _, run := range rd.Runs {
		p(" %d / %d |", run.HeartbeatErrors, run.DeclaredDead)
	}
	p("\n| window, worker-hours |")
	for _, run := range rd.Runs {
		p(" %.0f s, %.3f |", run.WindowSec, run.WorkerHours)
	}
	p("\n\n")
	first, last := rd.Runs[0], rd.Runs[len(rd.Runs)-1]
	if first.RRUPerWH > 0 && last.Workers > first.Workers {
		p("From %d to %d workers the read units per worker-hour go ×%.2f (reads that grew with the square of the fleet, every worker reading every record, would go ×%d). ",
			first.Workers, last.Workers, last.RRUPerWH/first.RRUPerWH, last.Workers/first.Workers)
	}
	p("Each worker reads only the records of the 2 workers rendezvous hashing gives it (every 500 ms: 4 reads/s), and is read by about 2; the listings of alive and GONE workers are index queries whose pages grow by a few dozen bytes per worker (0.5 read unit per 4 KB), and the reconcile queries (16 by_unowned shards, its own by_owner) do not depend on the fleet. Writes per worker are its heartbeats. These are the per-worker figures section 6 divides by the sessions per worker.\n\n")
}

func renderMicro(p printer, r *Report) {
	m := r.Micro
	if m == nil {
		return
	}
	p("## Microbenchmarks (go test -bench -benchmem)\n\n")
	renderPhase(p, m.Phase)
	p("| package | benchmark | ns/op | B/op | allocs/op | MB/s |\n|---|---|---|---|---|---|\n")
	for _, b := range m.Benchmarks {
		mbs := ""
		if b.MBPerSec > 0 {
			mbs = fmt.Sprintf("%.0f", b.MBPerSec)
		}
		p("| %s | %s | %s | %d | %d | %s |\n", b.Package, b.Name, ns(b.NsPerOp), b.BytesPerOp, b.AllocsPerOp, mbs)
	}
	p("\n`BenchmarkHandle` is the per-message path after the WebSocket read (sequence parse, dedupe, the tenure's validity check — one atomic load of the worker's published trust deadline —, sink call, checkpoint bookkeeping), with the Keeper registered and heartbeating; `BenchmarkFind` the sequence field's parse; `BenchmarkWriter` the sink's.\n\n")
}

func ms(v float64) string {
	switch {
	case v < 0:
		return "−" + ms(-v)
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 1000:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return thousands(int(v+0.5)) + " ms"
	}
}

func ns(v float64) string {
	if v >= 1000 {
		return thousands(int(v + 0.5))
	}
	return fmt.Sprintf("%.1f", v)
}

func bucket(v int64) string {
	if v < 0 {
		return "> 2 s"
	}
	return fmt.Sprintf("≤ %d ms", v)
}

func money(v float64) string {
	whole, frac, _ := strings.Cut(fmt.Sprintf("%.2f", v), ".")
	n := 0
	fmt.Sscan(whole, &n)
	return thousands(n) + "." + frac
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []string
	for len(s) > 3 {
		out = append([]string{s[len(s)-3:]}, out...)
		s = s[:len(s)-3]
	}
	out = append([]string{s}, out...)
	r := strings.Join(out, ",")
	if neg {
		r = "-" + r
	}
	return r
}

// WriteBound is the most sessions a Keeper keeps checkpointed with
// maxInFlight writes in flight, each taking latency, every session
// checkpointing once per every (Little's law): maxInFlight / latency ×
// every.
func WriteBound(maxInFlight int, latency, every time.Duration) int {
	return int(float64(maxInFlight) / latency.Seconds() * every.Seconds())
}

// gogc is the GC target a run's worker had: the streamer binary sets 50
// when GOGC is not in its environment.
func gogc(env map[string]string) string {
	if v, ok := env["GOGC"]; ok {
		return v
	}
	return "50 (the binary's default)"
}

func withoutKey(m map[string]string, k string) map[string]string {
	out := map[string]string{}
	for kk, v := range m {
		if kk != k {
			out[kk] = v
		}
	}
	return out
}

func envLabel(env map[string]string) string {
	if len(env) == 0 {
		return ""
	}
	var kv []string
	for k, v := range env {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return " (" + strings.Join(kv, " ") + ")"
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
