// The DynamoDB faults: the engine down (recovery-outage, and fencing by the
// trust deadline), a storm of the DynamoDB model, and the exit of a worker
// declared dead while every DynamoDB path was frozen (recovery-crash).

package chaos

import "time"

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

// stormFault measures a DynamoDB storm (throttling, ambiguous errors): every
// session delivering before it delivers a new seq within the bound after it
// was lifted, by whichever tenure (a worker whose heartbeats were refused
// may have been declared dead and its sessions taken over).
func (j *judge) stormFault(fr *FaultResult) {
	j.newSeqAfter(fr, CheckOutage, "", "no new seq delivered after the storm was lifted", nil)
}

// deadExits: a worker declared dead during a fault that froze every
// DynamoDB path learns it at its next heartbeat and exits non-zero.
func (j *judge) deadExits(fr *FaultResult) {
	for _, inc := range j.ev.Incarnations {
		if inc.End != "dead" || inc.Ended.Before(fr.Start) || inc.Ended.After(fr.End.Add(time.Duration(j.set.LeaseTTLMs+3000)*time.Millisecond)) {
			continue
		}
		if inc.Exit == "0" {
			j.violate(CheckCrash, "", inc.Ended.UnixNano(), "%s: %s exited 0 after it was declared dead (want non-zero)", fr.Kind, inc.ID)
		}
	}
}
