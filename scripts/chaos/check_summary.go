// The summary of a judged run: the host's CPU pressure, per-kind results,
// per-check results and their figures.

package chaos

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// pressure turns the samples into per-second fractions.
func (j *judge) pressure() {
	ps := j.ev.CPUPressure
	if len(ps) < 2 {
		return
	}
	n := int(j.ev.End.Sub(j.ev.Start).Seconds()) + 1
	per := make([]float64, n)
	wall := make([]float64, n)
	for i := 1; i < len(ps); i++ {
		a, b := ps[i-1], ps[i]
		dt := float64(b.AtNs - a.AtNs)
		if dt <= 0 {
			continue
		}
		sec := int(j.sec(a.AtNs))
		if sec < 0 || sec >= n {
			continue
		}
		per[sec] += float64(b.TotalUs-a.TotalUs) * 1e3
		wall[sec] += dt
	}
	p := Pressure{Measured: true, PerSec: make([]float64, n)}
	var sum float64
	var cnt int
	for i := range per {
		if wall[i] == 0 {
			continue
		}
		f := min(per[i]/wall[i], 1)
		p.PerSec[i] = math.Round(f*1000) / 1000
		sum += f
		cnt++
		p.Max = max(p.Max, f)
		if f > 0.5 {
			p.Over50++
		}
	}
	if cnt > 0 {
		p.Mean = sum / float64(cnt)
	}
	j.res.HostCPU = p
}

// hostCPUAround is the worst second of the host's CPU pressure in t ± 2 s
// (-1: not measured).
func (j *judge) hostCPUAround(t float64) float64 {
	p := j.res.HostCPU
	if !p.Measured {
		return -1
	}
	worst := 0.0
	for s := int(t) - 2; s <= int(t)+2; s++ {
		if s >= 0 && s < len(p.PerSec) {
			worst = max(worst, p.PerSec[s])
		}
	}
	return worst
}

func (j *judge) summarize() {
	j.plannedFigures()
	for i := range j.res.Faults {
		fr := &j.res.Faults[i]
		fr.Recovery, fr.Dark = StatsOf(fr.samples), StatsOf(fr.dark)
	}
	for _, k := range j.res.Plan.kinds() {
		kr := KindResult{Kind: k}
		var samples []float64
		for _, fr := range j.res.Faults {
			if fr.Kind != k {
				continue
			}
			kr.Faults++
			kr.Affected += fr.Affected
			kr.BoundMs = fr.BoundMs
			kr.OverBound += fr.OverBound
			kr.Never += len(fr.Unrecovered)
			kr.Repeats += fr.Repeats
			samples = append(samples, fr.samples...)
		}
		kr.Recovery = StatsOf(samples)
		if kr.Faults == 0 {
			j.res.Missing = append(j.res.Missing, k)
		}
		j.res.Kinds = append(j.res.Kinds, kr)
	}
	per := map[string]int{}
	for _, v := range j.res.Violations {
		per[v.Check]++
	}
	for _, c := range checkRules {
		j.res.Checks = append(j.res.Checks, CheckResult{Name: c.name, Rule: c.rule, Violations: per[c.name], Figures: j.figures(c.name)})
	}
	sort.SliceStable(j.res.Violations, func(a, b int) bool { return j.res.Violations[a].T < j.res.Violations[b].T })
	for i := range j.res.Violations {
		j.res.Violations[i].HostCPU = j.hostCPUAround(j.res.Violations[i].T)
	}
}

func fmtStats(s Stats) string {
	if s.N == 0 {
		return "n=0"
	}
	return fmt.Sprintf("p50 %.0f / p99 %.0f / max %.0f ms (n=%d)", s.P50, s.P99, s.Max, s.N)
}

func (j *judge) kind(k string) KindResult {
	for _, kr := range j.res.Kinds {
		if kr.Kind == k {
			return kr
		}
	}
	return KindResult{Kind: k}
}

