// The outputs of a judged run: result.json, the Markdown report, and the
// summary printed at the end.

package chaos

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Output file names under the out dir.
const (
	ResultFile   = "result.json"
	ReportFile   = "report.md"
	TimelineFile = "timeline.svg"
)

// WriteOutputs writes the JSON result, the Markdown report and the SVG
// timeline of a judged run to dir.
func WriteOutputs(dir string, res Result, ev Evidence) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("out dir: %w", err)
	}
	if err := writeJSONFile(filepath.Join(dir, ResultFile), res); err != nil {
		return err
	}
	var md strings.Builder
	WriteReport(&md, res)
	if err := os.WriteFile(filepath.Join(dir, ReportFile), []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	var svg strings.Builder
	WriteSVG(&svg, res, ev)
	if err := os.WriteFile(filepath.Join(dir, TimelineFile), []byte(svg.String()), 0o644); err != nil {
		return fmt.Errorf("write timeline: %w", err)
	}
	return nil
}

func msText(v int64) string {
	d := time.Duration(v) * time.Millisecond
	if d > time.Minute {
		d = d.Round(100 * time.Millisecond)
	}
	return d.String()
}

func statCell(s Stats) (string, string, string) {
	if s.N == 0 {
		return "–", "–", "–"
	}
	f := func(v float64) string { return fmt.Sprintf("%.0f ms", v) }
	return f(s.P50), f(s.P99), f(s.Max)
}

// kindLabel is how the report names a fault kind.
var kindLabel = map[string]string{
	KindKill:        "kill -9 of a worker",
	KindZombie:      "SIGSTOP, SIGCONT after > TTL (zombie)",
	KindRolling:     "SIGTERM rolling restart (per worker)",
	KindDynamoDown:  "DynamoDB down 2 × TTL",
	KindSQSDown:     "SQS down (starts and stops during it)",
	KindSourceDrop:  "source drops connections",
	KindRefuse:      "source refuses connections",
	KindSchedule:    "source ends connections at a max age (notice first)",
	KindChurn:       "start / stop / re-start churn",
	KindClockOffset: "clock offset on one worker (SIGTERM restart)",
	KindScaleOut:    "scale-out: one more worker joins",
	KindScaleIn:     "scale-in: one worker leaves (SIGTERM, not restarted)",
	KindPolicy:      "feed policy switched",

	KindPartition:        "one worker cut off from DynamoDB (partition)",
	KindSinkLatency:      "sink latency spikes",
	KindSinkRefuse:       "sink refuses entries (transient and permanent)",
	KindSinkFreeze:       "sink frozen 2 × TTL",
	KindSinkFreezeDynamo: "one worker's sink and DynamoDB path frozen (declared dead)",
	KindSinkRefuseDynamo: "sink refusals, every DynamoDB path frozen past TTL − margin",
	KindSourcePoison:     "source sends invalid UTF-8 / characters SQS refuses",
	KindIndexLag:         "DynamoDB model: indexes lagging, a kill -9 during it",
	KindThrottle:         "DynamoDB model: table throttled, one hot key",
	KindAmbiguous:        "DynamoDB model: writes answered 500 or replies lost",
}

// measuredFrom says what each kind's recovery is measured from, and to.
var measuredFrom = map[string]string{
	KindKill:        "kill → first delivery by a newer tenure",
	KindZombie:      "SIGSTOP → first delivery by a newer tenure",
	KindRolling:     "after a SIGTERM: the previous tenure's last delivery → first delivery by another worker",
	KindDynamoDown:  "DynamoDB answering again → first delivery by a new tenure",
	KindSQSDown:     "start acknowledged (no SQS) → first delivery",
	KindSourceDrop:  "drop → first delivery on the next connection",
	KindRefuse:      "refusal lifted → first delivery on the next connection",
	KindSchedule:    "each close by the source (max age, the drop onto it) → first new seq",
	KindChurn:       "start / re-start acknowledged → first delivery",
	KindClockOffset: "after a SIGTERM: the previous tenure's last delivery → first delivery by another worker",
	KindScaleOut:    "join → the new worker's first delivery of each session moved to it",
	KindScaleIn:     "after a SIGTERM: the previous tenure's last delivery → first delivery by another worker",

	KindPartition:        "cut off → first delivery by a newer tenure",
	KindSinkLatency:      "fault lifted → first new seq at the destination",
	KindSinkRefuse:       "fault lifted → first new seq at the destination",
	KindSinkFreeze:       "thaw → first new seq at the destination",
	KindSinkFreezeDynamo: "frozen → first delivery by a newer tenure",
	KindSinkRefuseDynamo: "DynamoDB paths thawed → first new seq at the destination",
	KindSourcePoison:     "poisoning ended → first new seq at the destination",
	KindIndexLag:         "kill → first delivery by a newer tenure",
	KindThrottle:         "storm lifted → first new seq",
	KindAmbiguous:        "storm lifted → first new seq",
}

