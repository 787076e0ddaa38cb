// The source's faults: a drop, a refusal, the connections closed at their max
// age (recovery-source).

package chaos

import (
	"slices"
	"time"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

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