func (j *judge) figures(check string) string {
	t := j.res.Totals
	b := j.set.Bounds
	switch check {
	case CheckOneConn:
		policy := 0
		for _, v := range j.sess {
			for _, r := range v.refused {
				if r.RefusedBy == string(feed.ModeRefuseNewer) {
					policy++
				}
			}
		}
		pl := j.res.Planned
		return fmt.Sprintf("%d connections, %d overlap(s) of two owners in the records, %d counted by the feed itself, %d refused by the one-connection policy, %d refused by the refuse control; %d overlap(s) of one tenure (%d counted by the feed), %d of them not a planned reconnect, open together %s (bound %d ms)",
			t.Connections, len(j.res.Overlaps), len(j.ev.FeedStats.Overlaps), policy, t.Refused-policy, pl.Overlaps, pl.FeedPlanned, pl.Rejected, fmtStats(pl.Overlap), b.PlannedOverlapMs)
	case CheckNoLoss:
		return fmt.Sprintf("%d seqs sent, %d delivered after dedupe (%d raw), %d lost, %d gaps; %d in flight when a session stopped or the run ended (after its last delivery; resumed from the checkpoint on the next start)",
			t.SentSeqs, t.Distinct, t.Deliveries, t.Lost, t.Gaps, t.Tail)
	case CheckOrder:
		return fmt.Sprintf("%d tenures", t.Tenures)
	case CheckRepeats:
		var parts []string
		for _, tr := range j.res.Transitions {
			bound := "none allowed"
			if tr.Bound >= 0 {
				bound = fmt.Sprintf("bound %d", tr.Bound)
			}
			parts = append(parts, fmt.Sprintf("%s: %d change(s), %d repeat(s), max %d in one (%s)", tr.Cause, tr.Count, tr.Repeats, tr.MaxOne, bound))
		}
		return fmt.Sprintf("%d raw repeats in all; ", t.Repeats) + strings.Join(parts, "; ")
	case CheckStandbyNoLoss:
		sb := j.res.Standby
		return fmt.Sprintf("%d standby session(s): %d owner death(s), %d taken over by the standby, %d by a dial; feed seqs lost at a death or a rebalancing move a standby connection had been sent %d, at one no standby connection had %d, otherwise (source faults, stops) %d; control group (no standby) %d session(s): %d owner death(s), %d lost at them (expected: about TTL × rate each), %d otherwise",
			sb.Standby, sb.Deaths, sb.Promotions, sb.Deaths-sb.Promotions, sb.Lost, sb.LostNoStandby, sb.LostOther, sb.Control, sb.ControlDeaths, sb.ControlLost, sb.ControlLostOther)
	case CheckStandbyRepeats:
		sb := j.res.Standby
		return fmt.Sprintf("%d feed seq(s) delivered again across the standby sessions' ownership changes, max %d in one; bounds across a death: crash and zombie %d, partition and outage %d, storm %d",
			sb.Repeats, sb.MaxOne, b.ReplayCrash, b.ReplayOutage, b.ReplayStorm)
	case CheckOneDeliverer:
		return fmt.Sprintf("%d tenures (worker, lease epoch) delivered; %d deliveries under a stale epoch (fencing's)", t.Tenures, t.Stale)
	case CheckFencing:
		s := StatsOf(j.res.SelfFenceMs)
		return fmt.Sprintf("last delivery of a worker that could not heartbeat: max %.0f ms after it lost DynamoDB (outages and partitions; trust deadline ≤ TTL − margin = %d ms, + %d ms slack; TTL = %d ms)",
			s.Max, b.FenceMs, b.FenceSlackMs, j.set.LeaseTTLMs)
	case CheckCrash:
		txt := fmt.Sprintf("kill-9 %s; zombie %s; partition %s; sink+DynamoDB freeze %s; bound %d ms (TTL %d + watch %d + margin %d)", fmtStats(j.kind(KindKill).Recovery), fmtStats(j.kind(KindZombie).Recovery),
			fmtStats(j.kind(KindPartition).Recovery), fmtStats(j.kind(KindSinkFreezeDynamo).Recovery), b.CrashMs, j.set.LeaseTTLMs, j.set.WatchMs, b.CrashMarginMs)
		if j.set.DynamoModel != "" {
			txt += fmt.Sprintf("; kill-9 while the indexes lag %d ms %s, bound %d ms", ms(modelLag), fmtStats(j.kind(KindIndexLag).Recovery), b.IndexLagCrashMs)
		}
		return txt
	case CheckHandoff:
		return fmt.Sprintf("each session from its previous tenure's last delivery: rolling-restart %s; clock-offset restart %s; bound %d ms, and the shutdown deadline (%d ms) from the SIGTERM", fmtStats(j.kind(KindRolling).Recovery), fmtStats(j.kind(KindClockOffset).Recovery), b.HandoffMs, j.set.ShutdownMs)
	case CheckRebalance:
		var moves Transitions
		for _, tr := range j.res.Transitions {
			if tr.Cause == "rebalance" {
				moves = tr
			}
		}
		return fmt.Sprintf("scale-out: moved to the new worker %s after its start, balanced within %d ms; %d rebalancing move(s), gap p50 %.0f ms, max %.0f ms (bound %d ms), %d repeat(s); scale-in %s from each session's previous tenure's last delivery, bound %d ms",
			fmtStats(j.kind(KindScaleOut).Recovery), b.BalanceMs, moves.Count, moves.GapP50, moves.GapMax, b.HandoffMs, moves.Repeats, fmtStats(j.kind(KindScaleIn).Recovery), b.HandoffMs)
	case CheckOutage:
		txt := fmt.Sprintf("%s from DynamoDB answering again; bound %d ms", fmtStats(j.kind(KindDynamoDown).Recovery), b.OutageMs)
		if j.set.DynamoModel != "" {
			txt += fmt.Sprintf("; throttling storm %s, ambiguous-error storm %s from the storm lifted, bound %d ms (crash + outage)",
				fmtStats(j.kind(KindThrottle).Recovery), fmtStats(j.kind(KindAmbiguous).Recovery), b.StormMs)
		}
		return txt
	case CheckSource:
		return fmt.Sprintf("drop %s; refuse %s (from the refusal lifted); closed at the max age %s (from each close); bound %d ms", fmtStats(j.kind(KindSourceDrop).Recovery), fmtStats(j.kind(KindRefuse).Recovery),
			fmtStats(j.kind(KindSchedule).Recovery), b.ReconnectMs)
	case CheckClaim:
		return fmt.Sprintf("all starts %s; during SQS outages %s; bound %d ms", fmtStats(j.res.Claims), fmtStats(j.kind(KindSQSDown).Recovery), b.ClaimMs)
	case CheckStop:
		return fmt.Sprintf("%d stop(s) held to the bound; connection closed %s after the ack; bound %d ms", j.res.StopsChecked, fmtStats(j.res.Stops), b.StopMs)
	case CheckEndOwners:
		return fmt.Sprintf("%d sessions and %d worker records read %.1f s after the run started", len(j.ev.Settled.Rows), len(j.ev.Settled.Workers), j.sec(j.ev.Settled.At.UnixNano()))
	case CheckRelease:
		return fmt.Sprintf("%d sessions and %d worker records read after the graceful shutdown; %d worker incarnations", len(j.ev.Final.Rows), len(j.ev.Final.Workers), t.Incarnations)
	case CheckSink:
		if sk := j.ev.Sink; sk != nil {
			txt := fmt.Sprintf("%s: %d messages at the destination (%d not envelopes, %d naming no incarnation of the run), %d stamped by the proxy, %d by the engine; %d out-of-order or repeated arrivals within a tenure by the stamps (not judged: a standard queue keeps no order, retries and partial failures reorder)",
				sk.Sink, sk.Messages, sk.Broken, sk.Unknown, sk.Stamped, sk.Unstamped, t.Reordered)
			if sk.Sink == devstack.SinkKinesis {
				txt += fmt.Sprintf("; in the stream's order, %d arrivals of a tenure below a seq it had written (judged: order)", t.Inverted)
			}
			if p := j.res.Poison; p.Sent > 0 {
				txt += fmt.Sprintf("; %d poisoned message(s) sent, %d at the destination, %d byte for byte, %d altered (copies by form %v; at most %d copies of one record of an episode, bound %d)",
					p.Sent, p.Delivered, p.Intact, p.Altered, p.Forms, p.MaxCopies, poisonCopiesMax)
			}
			return txt
		}
		return fmt.Sprintf("%d records received, %d unparsable stdout lines, %d lines cut short by a kill (not delivered)", t.Deliveries, j.ev.BadLines, t.Truncated)
	case CheckTrust:
		if b.TrustDeadlineMs == 0 {
			return "stdout sink: not applied (the fencing check holds the stdout lines)"
		}
		s := StatsOf(j.res.TrustLateMs)
		return fmt.Sprintf("%d DynamoDB-path freeze(s); last record of a frozen worker's tenures at the destination after the freeze (0: none): max %.0f ms (bound %d ms = TTL − margin %d + request timeout %d + tolerance %d)",
			len(j.res.TrustLateMs), s.Max, b.TrustDeadlineMs, b.FenceMs, j.set.SinkRequestTimeoutMs, b.TrustTolMs)
	case CheckPrefix:
		return fmt.Sprintf("%d checkpoint(s), release_seq(s) and released last_seq(s) held to the destination's complete prefix; %d seq(s) skipped by the workers after a permanent refusal (excused)", j.res.PrefixChecked, t.Skipped)
	case CheckSinkRecovery:
		return fmt.Sprintf("latency %s, freeze %s (bound %d ms: retry backoff max 5 s + request timeout + 1 s); refusals %s (bound %d ms: a permanently refused entry's 2 remaining attempts × 5 s + request timeout + 1 s); refusals + DynamoDB frozen %s (bound %d ms, + the crash bound)",
			fmtStats(j.kind(KindSinkLatency).Recovery), fmtStats(j.kind(KindSinkFreeze).Recovery), b.SinkRecoverMs, fmtStats(j.kind(KindSinkRefuse).Recovery), b.SinkRefuseRecoverMs,
			fmtStats(j.kind(KindSinkRefuseDynamo).Recovery), b.CrashMs+b.SinkRefuseRecoverMs) +
			fmt.Sprintf("; source-poison %s (bound %d ms)", fmtStats(j.kind(KindSourcePoison).Recovery), b.SinkRecoverMs)
	}
	return ""
}

// plannedFigures sums up the planned reconnects: the overlaps of one
// tenure the one-connection check judged, the gap in each session's
// deliveries across them, the feed's count and the workers' log lines.
func (j *judge) plannedFigures() {
	p := &j.res.Planned
	for _, v := range j.sess {
		if v.planned {
			p.Sessions++
		}
	}
	var dur, saved []float64
	for _, o := range j.res.PlannedOverlaps {
		p.Overlaps++
		if o.Violation {
			p.Rejected++
		}
		dur = append(dur, o.DurMs)
	}
	for _, ss := range j.ev.FeedStats.Sessions {
		p.FeedPlanned += ss.PlannedOverlaps
	}
	for _, l := range j.ev.Planned {
		if !l.Switched {
			p.GivenUp++
			continue
		}
		p.Switched++
		p.Dropped += l.Overlap
		saved = append(saved, l.SavedMs)
		if p.ByCause == nil {
			p.ByCause = map[string]int{}
		}
		p.ByCause[l.Cause]++
	}
	p.Overlap, p.Dark, p.Saved = StatsOf(dur), StatsOf(j.plannedDark), StatsOf(saved)
}
