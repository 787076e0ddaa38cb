// Ownership checks: one connection per session at the source, the
// ownership changes (what ended each tenure, the repeats it allows) and the
// sessions table at the end (end-ownership, release).

package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// checkConnections sweeps each session's connections at the source: at
// every instant the open ones must belong to one tenure. Connections of
// different tenures (a connection without one is its own) open at once are
// an overlap of two owners, a violation. Two connections of one non-empty
// tenure are a planned reconnect (make-before-break) when the session was
// started with planned reconnects, the tenure is an owner of record (that
// worker and epoch delivered the session), there are at most two and they
// overlap no longer than the switch timeout + 1 s; otherwise a violation.
func (j *judge) checkConnections() {
	for _, id := range j.ids {
		v := j.sess[id]
		type ev struct {
			t     int64
			delta int
			c     int
		}
		var evs []ev
		for i, c := range v.conns {
			evs = append(evs, ev{c.OpenedAt.UnixNano(), +1, i}, ev{endOf(c, j.ev.End).UnixNano(), -1, i})
		}
		sort.Slice(evs, func(a, b int) bool {
			if evs[a].t == evs[b].t {
				return evs[a].delta < evs[b].delta
			}
			return evs[a].t < evs[b].t
		})
		open := map[int]bool{}
		var cur *Overlap
		var curStart int64
		involved := map[int]bool{}
		planned := map[string]*tenureOverlap{} // tenure → its connections' overlap under way
		for _, e := range evs {
			if e.delta > 0 {
				open[e.c] = true
			} else {
				delete(open, e.c)
			}
			groups, per := v.tenureGroups(open)
			if groups > 1 {
				if cur == nil {
					cur, curStart = &Overlap{Session: id, T: j.sec(e.t)}, e.t
					clear(involved)
				}
				owners := 0
				for c := range open {
					if !v.conns[c].Standby { // a standby beside them is no owner
						involved[c] = true
						owners++
					}
				}
				cur.Max = max(cur.Max, owners)
			} else if cur != nil {
				cur.DurMs = float64(e.t-curStart) / 1e6
				cur.Conns = v.connNames(involved)
				j.res.Overlaps = append(j.res.Overlaps, *cur)
				j.violate(CheckOneConn, id, curStart, "%d connections open at once for %.1f ms: %s", cur.Max, cur.DurMs, strings.Join(cur.Conns, ", "))
				cur = nil
			}
			for _, t := range slices.Sorted(maps.Keys(per)) {
				if cs := per[t]; len(cs) > 1 {
					to := planned[t]
					if to == nil {
						to = &tenureOverlap{start: e.t, conns: map[int]bool{}}
						planned[t] = to
					}
					to.max = max(to.max, len(cs))
					for _, c := range cs {
						to.conns[c] = true
					}
				}
			}
			for _, t := range slices.Sorted(maps.Keys(planned)) {
				if len(per[t]) < 2 {
					j.plannedOverlap(v, t, planned[t], e.t)
					delete(planned, t)
				}
			}
		}
		for _, r := range v.refused {
			if r.RefusedBy == string(feed.ModeRefuseNewer) {
				j.violate(CheckOneConn, id, r.OpenedAt.UnixNano(), "a connection attempt was refused by the source's one-connection policy: another connection of the session was open (two would-be owners)")
			}
		}
	}
}

// tenureOverlap is a time two or more connections of one tenure were open.
type tenureOverlap struct {
	start int64
	max   int
	conns map[int]bool // indexes into the session's conns
}

// tenureGroups sorts the open connections (indexes into v.conns) by
// tenure: groups counts the owners they stand for (a connection without a
// tenure is its own; a standby connection, ConnRecord.Standby, none), per
// lists those of each non-empty tenure.
func (v *sessionView) tenureGroups(open map[int]bool) (groups int, per map[string][]int) {
	per = map[string][]int{}
	for _, c := range slices.Sorted(maps.Keys(open)) {
		if v.conns[c].Standby {
			continue // a standby's connection, admitted as such by the feed: no owner
		}
		t := v.conns[c].Tenure
		if t == "" {
			groups++
			continue
		}
		if len(per[t]) == 0 {
			groups++
		}
		per[t] = append(per[t], c)
	}
	return groups, per
}

