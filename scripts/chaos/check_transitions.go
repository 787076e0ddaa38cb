// The ownership changes: what ended each tenure (causeOf, also the standby
// check's), the repeats each cause allows and the rebalancing moves'
// hand-offs (repeats, rebalance).

package chaos

import (
	"slices"
	"strings"
	"time"
)

// cause is what ended a tenure: the injected event nearest its last
// delivery, among those that can end it.
type cause struct {
	kind  string // crash | zombie | partition | handoff | stop | outage | unexplained
	fault int
	atNs  int64
}

// finalWriteSlack bounds the time from a tenure's last delivery to its
// final write (release or stop) when it ends gracefully: the read loop's stop
// and the sink's flush.
const finalWriteSlack = time.Second

func (j *judge) causeOf(v *sessionView, prev, next *tenure) cause {
	best := cause{kind: "unexplained", atNs: prev.lastAt}
	bestDist := int64(1 << 62)
	lo, hi := prev.lastAt-int64(2*time.Second), next.firstAt
	consider := func(kind string, fault int, at int64, dist int64) {
		if at < lo || at > hi {
			return
		}
		if dist < bestDist {
			best, bestDist = cause{kind: kind, fault: fault, atNs: at}, dist
		}
	}
	abs := func(x int64) int64 {
		if x < 0 {
			return -x
		}
		return x
	}
	for _, f := range j.ev.Faults {
		at := f.Start.UnixNano()
		switch f.Kind {
		case KindKill, KindZombie, KindPartition, KindRolling, KindClockOffset, KindScaleIn, KindSinkFreezeDynamo, KindIndexLag:
			if f.Worker != prev.worker {
				continue
			}
			k := map[string]string{KindKill: "crash", KindZombie: "zombie", KindPartition: "partition", KindRolling: "handoff", KindClockOffset: "handoff", KindScaleIn: "handoff",
				KindSinkFreezeDynamo: "partition", KindIndexLag: "crash"}[f.Kind]
			if (f.Kind == KindZombie || f.Kind == KindPartition || f.Kind == KindSinkFreezeDynamo) && prev.lastAt >= at && prev.lastAt <= f.End.Add(2*time.Second).UnixNano() {
				// It delivered while paused or cut off, or right after (the
				// fencing check judges that): the fault still ended it.
				consider(k, f.N, prev.lastAt, 0)
				continue
			}
			consider(k, f.N, at, abs(at-prev.lastAt))
		case KindDynamoDown, KindSinkRefuseDynamo, KindThrottle, KindAmbiguous:
			// A tenure the outage ended (or a storm: refused heartbeats
			// end trust, a worker may be declared dead; judged as
			// "storm") delivered until the worker fenced
			// itself (within the outage), or it had just stopped reading to
			// write its final seq (a hand-off, a rebalancing move, a stop)
			// when DynamoDB stopped answering, and the write failed: its
			// last delivery is then up to finalWriteSlack before the outage,
			// and its successor could only acquire after it.
			ended := prev.lastAt >= at && prev.lastAt <= f.End.Add(time.Second).UnixNano()
			cutOff := prev.lastAt >= at-int64(finalWriteSlack) && prev.lastAt < at && next.firstAt >= f.End.UnixNano()
			if ended || cutOff {
				if bestDist > 0 {
					kind := "outage"
					if f.Kind == KindThrottle || f.Kind == KindAmbiguous {
						kind = "storm"
					}
					best, bestDist = cause{kind: kind, fault: f.N, atNs: at}, 0
				}
			}
		}
	}
	for _, m := range j.moves[v.id] {
		if m.From != prev.worker {
			continue
		}
		d := abs(m.AtNs - prev.lastAt)
		if m.AtNs >= prev.lastAt && m.AtNs <= next.firstAt {
			// The sender logged the move between its last delivery and
			// the receiver's first: it ended the tenure itself, whatever
			// fault of its worker began around then (a freeze of its sink
			// and DynamoDB a moment before, when the move needed
			// neither: seen in a short chaos run).
			d = -1
		}
		consider("rebalance", 0, m.AtNs, d)
	}
	for _, a := range v.actions {
		if a.Op == "stop" && !a.Acked.IsZero() {
			at := a.Acked.UnixNano()
			consider("stop", a.Fault, at, abs(at-prev.lastAt))
		}
	}
	return best
}

