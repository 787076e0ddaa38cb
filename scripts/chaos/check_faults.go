// Recovery checks: each injected fault's effect, measured from the evidence
// (recovery-crash, -handoff, -outage, -source, rebalance's scale-out and
// scale-in), with the trust deadline of a worker that could not heartbeat.

package chaos

import (
	"maps"
	"slices"
	"time"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

func (j *judge) faultResult(n int) *FaultResult {
	for i := range j.res.Faults {
		if j.res.Faults[i].N == n {
			return &j.res.Faults[i]
		}
	}
	return nil
}

func (j *judge) checkFaults() {
	b := j.set.Bounds
	if b.SinkRefuseRecoverMs == 0 {
		b.SinkRefuseRecoverMs = b.SinkRecoverMs // evidence saved before the refusal bound was its own
	}
	for _, f := range j.ev.Faults {
		fr := FaultResult{Fault: f, T: j.sec(f.Start.UnixNano()), TEnd: j.sec(f.End.UnixNano())}
		switch f.Kind {
		case KindKill, KindZombie:
			fr.BoundMs, fr.RefNote = b.CrashMs, "the signal (kill -9 / SIGSTOP)"
			j.workerFault(&fr, CheckCrash)
		case KindPartition:
			fr.BoundMs, fr.RefNote = b.CrashMs, "the worker cut off from DynamoDB"
			j.workerFault(&fr, CheckCrash)
		case KindRolling, KindClockOffset:
			fr.BoundMs, fr.RefNote = b.HandoffMs, "the previous owner's last delivery, after its SIGTERM"
			j.workerFault(&fr, CheckHandoff)
		case KindScaleIn:
			fr.BoundMs, fr.RefNote = b.HandoffMs, "the previous owner's last delivery, after its SIGTERM (the worker is not restarted)"
			j.workerFault(&fr, CheckRebalance)
		case KindScaleOut:
			fr.BoundMs, fr.RefNote = b.BalanceMs, "the new worker's start"
			j.scaleOutFault(&fr, f)
		case KindDynamoDown:
			fr.BoundMs, fr.RefNote = b.OutageMs, "DynamoDB answering again"
			j.outageFault(&fr)
		case KindSourceDrop:
			fr.BoundMs, fr.RefNote = b.ReconnectMs, "the drop"
			j.sourceFault(&fr, f.Start)
		case KindRefuse:
			fr.BoundMs, fr.RefNote = b.ReconnectMs, "the refusal lifted"
			j.sourceFault(&fr, f.End)
		case KindSchedule:
			fr.BoundMs, fr.RefNote = b.ReconnectMs, "each close by the source (at the max age, or the drop onto the schedule)"
			j.scheduleFault(&fr)
		case KindSQSDown, KindChurn:
			fr.BoundMs, fr.RefNote = b.ClaimMs, "each start acknowledged"
		case KindSinkFreezeDynamo:
			fr.BoundMs, fr.RefNote = b.CrashMs, "the worker's sink and DynamoDB path frozen"
			j.workerFault(&fr, CheckCrash)
		case KindSinkLatency, KindSinkFreeze:
			fr.BoundMs, fr.RefNote = b.SinkRecoverMs, "the sink fault lifted"
			j.sinkFault(&fr)
		case KindSinkRefuse:
			fr.BoundMs, fr.RefNote = b.SinkRefuseRecoverMs, "the sink fault lifted"
			j.sinkFault(&fr)
		case KindSourcePoison:
			fr.BoundMs, fr.RefNote = b.SinkRecoverMs, "the source's poisoning ended"
			j.sinkFault(&fr)
		case KindSinkRefuseDynamo:
			fr.BoundMs, fr.RefNote = b.CrashMs+b.SinkRefuseRecoverMs, "the DynamoDB paths thawed"
			j.sinkFault(&fr)
			j.deadExits(&fr)
		case KindIndexLag:
			fr.BoundMs, fr.RefNote = b.IndexLagCrashMs, "the kill -9 while the indexes lag"
			j.workerFault(&fr, CheckCrash)
		case KindThrottle, KindAmbiguous:
			fr.BoundMs, fr.RefNote = b.StormMs, "the storm lifted"
			j.stormFault(&fr)
			j.deadExits(&fr)
		}
		j.res.Faults = append(j.res.Faults, fr)
	}
	for i := range j.res.Faults {
		j.res.Faults[i].Repeats = j.faultRepeats[j.res.Faults[i].N]
	}
}

// workerFault measures a fault on one worker: the sessions it was
// delivering must be delivered again by a newer tenure of another worker.
// After a crash that is judged from the fault (the worker stops delivering
// then). After a SIGTERM (graceful) it is judged per session from its
// previous tenure's last delivery: the drain hands sessions off a few at a
// time and the others keep streaming until their turn (docs/worker.md,
// "Graceful shutdown"), so a session is dark only for its own hand-off;
// and every session is delivered again within the shutdown deadline of the
// SIGTERM, by when the drain has handed everything off.
func (j *judge) workerFault(fr *FaultResult, check string) {
	ref := fr.Start.UnixNano()
	graceful := gracefulKind(fr.Kind)
	deadline := ref + fr.BoundMs*int64(time.Millisecond)
	if graceful {
		deadline = ref + j.set.ShutdownMs*int64(time.Millisecond)
	}
	label := fr.Kind + " of " + fr.Worker
	for _, id := range j.ids {
		v := j.sess[id]
		last := v.lastBefore(ref)
		if last == nil || last.Worker != fr.Worker || last.AtNs < ref-int64(liveWindow) || !v.startedAt(fr.Start) {
			continue
		}
		fr.Affected++
		var rec *Delivery
		prev := last // the previous tenure's last delivery before rec (graceful: it streams until its turn)
		for i := range v.dels {
			d := &v.dels[i]
			if d.AtNs > ref && d.Worker != fr.Worker && d.Epoch > last.Epoch {
				rec = d
				break
			}
			if graceful && d.AtNs > ref && d.Worker == last.Worker && d.Epoch == last.Epoch {
				prev = d
			}
		}
		if !j.recovered(fr, v, id, rec, deadline, check, ref, "%s: never delivered again by a newer tenure", label) {
			continue
		}
		if !graceful {
			j.timed(fr, id, rec, ref, prev.AtNs, deadline, check, "%s: delivered again by %s@%d only after %.0f ms (bound %d ms)", label, rec.Worker, rec.Epoch, float64(rec.AtNs-ref)/1e6, fr.BoundMs)
			continue
		}
		gap := float64(rec.AtNs-prev.AtNs) / 1e6
		fr.dark = append(fr.dark, gap)
		fr.samples = append(fr.samples, gap)
		switch {
		case gap > float64(fr.BoundMs):
			fr.OverBound++
			j.violate(check, id, prev.AtNs, "%s: delivered again by %s@%d %.0f ms after %s@%d's last delivery (bound %d ms)", label, rec.Worker, rec.Epoch, gap, prev.Worker, prev.Epoch, fr.BoundMs)
		case rec.AtNs > deadline:
			fr.OverBound++
			j.violate(check, id, ref, "%s: delivered again by %s@%d only %.0f ms after the SIGTERM (the shutdown deadline: %d ms)", label, rec.Worker, rec.Epoch, float64(rec.AtNs-ref)/1e6, j.set.ShutdownMs)
		}
	}
	if fr.Kind != KindZombie && fr.Kind != KindPartition && fr.Kind != KindSinkFreezeDynamo {
		return
	}
	// A zombie or a partitioned worker cannot heartbeat from the fault on:
	// its trust deadline is at most FenceMs after it, and past that it must
	// deliver nothing under any tenure (it cannot acquire a new one either).
	fence := ref + (j.set.Bounds.FenceMs+j.set.Bounds.FenceSlackMs)*int64(time.Millisecond)
	var latest int64
	for _, id := range j.ids {
		v := j.sess[id]
		n := 0
		var first int64
		epochs := map[int64]bool{}
		for _, d := range v.dels {
			if d.Worker != fr.Worker || d.AtNs <= ref {
				continue
			}
			latest = max(latest, d.AtNs-ref)
			if d.AtNs > fence {
				if n == 0 {
					first = d.AtNs
				}
				n++
				epochs[d.Epoch] = true
			}
		}
		if n > 0 {
			j.violate(CheckFencing, id, first, "%s %s delivered %d message(s) (epochs %v) after its trust deadline: more than %d ms after it could last heartbeat (TTL − margin + %d ms slack)",
				fr.Kind, fr.Worker, n, slices.Sorted(maps.Keys(epochs)), j.set.Bounds.FenceMs+j.set.Bounds.FenceSlackMs, j.set.Bounds.FenceSlackMs)
		}
	}
	if fr.Kind == KindPartition || fr.Kind == KindSinkFreezeDynamo {
		j.res.SelfFenceMs = append(j.res.SelfFenceMs, float64(latest)/1e6)
	}
	// Once it can reach DynamoDB again (SIGCONT, the proxy thawed), its
	// next heartbeat finds it DEAD: it must exit, non-zero.
	switch inc := j.inc[fr.Worker]; {
	case inc == nil:
	case inc.End == "alive":
		j.violate(CheckCrash, "", inc.Ended.UnixNano(), "%s: %s kept running after its watchers declared it dead (%s)", fr.Kind, fr.Worker, inc.Exit)
	case inc.End == "dead" && inc.Exit == "0":
		j.violate(CheckCrash, "", inc.Ended.UnixNano(), "%s: %s exited 0 after it was declared dead (want non-zero: the supervisor must see a failure)", fr.Kind, fr.Worker)
	}
}

// scaleOutFault measures a worker joining: the sessions moved to it (its
// first delivery of each, after an earlier tenure elsewhere) are the
// affected ones, each recovered at that delivery (from the join); the
// fleet must be balanced within the bound (the runner's observation, the
// fault's End).
func (j *judge) scaleOutFault(fr *FaultResult, f Fault) {
	ref := fr.Start.UnixNano()
	until := ref + fr.BoundMs*int64(time.Millisecond) // the moves of this join, not later takeovers
	if f.End.After(f.Start) {
		until = f.End.UnixNano()
	}
	for _, id := range j.ids {
		v := j.sess[id]
		for i, t := range v.tenures {
			if t.worker != fr.Worker || i == 0 || t.firstAt < ref || t.firstAt > until {
				continue
			}
			fr.Affected++
			fr.Recovered++
			fr.samples = append(fr.samples, float64(t.firstAt-ref)/1e6)
			fr.dark = append(fr.dark, float64(t.firstAt-v.tenures[i-1].lastAt)/1e6)
			break
		}
	}
	if !f.End.After(f.Start) {
		fr.OverBound++
		j.violate(CheckRebalance, "", ref, "scale-out: %s joined; the fleet was not within ±10 %% of its fair shares %d ms later", fr.Worker, fr.BoundMs)
	} else if took := f.End.Sub(f.Start).Milliseconds(); took > fr.BoundMs {
		fr.OverBound++
		j.violate(CheckRebalance, "", ref, "scale-out: %s joined; the fleet was balanced only after %d ms (bound %d ms)", fr.Worker, took, fr.BoundMs)
	}
}

// outageFault measures DynamoDB down: every tenure must stop delivering by
// its worker's trust deadline (no heartbeat can succeed), and every session
// is delivered again by a new tenure once the engine is back.
func (j *judge) outageFault(fr *FaultResult) {
	start, back := fr.Start.UnixNano(), fr.End.UnixNano()
	fence := (j.set.Bounds.FenceMs + j.set.Bounds.FenceSlackMs) * int64(time.Millisecond)
	deadline := back + fr.BoundMs*int64(time.Millisecond)
	var latest int64
	for _, id := range j.ids {
		v := j.sess[id]
		last := v.liveAt(fr.Start)
		if last == nil {
			continue
		}
		fr.Affected++
		oldLast := last.AtNs
		var rec *Delivery
		late := 0
		for i := range v.dels {
			d := &v.dels[i]
			if d.AtNs <= start {
				continue
			}
			if d.Epoch <= last.Epoch {
				oldLast = max(oldLast, d.AtNs)
				latest = max(latest, d.AtNs-start)
				if d.AtNs > start+fence {
					late++
				}
				continue
			}
			if rec == nil {
				rec = d
			}
		}
		if late > 0 {
			j.violate(CheckFencing, id, start+fence, "%d deliveries under epoch ≤ %d after the trust deadline (more than TTL − margin + %d ms slack after DynamoDB went down: no heartbeat was possible)", late, last.Epoch, j.set.Bounds.FenceSlackMs)
		}
		if !j.recovered(fr, v, id, rec, deadline, CheckOutage, back, "never delivered again by a new tenure after DynamoDB came back") {
			continue
		}
		j.timed(fr, id, rec, back, oldLast, deadline, CheckOutage, "delivered again by %s@%d %.0f ms after DynamoDB came back (bound %d ms)", rec.Worker, rec.Epoch, float64(rec.AtNs-back)/1e6, fr.BoundMs)
	}
	j.res.SelfFenceMs = append(j.res.SelfFenceMs, float64(latest)/1e6)
}

// sourceFault measures a drop or a refusal: the session's next connection
// at the source, then its first delivery, measured from ref.
func (j *judge) sourceFault(fr *FaultResult, refT time.Time) {
	start, ref := fr.Start.UnixNano(), refT.UnixNano()
	deadline := ref + fr.BoundMs*int64(time.Millisecond)
	for _, id := range fr.Sessions {
		v := j.sess[id]
		if v == nil {
			continue
		}
		last := v.liveAt(fr.Start)
		if last == nil {
			continue
		}
		fr.Affected++
		var rec *Delivery
		for _, c := range v.conns {
			if c.OpenedAt.UnixNano() <= start {
				continue
			}
			for i := range v.dels {
				if d := &v.dels[i]; d.AtNs >= c.OpenedAt.UnixNano() {
					rec = d
					break
				}
			}
			break
		}
		if !j.recovered(fr, v, id, rec, deadline, CheckSource, ref, "%s: never reconnected and delivered again", fr.Kind) {
			continue
		}
		j.timed(fr, id, rec, ref, last.AtNs, deadline, CheckSource, "%s: delivering again only %.0f ms after %s (bound %d ms)", fr.Kind, float64(rec.AtNs-ref)/1e6, fr.RefNote, fr.BoundMs)
	}
}

// scheduleFault measures a source-schedule episode. Its sessions are those
// with a connection opened while the schedule was on (fr.Start..fr.End:
// that connection ends at the max age). Every close by the source, at the
// max age or the drop onto the schedule at the start (fr.Sessions), is a
// reconnect held to the bound, measured from the close to the session's
// first delivery of a new seq (above every seq delivered by the close); a
// planned session that switched before the age has no such close (its
// old connection closed by the worker, the overlap judged by the
// one-connection check).
func (j *judge) scheduleFault(fr *FaultResult) {
	from, to := fr.Start.UnixNano(), fr.End.UnixNano()
	for _, id := range j.ids {
		v := j.sess[id]
		var closes []int64
		touched := false
		for _, c := range v.conns {
			if o := c.OpenedAt.UnixNano(); o >= from && o <= to {
				touched = true
				if c.Reason == feed.ReasonMaxAge {
					closes = append(closes, c.ClosedAt.UnixNano())
				}
			}
			if c.Reason == feed.ReasonDropped && slices.Contains(fr.Sessions, id) && !c.ClosedAt.Before(fr.Start) && c.ClosedAt.Before(fr.Start.Add(time.Second)) {
				touched = true
				closes = append(closes, c.ClosedAt.UnixNano())
			}
		}
		if !touched || v.liveAt(fr.Start) == nil {
			continue
		}
		fr.Affected++
		ok := true
		for _, ref := range closes {
			deadline := ref + fr.BoundMs*int64(time.Millisecond)
			rec, _, lastBefore := v.firstNewSeqAfter(ref)
			if (rec == nil || rec.AtNs > deadline) && v.stoppedWithin(fr.Start, time.Unix(0, deadline)) {
				fr.Excluded++
				ok = false
				break
			}
			if rec == nil {
				fr.Unrecovered = append(fr.Unrecovered, id)
				j.violate(CheckSource, id, ref, "%s: never delivered a new seq after the source closed its connection", fr.Kind)
				ok = false
				break
			}
			j.timed(fr, id, rec, ref, lastBefore, deadline, CheckSource, "%s: a new seq (%d, by %s@%d) only %.0f ms after the source closed its connection (bound %d ms)",
				fr.Kind, rec.Seq, rec.Worker, rec.Epoch, float64(rec.AtNs-ref)/1e6, fr.BoundMs)
		}
		if ok {
			fr.Recovered++
		}
	}
}

// stormFault measures a DynamoDB storm (throttling, ambiguous errors): every
// session delivering before it delivers a new seq within the bound after it
// was lifted, by whichever tenure (a worker whose heartbeats were refused
// may have been declared dead and its sessions taken over).
func (j *judge) stormFault(fr *FaultResult) {
	j.newSeqAfter(fr, CheckOutage, "", "no new seq delivered after the storm was lifted", nil)
}

// newSeqAfter judges the sessions delivering when fault fr began by their
// first delivery of a new seq (at the destination: where) after it ended,
// due within fr.BoundMs (plus extra's for the session, which also says
// why) of the end; never is the violation of check when none came.
func (j *judge) newSeqAfter(fr *FaultResult, check, where, never string, extra func(id string, maxBefore int64) (ms int64, why string)) {
	end := fr.End.UnixNano()
	for _, id := range j.ids {
		v := j.sess[id]
		if v.liveAt(fr.Start) == nil {
			continue
		}
		fr.Affected++
		rec, maxBefore, lastBefore := v.firstNewSeqAfter(end)
		boundMs, why := fr.BoundMs, ""
		if extra != nil {
			ms, w := extra(id, maxBefore)
			boundMs, why = boundMs+ms, w
		}
		deadline := end + boundMs*int64(time.Millisecond)
		if !j.recovered(fr, v, id, rec, deadline, check, end, "%s: %s", fr.Kind, never) {
			continue
		}
		j.timed(fr, id, rec, end, lastBefore, deadline, check, "%s: a new seq (%d, by %s@%d)%s only %.0f ms after %s (bound %d ms%s)", fr.Kind, rec.Seq, rec.Worker, rec.Epoch, where,
			float64(rec.AtNs-end)/1e6, fr.RefNote, boundMs, why)
	}
}

// timed samples session id's recovery at rec after fault fr, measured from
// ref, its dark time from its last delivery before (lastAt); past deadline
// it is over the bound, a violation of check at ref saying how late
// (format, args).
func (j *judge) timed(fr *FaultResult, id string, rec *Delivery, ref, lastAt, deadline int64, check, format string, args ...any) {
	fr.samples = append(fr.samples, max(0, float64(rec.AtNs-ref)/1e6))
	fr.dark = append(fr.dark, float64(rec.AtNs-lastAt)/1e6)
	if rec.AtNs > deadline {
		fr.OverBound++
		j.violate(check, id, ref, format, args...)
	}
}

// gracefulKind says whether a fault kind is a SIGTERM: its worker drains.
func gracefulKind(kind string) bool {
	return kind == KindRolling || kind == KindClockOffset || kind == KindScaleIn
}

// recovered sorts how session v came back after fault fr: rec is its first
// delivery that counts (nil: none), due by deadline. A session stopped in
// the meantime is excused; one with no such delivery is unrecovered, a
// violation of check at atNs saying why (format, args); otherwise it is
// counted as recovered and recovered returns true (its delay is the
// caller's to sample and judge).
func (j *judge) recovered(fr *FaultResult, v *sessionView, id string, rec *Delivery, deadline int64, check string, atNs int64, format string, args ...any) bool {
	if (rec == nil || rec.AtNs > deadline) && v.stoppedWithin(fr.Start, time.Unix(0, deadline)) {
		fr.Excluded++
		return false
	}
	if rec == nil {
		fr.Unrecovered = append(fr.Unrecovered, id)
		j.violate(check, id, atNs, format, args...)
		return false
	}
	fr.Recovered++
	return true
}