// connNames names the connections cs of v for a violation or an overlap.
func (v *sessionView) connNames(cs map[int]bool) []string {
	var out []string
	for _, c := range slices.Sorted(maps.Keys(cs)) {
		cr := v.conns[c]
		owner := v.connOwner(cr)
		if cr.Tenure != "" {
			owner += ", tenure " + cr.Tenure
		}
		out = append(out, fmt.Sprintf("#%d by %s (%s)", cr.ID, owner, orOpen(cr.Reason)))
	}
	return out
}

// plannedOverlap judges the overlap o of connections of one tenure that
// ended at endNs: a planned reconnect's, or a violation.
func (j *judge) plannedOverlap(v *sessionView, tenure string, o *tenureOverlap, endNs int64) {
	ov := Overlap{Session: v.id, T: j.sec(o.start), DurMs: float64(endNs-o.start) / 1e6, Max: o.max, Conns: v.connNames(o.conns), Tenure: tenure}
	var why []string
	if !v.planned {
		why = append(why, "the session was not started with planned reconnects")
	}
	if w, epoch, ok := parseTenure(tenure); !ok {
		why = append(why, fmt.Sprintf("the tenure %q is not <worker id>/<lease epoch>", tenure))
	} else if v.byKey[fmt.Sprintf("%s@%d", w, epoch)] == nil {
		why = append(why, fmt.Sprintf("%s@%d never delivered the session: no owner of record", w, epoch))
	}
	if o.max > 2 {
		why = append(why, fmt.Sprintf("%d connections of one tenure (a planned reconnect holds two)", o.max))
	}
	if b := j.set.Bounds.PlannedOverlapMs; b > 0 && ov.DurMs > float64(b) {
		why = append(why, fmt.Sprintf("longer than the switch timeout + 1 s (%d ms)", b))
	}
	// The gap the switch left: the session's last delivery before the
	// older connection closed → its first after, by the same tenure (an
	// overlap a kill or a hand-off ended has no switch to measure).
	if w, epoch, ok := parseTenure(tenure); ok {
		i := sort.Search(len(v.dels), func(i int) bool { return v.dels[i].AtNs > endNs })
		if i > 0 && i < len(v.dels) && v.dels[i].Worker == w && v.dels[i].Epoch == epoch {
			j.plannedDark = append(j.plannedDark, float64(v.dels[i].AtNs-v.dels[i-1].AtNs)/1e6)
		}
	}
	if len(why) > 0 {
		ov.Violation = true
		j.violate(CheckOneConn, v.id, o.start, "%d connections of one tenure %s open at once for %.1f ms, not a planned reconnect: %s (%s)",
			o.max, tenure, ov.DurMs, strings.Join(why, "; "), strings.Join(ov.Conns, ", "))
	}
	j.res.PlannedOverlaps = append(j.res.PlannedOverlaps, ov)
}

// parseTenure splits a tenure header's "<worker id>/<lease epoch>".
func parseTenure(t string) (worker string, epoch int64, ok bool) {
	i := strings.LastIndexByte(t, '/')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(t[i+1:], 10, 64)
	if err != nil || n < 0 {
		return "", 0, false
	}
	return t[:i], n, true
}

func orOpen(reason string) string {
	if reason == "" {
		return "still open"
	}
	return reason
}

// faultCause is what ended a tenure: the injected event nearest its last
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
		if m.From == prev.worker {
			consider("rebalance", 0, m.AtNs, abs(m.AtNs-prev.lastAt))
		}
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

