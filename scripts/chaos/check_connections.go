// The one-connection check: each session's connections at the source, swept
// in time; at every instant the open ones belong to one tenure, two of one
// tenure only as a planned reconnect (one-connection).

package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

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
	if w, epoch, ok := feed.ParseTenure(tenure); !ok {
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
	if w, epoch, ok := feed.ParseTenure(tenure); ok {
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

func orOpen(reason string) string {
	if reason == "" {
		return "still open"
	}
	return reason
}