// WriteReport writes the Markdown report of res.
func WriteReport(w io.Writer, res Result) {
	s := res.Settings
	b := s.Bounds
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("# wsfleet chaos report — %s\n\n", res.Plan.title())
	if res.OK() {
		p("**Result: PASS — 0 violations** over %s with %d faults injected", msText(res.DurationMs), countFaults(res))
	} else {
		p("**Result: FAIL — %d violation(s)** over %s with %d faults injected", len(res.Violations), msText(res.DurationMs), countFaults(res))
	}
	if len(res.Missing) > 0 {
		p(" (fault kinds not injected: %s)", strings.Join(res.Missing, ", "))
	}
	p(".\n\nStarted %s. Replay the schedule: `%s` (the same faults, durations, gaps and draws; not the same interleaving of the processes).\n\n",
		res.Started.UTC().Format(time.RFC3339), res.Plan.replay(s))
	source := "the sink lines as the harness received them from each worker's stdout (stamped on arrival)"
	if s.destSink() {
		source = fmt.Sprintf("the records the destination (%s) held, read by the harness and stamped with the time the sink fault proxy received the destination's successful answer", s.Sink)
	}
	p("Every figure below comes from the feed's connection records, %s, the harness's own log of what it did, and the sessions table read at the end — never from what a worker says about itself. How to read this report and the picture: `docs/chaos.md` ([link](../chaos.md) from the committed sample in docs/chaos/).\n\n", source)
	p("![timeline: one row per session, coloured by the worker delivering it; faults marked](%s)\n\n", TimelineFile)

	p("## Settings\n\n| setting | value |\n|---|---|\n")
	p("| workers (separate processes) | %d |\n| sessions | %d at the start, %d in all with churn |\n", s.Workers, s.Sessions, res.Totals.Sessions)
	p("| feed | %s; %.0f messages/s per session; one connection per session: %s%s; keepalive ping every %s, closed without a pong within %s |\n",
		map[bool]string{true: "wss:// (a per-run CA, which the workers trust through WSFLEET_EXTRA_CA_FILE)", false: "plain ws://"}[s.TLS], s.FeedRate, s.FeedMode, map[bool]string{true: ", then refuse-newer from half way", false: ""}[s.SwitchPolicy], msText(s.FeedPingMs), msText(s.FeedPingTimeout))
	p("| liveness TTL / heartbeat / watch / checkpoint (when advanced) / reconcile | %s / %s / %s / %s / %s |\n", msText(s.LeaseTTLMs), msText(s.HeartbeatMs), msText(s.WatchMs), msText(s.CheckpointMs), msText(s.ReconcileMs))
	p("| safety margin / shutdown deadline / clock offset up to | %s / %s / %s |\n", msText(s.SafetyMarginMs), msText(s.ShutdownMs), msText(s.ClockOffsetMax))
	p("| worker reconnect backoff max | %s |\n", msText(s.ReconnectMaxMs))
	if s.PlannedEvery > 0 {
		p("| planned reconnects | every %s session: max_connection_age %s, reconnect_on the feed's {\"e\":\"serverShutdown\"} notice, switch_timeout %s; the workers name their tenure in %s, which the feed reads |\n",
			ordinal(s.PlannedEvery), msText(s.PlannedAgeMs), msText(s.PlannedSwitchMs), orNone(s.TenureHeader))
	}
	if s.StandbyEvery > 0 {
		off := ""
		if s.StandbyOff != "" {
			off = "; **started without their standby**: " + mdCell(s.StandbyOff)
		}
		p("| sources that cannot replay | every %s session with a hot standby (\"standby\":{\"enabled\":true}, checkpoint_every %s), every %s without (the control group); each group by turns seq_mode none (the feed's seq read from the data) and the seq field without resume; the feed admits standby connections (tenure <worker id>/standby/<n>)%s |\n",
			ordinal(s.StandbyEvery), msText(s.CheckpointMs), ordinal(2*s.StandbyEvery), off)
	}
	sinkText := "stdout (JSON lines, one pipe per worker)"
	switch s.Sink {
	case "sqs":
		sinkText = fmt.Sprintf("sqs, batched (SendMessageBatch), a standard queue on a second fauxqs behind the sink fault proxy; request timeout %s (half the safety margin); on_sink_refusal %s", msText(s.SinkRequestTimeoutMs), map[bool]string{true: "skip", false: "fail (no permanent refusal injected)"}[s.SinkRefusalSkip])
	case "sqs-fifo":
		sinkText = fmt.Sprintf("sqs, batched (SendMessageBatch), a FIFO queue (group = connection_id) on a second fauxqs behind the sink fault proxy; request timeout %s (half the safety margin); on_sink_refusal %s", msText(s.SinkRequestTimeoutMs), map[bool]string{true: "skip", false: "fail (no permanent refusal injected)"}[s.SinkRefusalSkip])
	case "kinesis":
		sinkText = fmt.Sprintf("kinesis, batched (PutRecords), kinesalite behind the sink fault proxy; request timeout %s (half the safety margin); on_sink_refusal %s", msText(s.SinkRequestTimeoutMs), map[bool]string{true: "skip", false: "fail (no permanent refusal injected)"}[s.SinkRefusalSkip])
	}
	p("| sink | %s |\n\n", sinkText)

	p("## Bounds the checks apply\n\n| bound | value | derivation |\n|---|---|---|\n")
	p("| owned again after a crash, zombie or partition | %s | TTL (the heartbeat counter stood still that long on a watcher's clock) + watch interval + margin %s (the watcher's takeover: claim, dial, first message) |\n", msText(b.CrashMs), msText(b.CrashMarginMs))
	p("| nothing delivered by a worker that cannot heartbeat | %s + %s | its trust deadline: last successful heartbeat + TTL − safety margin, + slack for the sink line's way to the harness |\n", msText(b.FenceMs), msText(b.FenceSlackMs))
	p("| owned again after a graceful handoff | %s, and %s after the SIGTERM | the previous tenure's last delivery → another worker delivers (the drain hands sessions off a few at a time, the others streaming until their turn); all of them within the shutdown deadline |\n", msText(b.HandoffMs), msText(s.ShutdownMs))
	p("| start delivered (SQS up or down) | %s | reconcile interval × 1.2 (its jitter) + 1 s |\n", msText(b.ClaimMs))
	p("| delivering again after DynamoDB is back | %s | as a start |\n", msText(b.OutageMs))
	p("| delivering again after a drop / refusal / a close at the max age | %s | reconnect backoff max + 1 s |\n", msText(b.ReconnectMs))
	if b.PlannedOverlapMs > 0 {
		p("| two connections of one tenure open at once (a planned reconnect) | %s | the switch timeout (the new connection is closed at it) + 1 s |\n", msText(b.PlannedOverlapMs))
	}
	p("| STOPPED session closed, nothing delivered after | %s | heartbeat interval (the owner reads its mailbox at its next heartbeat, whichever worker the SQS stop reaches) + 500 ms (heartbeat call, close handshake) |\n", msText(b.StopMs))
	p("| raw repeats across one crash / zombie | %d | rate × (checkpoint × 1.1 + 1 s) + 1: accepted since the last checkpoint |\n", b.ReplayCrash)
	p("| raw repeats across one DynamoDB outage / partition | %d | rate × (checkpoint × 1.1 + TTL − margin + 1 s) + 1: nothing can be checkpointed until the worker fences itself |\n", b.ReplayOutage)
	if s.StandbyEvery > 0 {
		p("| feed seqs delivered again across a standby session's takeover at a death | %d (crash, zombie) / %d (partition, outage) | the replay bounds above: the standby's window starts after the owner's last checkpoint (checkpoint_every the workers' interval); none across a handoff, a move, a stop |\n", b.ReplayCrash, b.ReplayOutage)
	}
	if b.TrustDeadlineMs > 0 {
		p("| nothing of a frozen worker's tenures at the destination | %s after the freeze | TTL − margin (its last successful heartbeat was sent before the freeze) + the sink request timeout %s + %s tolerance (the proxy's stamp) |\n", msText(b.TrustDeadlineMs), msText(s.SinkRequestTimeoutMs), msText(b.TrustTolMs))
		p("| new seqs at the destination after a sink fault | %s | the batch's longest retry backoff 5 s + request timeout + 1 s (+ the crash bound when every DynamoDB path was frozen too) |\n", msText(b.SinkRecoverMs))
		p("| new seqs at the destination after refusals | %s | a permanently refused entry's remaining attempts (3 − 1) × the 5 s backoff + request timeout + 1 s: the session's later entries wait behind it (+ the crash bound when every DynamoDB path was frozen too) |\n", msText(b.SinkRefuseRecoverMs))
	}
	p("\n")

	p("## Recovery time per fault kind\n\n| fault kind | faults | sessions affected | p50 | p99 | max | bound | over bound | never | raw repeats | measured |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range res.Kinds {
		p50, p99, mx := statCell(k.Recovery)
		bound := "–"
		if k.BoundMs > 0 {
			bound = msText(k.BoundMs)
		}
		p("| %s | %d | %d | %s | %s | %s | %s | %d | %d | %d | %s |\n", kindLabel[k.Kind], k.Faults, k.Affected, p50, p99, mx, bound, k.OverBound, k.Never, k.Repeats, measuredFrom[k.Kind])
	}
	p50, p99, mx := statCell(res.Claims)
	p("\nEvery start and re-start (the initial ones included): p50 %s, p99 %s, max %s over %d. Stops: the source's connection closed p50/p99/max %s after the stop was acknowledged (%d stops held to the bound).\n\n",
		p50, p99, mx, res.Claims.N, strings.Join(func() []string { a, b, c := statCell(res.Stops); return []string{a, b, c} }(), " / "), res.StopsChecked)

	p("## Checks\n\n| check | result | what it holds | figures |\n|---|---|---|---|\n")
	for _, c := range res.Checks {
		r := "ok"
		if c.Violations > 0 {
			r = fmt.Sprintf("**%d violation(s)**", c.Violations)
		}
		p("| %s | %s | %s | %s |\n", c.Name, r, c.Rule, mdCell(c.Figures))
	}

	p("\n## Ownership changes by cause\n\nEach change of a session's tenure (worker, epoch), attributed to the injected event nearest the previous tenure's last delivery.\n\n| cause | changes | raw repeats | most in one change | allowed | gap p50 | gap max |\n|---|---|---|---|---|---|---|\n")
	for _, t := range res.Transitions {
		allowed := "none"
		if t.Bound >= 0 {
			allowed = fmt.Sprintf("≤ %d per change", t.Bound)
		}
		p("| %s | %d | %d | %d | %s | %.0f ms | %.0f ms |\n", causeText(t.Cause), t.Count, t.Repeats, t.MaxOne, allowed, t.GapP50, t.GapMax)
	}

	p("\n## Faults injected\n\n| # | at | fault | target | lasted | affected | recovered | recovery p50 / max | dark max | repeats |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range res.Faults {
		target := f.Worker
		if f.NewWorker != "" {
			target += " → " + f.NewWorker
		}
		if f.OffsetMs != 0 {
			target += fmt.Sprintf(" (clock %+d ms)", f.OffsetMs)
		}
		if len(f.Sessions) > 0 {
			target = fmt.Sprintf("%d session(s)", len(f.Sessions))
		}
		if f.Kind == KindPolicy || f.Kind == KindDynamoDown || f.Kind == KindSQSDown {
			if target == "" || f.Kind == KindPolicy {
				target = f.Note
			}
		}
		lasted := "–"
		if f.TEnd > f.T {
			lasted = fmt.Sprintf("%.1f s", f.TEnd-f.T)
		}
		rec := "–"
		if f.Recovery.N > 0 {
			rec = fmt.Sprintf("%.0f / %.0f ms", f.Recovery.P50, f.Recovery.Max)
		}
		dark := "–"
		if f.Dark.N > 0 {
			dark = fmt.Sprintf("%.0f ms", f.Dark.Max)
		}
		recovered := fmt.Sprintf("%d/%d", f.Recovered, f.Affected)
		if f.Excluded > 0 {
			recovered += fmt.Sprintf(" (+%d stopped)", f.Excluded)
		}
		p("| %d | %.1f s | %s | %s | %s | %d | %s | %s | %s | %d |\n", f.N, f.T, f.Kind, mdCell(target), lasted, f.Affected, recovered, rec, dark, f.Repeats)
	}

	p("\n## Evidence\n\n")
	t := res.Totals
	p("%d sessions; the feed accepted %d connections and refused %d attempts; it wrote %d distinct seqs; the sinks emitted %d lines, %d distinct after dedupe by (connection_id, seq); %d tenures; %d worker processes; %d API calls. Lines cut short by a kill (not delivered, so redelivered by the next owner): %d.\n\n",
		t.Sessions, t.Connections, t.Refused, t.SentSeqs, t.Deliveries, t.Distinct, t.Tenures, t.Incarnations, t.Actions, t.Truncated)
	if o := res.ClockOffset; len(o.Workers) > 0 {
		p("Clock offset: %s ran with the wall clock %+d ms off the others'. They held %d tenures, %d of them taken over from a worker that had stopped heartbeating (a crash, a zombie, a partition or an outage); other workers took %d of theirs over. Deaths are judged by the heartbeat counter on the observer's monotonic clock, so the offset must change nothing.\n\n",
			strings.Join(o.Workers, ", "), o.OffsetMs, o.Tenures, o.TookOver, o.TakenOver)
	}
	if h := res.HostCPU; h.Measured {
		p("Host CPU pressure during the run (Linux PSI, the share of time at least one task waited for a CPU; other work shares this machine): mean %.0f %%, worst second %.0f %%, %d second(s) above 50 %%. Each violation below states the worst second around it.\n\n", 100*h.Mean, 100*h.Max, h.Over50)
	}
	if sk := res.Sink; sk != nil {
		px := sk.Proxy
		p("Destination (%s): %d messages read (%d not sink envelopes); %d deliveries stamped by the sink fault proxy, %d by the engine's own arrival stamp. The proxy saw %d sink requests: %d held by a latency spike, %d answers held, %d held by a freeze; %d held requests given up by their client (never forwarded), %d entries refused transiently, %d permanently (%d distinct records; %d whole requests); %d requests were not the sink's (the work queue). The workers logged %d seq(s) as skipped after a permanent refusal.\n\n",
			sk.Sink, sk.Messages, sk.Broken, sk.Stamped, sk.Unstamped, px.Requests, px.Delayed, px.AnswerHeld, px.Frozen, px.Abandoned, px.Transient, px.Permanent, sk.PermanentlyRefused, px.PermanentReqs, px.Other, t.Skipped)
	}
	if pl := res.Planned; pl.Sessions > 0 || pl.Overlaps > 0 {
		p("Planned reconnects (make-before-break): %d session(s) started with them. %s\n\n", pl.Sessions, plannedText(pl))
	}
	if sb := res.Standby; sb.Standby+sb.Control > 0 {
		p("%s", standbyText(sb))
	}
	if len(res.SelfFenceMs) > 0 {
		var parts []string
		for _, v := range res.SelfFenceMs {
			parts = append(parts, fmt.Sprintf("%.0f ms", v))
		}
		p("Self-fencing under each DynamoDB outage and partition, in fault order (the last delivery of a worker that could no longer heartbeat, after DynamoDB became unreachable; trust deadline ≤ TTL − margin = %s): %s.\n\n", msText(s.Bounds.FenceMs), strings.Join(parts, ", "))
	}

	p("## Violations\n\n")
	if len(res.Violations) == 0 {
		p("None.\n")
		return
	}
	const shown = 300
	for i, v := range res.Violations {
		if i == shown {
			p("\n… and %d more in %s.\n", len(res.Violations)-shown, ResultFile)
			break
		}
		sess := ""
		if v.Session != "" {
			sess = " " + v.Session
		}
		host := ""
		if v.HostCPU >= 0 {
			host = fmt.Sprintf(" (host CPU pressure around it: %.0f %%)", 100*v.HostCPU)
		}
		p("%d. **%s**%s at %.1f s: %s%s\n", i+1, v.Check, sess, v.T, mdCell(v.Detail), host)
	}
}