// checkTable reads the two snapshots of the sessions table: sessions with
// their checkpoints, and worker records.
func (j *judge) checkTable() {
	running := func(id string, at time.Time) (known, up bool) {
		inc := j.inc[id]
		if inc == nil {
			return false, false
		}
		return true, inc.Ended.IsZero() || inc.Ended.After(at)
	}
	s := j.ev.Settled
	for _, r := range s.Rows {
		v := j.view(r.Session)
		want := v.startedAt(s.At)
		if (r.State == schema.StateStarted) != want {
			j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "the table says %s, the harness's last acknowledged request says otherwise", r.State)
		}
		if r.Owner != "" {
			rec, ok := s.worker(r.Owner)
			known, up := running(r.Owner, s.At)
			switch {
			case !ok || !known:
				j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "owned by %q (epoch %d): no such worker record or process", r.Owner, r.Epoch)
				continue
			case rec.State != schema.WorkerAlive:
				j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "owned by the %s worker %q (epoch %d) after the last fault: nobody took it over", rec.State, r.Owner, r.Epoch)
				continue
			case !up:
				j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "owned by %q (epoch %d), whose process ended, yet its record says ALIVE", r.Owner, r.Epoch)
				continue
			}
		}
		if r.orphan() {
			j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "STARTED but owned by no worker after the last fault")
		}
	}
	for _, w := range s.Workers {
		known, up := running(w.ID, s.At)
		switch {
		case !known:
			j.violate(CheckEndOwners, "", s.At.UnixNano(), "a worker record %q (%s) no process of the run had", w.ID, w.State)
		case up && w.State != schema.WorkerAlive:
			j.violate(CheckEndOwners, "", s.At.UnixNano(), "%s is running but its record says %s (declared by %q)", w.ID, w.State, w.DeclaredBy)
		case !up && w.State == schema.WorkerAlive:
			j.violate(CheckEndOwners, "", s.At.UnixNano(), "%s ended (%s) but its record still says ALIVE after the last fault: nobody declared it dead", w.ID, j.inc[w.ID].End)
		}
	}
	f := j.ev.Final
	for _, r := range f.Rows {
		v := j.view(r.Session)
		if r.Owner != "" {
			j.violate(CheckRelease, r.Session, f.At.UnixNano(), "still owned by %q (epoch %d) after every worker stopped gracefully (want lease_owner absent)", r.Owner, r.Epoch)
		}
		if len(v.seen) == 0 {
			continue
		}
		switch {
		case r.LastSeq == nil:
			if r.State == schema.StateStarted {
				j.violate(CheckRelease, r.Session, f.At.UnixNano(), "no checkpoint, %d delivered", v.maxD)
			}
		case *r.LastSeq > v.maxHandled():
			j.violate(CheckNoLoss, r.Session, f.At.UnixNano(), "checkpoint %d ahead of the highest seq delivered %d: seqs in between would never be delivered", *r.LastSeq, v.maxHandled())
		case r.State == schema.StateStarted && *r.LastSeq < v.maxHandled():
			j.violate(CheckRelease, r.Session, f.At.UnixNano(), "final checkpoint %d behind the highest seq delivered %d after a graceful shutdown", *r.LastSeq, v.maxHandled())
		}
	}
	for _, inc := range j.ev.Incarnations {
		rec, ok := f.worker(inc.ID)
		want := schema.WorkerLeft
		if inc.End == "kill-9" || inc.End == "dead" || inc.End == "alive" || inc.End == "exited" {
			want = schema.WorkerDead
		}
		if !ok || rec.State != want {
			got := "no record"
			if ok {
				got = rec.State
			}
			j.violate(CheckRelease, "", f.At.UnixNano(), "%s (%s) ended with its record %s, want %s", inc.ID, inc.End, got, want)
		}
		switch inc.End {
		case "sigterm", "shutdown":
			if inc.Exit != "0" {
				j.violate(CheckRelease, "", inc.Ended.UnixNano(), "%s exited %q after SIGTERM (want 0 within the shutdown deadline)", inc.ID, inc.Exit)
			}
		case "exited":
			j.violate(CheckRelease, "", inc.Ended.UnixNano(), "%s exited without being asked to (%s)", inc.ID, inc.Exit)
		}
	}
}
