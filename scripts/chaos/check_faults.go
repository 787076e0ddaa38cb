// The recovery pass: each injected fault's effect, measured from the
// evidence by its kind's measure (check_faults_worker.go,
// check_faults_dynamo.go, check_faults_source.go, check_faults_sink.go), and
// the measures those share (a session recovered, timed, or never; a new seq
// after the fault).

package chaos

import "time"

// faultResult is fault n's result (nil: none, or before the faults pass).
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
