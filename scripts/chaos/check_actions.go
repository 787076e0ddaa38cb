// API checks: every acknowledged start and re-start is delivered within the
// claim bound; every stop closes the connection and holds (claim, stop).

package chaos

import (
	"sort"
	"time"
)

// checkStarts: every acknowledged start and re-start is delivered within
// the claim bound (SQS up or down: the reconciler is the safety net).
func (j *judge) checkStarts() {
	var all []float64
	bound := j.set.Bounds.ClaimMs * int64(time.Millisecond)
	for _, a := range j.ev.Actions {
		if a.Op == "stop" || a.Acked.IsZero() {
			continue
		}
		v := j.sess[a.Session]
		// The first delivery after the request: with the notification, or
		// the reconciler, it may come before the answer does.
		ack, req := a.Acked.UnixNano(), a.At.UnixNano()
		i := sort.Search(len(v.dels), func(i int) bool { return v.dels[i].AtNs > req })
		var first *Delivery
		if i < len(v.dels) {
			first = &v.dels[i]
		}
		deadline := ack + bound
		if (first == nil || first.AtNs > deadline) && v.stoppedWithin(a.At, time.Unix(0, deadline)) {
			continue
		}
		fr := j.faultResult(a.Fault)
		if fr != nil && (fr.Kind == KindSQSDown || fr.Kind == KindChurn) {
			fr.Affected++
		}
		if first == nil {
			j.violate(CheckClaim, a.Session, ack, "%s acknowledged and never delivered", a.Op)
			if fr != nil {
				fr.Unrecovered = append(fr.Unrecovered, a.Session)
			}
			continue
		}
		lat := max(0, float64(first.AtNs-ack)/1e6)
		all = append(all, lat)
		if fr != nil && (fr.Kind == KindSQSDown || fr.Kind == KindChurn) {
			fr.Recovered++
			fr.samples = append(fr.samples, lat)
		}
		if first.AtNs > deadline {
			if fr != nil {
				fr.OverBound++
			}
			j.violate(CheckClaim, a.Session, ack, "%s delivered only %.0f ms after it was acknowledged (bound %d ms)", a.Op, lat, j.set.Bounds.ClaimMs)
		}
	}
	j.res.Claims = StatsOf(all)
}

// checkStops: a STOPPED session closes at the source within the stop bound,
// delivers nothing after it, and no tenure is acquired while it is STOPPED.
func (j *judge) checkStops() {
	bound := time.Duration(j.set.Bounds.StopMs) * time.Millisecond
	var closed []float64
	for _, a := range j.ev.Actions {
		if a.Op != "stop" || a.Acked.IsZero() {
			continue
		}
		v := j.sess[a.Session]
		next, ok := v.nextStart(a.At)
		if !ok {
			next = j.ev.End
		}
		if next.Sub(a.Acked) < bound {
			continue // started again before the bound: nothing to hold it to
		}
		j.res.StopsChecked++
		deadline := a.Acked.Add(bound)
		var closeAt time.Time
		for _, c := range v.conns {
			end := endOf(c, j.ev.End)
			if !c.OpenedAt.Before(next) || !end.After(a.Acked) {
				continue
			}
			switch {
			case c.OpenedAt.After(deadline):
				j.violate(CheckStop, v.id, c.OpenedAt.UnixNano(), "reopened %.1f s after the stop (connection #%d, by %s)", c.OpenedAt.Sub(a.Acked).Seconds(), c.ID, v.connOwner(c))
			case end.After(deadline):
				j.violate(CheckStop, v.id, a.Acked.UnixNano(), "connection #%d still open %.0f ms after the stop was acknowledged (bound %d ms)", c.ID, float64(end.Sub(a.Acked).Microseconds())/1e3, j.set.Bounds.StopMs)
			}
			if end.After(closeAt) {
				closeAt = end
			}
		}
		if !closeAt.IsZero() {
			closed = append(closed, float64(closeAt.Sub(a.Acked).Microseconds())/1e3)
		}
		late, acquired := 0, 0
		var lateAt, acqAt int64
		for _, d := range v.dels {
			if d.AtNs > deadline.UnixNano() && d.AtNs < next.UnixNano() {
				if late == 0 {
					lateAt = d.AtNs
				}
				late++
			}
			if a.Epoch >= 0 && d.Epoch > a.Epoch && d.AtNs >= a.Acked.UnixNano() && d.AtNs < next.UnixNano() {
				if acquired == 0 {
					acqAt = d.AtNs
				}
				acquired++
			}
		}
		if late > 0 {
			j.violate(CheckStop, v.id, lateAt, "%d deliveries more than %d ms after the stop was acknowledged", late, j.set.Bounds.StopMs)
		}
		if acquired > 0 {
			j.violate(CheckStop, v.id, acqAt, "%d deliveries under an epoch above %d (the epoch at the stop): a lease acquired while the session was STOPPED", acquired, a.Epoch)
		}
	}
	j.res.Stops = StatsOf(closed)
}