// standbyText is the report's hot standby section: the standby sessions
// beside the control group, then one row per session.
func standbyText(sb StandbyResult) string {
	var b strings.Builder
	b.WriteString("## Hot standby\n\nSessions whose source cannot replay, judged by the feed's own seq in the delivered data (standby-no-loss, standby-repeats). An owner's death is a kill -9, a SIGSTOP or a partition from DynamoDB that ended its tenure (what a standby is for; what a DynamoDB outage or storm costs counts as lost otherwise); a takeover is a promotion when the new owner's worker held a standby connection from before the death until its first delivery.\n\n")
	b.WriteString("| group | sessions | owner deaths | taken over by the standby | by a dial | lost at a death (standby connection sent them) | lost at a death (no standby connection had them) | lost otherwise (source faults, stops) | repeats (max in one) |\n|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| with a standby | %d | %d | %d | %d | %d | %d | %d | %d (%d) |\n", sb.Standby, sb.Deaths, sb.Promotions, sb.Deaths-sb.Promotions, sb.Lost, sb.LostNoStandby, sb.LostOther, sb.Repeats, sb.MaxOne)
	fmt.Fprintf(&b, "| control (no standby) | %d | %d | — | %d | %d | — | %d | — |\n\n", sb.Control, sb.ControlDeaths, sb.ControlDeaths, sb.ControlLost, sb.ControlLostOther)
	b.WriteString("| session | source | standby | feed seqs delivered | lost at a death | of them, no standby held | lost otherwise | repeats | takeovers at a death |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range sb.Sessions {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d | %d | %d | %s |\n", s.Session, s.Source, map[bool]string{true: "yes", false: "no"}[s.Standby], s.Delivered,
			s.Lost+s.LostNoStandby, s.LostNoStandby, s.LostOther, s.Repeats, mdCell(orNone(strings.Join(s.Takeovers, "; "))))
	}
	b.WriteString("\n")
	return b.String()
}