// checkTransitions attributes every ownership change to the event that
// ended the previous tenure and bounds its raw repeats.
func (j *judge) checkTransitions() {
	by := map[string]*Transitions{}
	gaps := map[string][]float64{}
	bounds := map[string]int64{"crash": j.set.Bounds.ReplayCrash, "zombie": j.set.Bounds.ReplayCrash, "partition": j.set.Bounds.ReplayOutage, "outage": j.set.Bounds.ReplayOutage, "storm": j.set.Bounds.ReplayStorm}
	off := &j.res.ClockOffset
	skewed := func(w string) bool { inc := j.inc[w]; return inc != nil && inc.OffsetMs != 0 }
	for _, inc := range j.ev.Incarnations {
		if inc.OffsetMs != 0 {
			off.OffsetMs = inc.OffsetMs
			off.Workers = append(off.Workers, inc.ID)
		}
	}
	for _, id := range j.ids {
		v := j.sess[id]
		for i := 1; i < len(v.tenures); i++ {
			prev, next := v.tenures[i-1], v.tenures[i]
			c := j.causeOf(v, prev, next)
			takeover := c.kind == "crash" || c.kind == "zombie" || c.kind == "partition" || c.kind == "outage" || c.kind == "storm"
			if takeover && skewed(next.worker) {
				off.TookOver++
			}
			if takeover && skewed(prev.worker) {
				off.TakenOver++
			}
			tr := by[c.kind]
			if tr == nil {
				b, ok := bounds[c.kind]
				if !ok {
					b = -1
				}
				tr = &Transitions{Cause: c.kind, Bound: b}
				by[c.kind] = tr
			}
			tr.Count++
			tr.Repeats += next.repeats
			tr.MaxOne = max(tr.MaxOne, next.repeats)
			gaps[c.kind] = append(gaps[c.kind], float64(next.firstAt-prev.lastAt)/1e6)
			if gap := next.firstAt - prev.lastAt; c.kind == "rebalance" && gap > j.set.Bounds.HandoffMs*int64(time.Millisecond) && !j.disturbed(id, prev.lastAt, next.firstAt) {
				j.violate(CheckRebalance, id, next.firstAt, "rebalancing move from %s to %s: the receiver's first delivery %.0f ms after the sender's last (bound %d ms)",
					prev.key(), next.key(), float64(gap)/1e6, j.set.Bounds.HandoffMs)
			}
			if c.fault > 0 {
				j.addFaultRepeats(c.fault, next.repeats)
			}
			if next.repeats == 0 || v.standby {
				continue // a standby session's repeats are standby-repeats'
			}
			if tr.Bound < 0 {
				j.violate(CheckRepeats, id, next.firstAt, "%d raw repeat(s) when %s took over from %s after %s (none allowed)", next.repeats, next.key(), prev.key(), withArticle(causeText(c.kind)))
			} else if next.repeats > tr.Bound {
				j.violate(CheckRepeats, id, next.firstAt, "%d raw repeats when %s took over from %s after %s (bound %d)", next.repeats, next.key(), prev.key(), withArticle(causeText(c.kind)), tr.Bound)
			}
		}
		// Repeats of a seq by its own first tenure are counted as
		// out-of-order deliveries (checkDeliveries); a first tenure has no
		// predecessor to blame.
	}
	for _, k := range []string{"crash", "zombie", "partition", "outage", "storm", "handoff", "rebalance", "stop", "unexplained"} {
		if tr := by[k]; tr != nil {
			s := StatsOf(gaps[k])
			tr.GapP50, tr.GapMax = s.P50, s.Max
			j.res.Transitions = append(j.res.Transitions, *tr)
		}
	}
}

func causeText(k string) string {
	return map[string]string{
		"crash": "crash (kill -9)", "zombie": "zombie (SIGSTOP)", "partition": "partition from DynamoDB", "outage": "DynamoDB outage", "storm": "DynamoDB model storm (throttling, ambiguous errors)", "handoff": "graceful handoff (SIGTERM)",
		"rebalance": "rebalancing move (a directed graceful hand-off)", "stop": "stop / re-start through the API", "unexplained": "ownership change no injected fault explains",
	}[k]
}

func withArticle(s string) string {
	if strings.HasPrefix(s, "o") {
		return "an " + s
	}
	return "a " + s
}

func (j *judge) addFaultRepeats(n int, r int64) {
	if j.faultRepeats == nil {
		j.faultRepeats = map[int]int64{}
	}
	j.faultRepeats[n] += r
}

// disturbed reports whether a fault other than a graceful one overlapped
// [from, to] on session id's path: a source fault on the session, or a
// crash, zombie, partition or DynamoDB outage anywhere (the move's receiver
// may be the worker hit: then the session waits for its reservation to
// lapse, and the crash checks judge it).
func (j *judge) disturbed(id string, from, to int64) bool {
	margin := int64(2 * time.Second)
	for _, f := range j.ev.Faults {
		if f.Start.UnixNano() > to || f.End.UnixNano()+margin < from {
			continue
		}
		switch f.Kind {
		case KindKill, KindZombie, KindPartition, KindDynamoDown, KindIndexLag, KindThrottle, KindAmbiguous,
			KindSinkLatency, KindSinkRefuse, KindSinkFreeze, KindSinkFreezeDynamo, KindSinkRefuseDynamo:
			// A sink fault holds the sender's final flush.
			return true
		case KindSchedule:
			// Every connection opened in it ends at the max age: a
			// session's sender may be reconnecting at the move.
			return true
		case KindSourceDrop, KindRefuse:
			if slices.Contains(f.Sessions, id) {
				return true
			}
		}
	}
	return false
}