// plannedText is the planned reconnects' figures in a sentence.
func plannedText(pl PlannedResult) string {
	var causes []string
	for _, c := range slices.Sorted(maps.Keys(pl.ByCause)) {
		causes = append(causes, fmt.Sprintf("%d on %s", pl.ByCause[c], c))
	}
	by := ""
	if len(causes) > 0 {
		by = " (" + strings.Join(causes, ", ") + ")"
	}
	return fmt.Sprintf("The feed's records hold %d overlap(s) of two connections of one tenure (the feed counted %d), %d of them not a planned reconnect; both open %s; the gap in the session's deliveries across a switch (last delivery before the older connection closed → first after) %s. The workers logged %d switch(es)%s and %d planned reconnect(s) given up (the current connection stayed); %d message(s) both connections carried, dropped by the dedupe; gap saved %s.",
		pl.Overlaps, pl.FeedPlanned, pl.Rejected, fmtStats(pl.Overlap), fmtStats(pl.Dark), pl.Switched, by, pl.GivenUp, pl.Dropped, fmtStats(pl.Saved))
}

// ordinal is "3rd" for 3.
func ordinal(n int) string {
	switch {
	case n == 1:
		return ""
	case n%10 == 1 && n%100 != 11:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2 && n%100 != 12:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3 && n%100 != 13:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}

func orNone(s string) string {
	if s == "" {
		return "no header (off)"
	}
	return s
}

func countFaults(res Result) int {
	n := 0
	for _, f := range res.Faults {
		if f.Kind != KindPolicy {
			n++
		}
	}
	return n
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// PrintSummary writes the run's verdict, its checks and its recovery times.
func PrintSummary(w io.Writer, res Result) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("\n=== wsfleet chaos: %s, %s, %d faults ===\n", res.Plan.title(), msText(res.DurationMs), countFaults(res))
	p("%-18s %-22s %-9s %-9s %-9s %-9s %s\n", "fault kind", "affected/faults", "p50", "p99", "max", "bound", "over/never")
	for _, k := range res.Kinds {
		p50, p99, mx := statCell(k.Recovery)
		bound := "–"
		if k.BoundMs > 0 {
			bound = msText(k.BoundMs)
		}
		p("%-18s %-22s %-9s %-9s %-9s %-9s %d/%d\n", k.Kind, fmt.Sprintf("%d/%d", k.Affected, k.Faults), p50, p99, mx, bound, k.OverBound, k.Never)
	}
	p("\n")
	for _, c := range res.Checks {
		r := "ok"
		if c.Violations > 0 {
			r = fmt.Sprintf("%d VIOLATION(S)", c.Violations)
		}
		p("%-17s %-16s %s\n", c.Name, r, c.Figures)
	}
	if len(res.Missing) > 0 {
		p("\nfault kinds not injected: %s\n", strings.Join(res.Missing, ", "))
	}
	if res.OK() {
		p("\nRESULT: PASS (0 violations)\n")
		return
	}
	p("\nRESULT: FAIL (%d violation(s))\n", len(res.Violations))
	for i, v := range res.Violations {
		if i == 40 {
			p("  … %d more in %s\n", len(res.Violations)-40, ResultFile)
			break
		}
		p("  - %s\n", v)
	}
}
