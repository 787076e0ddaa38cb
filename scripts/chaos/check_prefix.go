// The checkpoint-prefix pass (an AWS sink): no checkpoint, release_seq or
// released last_seq past a seq missing at the destination.

package chaos

import (
	"math"
	"sort"
)

// checkPrefix: no checkpoint, release_seq or released last_seq past a seq
// missing at the destination.
func (j *judge) checkPrefix() {
	prefix := map[string]int64{}
	full := func(v *sessionView) int64 {
		if s, ok := prefix[v.id]; ok {
			return s
		}
		first := int64(math.MaxInt64)
		for _, c := range v.conns {
			if c.Sent > 0 {
				first = min(first, c.FirstSeq)
			}
		}
		if first == math.MaxInt64 {
			first = v.minD
		}
		if len(v.seen) == 0 && len(v.skipped) == 0 && first == v.minD {
			prefix[v.id] = 0
			return 0
		}
		s := first - 1
		for {
			_, seen := v.seen[s+1]
			if !seen && !v.skipped[s+1] {
				break
			}
			s++
		}
		prefix[v.id] = s
		return s
	}
	hold := func(session string, got int64, atNs int64, what string) {
		v := j.sess[session]
		if v == nil || v.nonReplay() {
			return // a source that cannot replay: holes are its loss (check_standby.go), not a checkpoint's
		}
		j.res.PrefixChecked++
		if s := full(v); got > s {
			j.violate(CheckPrefix, session, atNs, "%s %d, but seq %d is not at the destination (every seq up to %d is): a checkpoint past a message the destination never got", what, got, s+1, s)
		}
	}
	for _, snap := range []struct {
		s    Snapshot
		name string
	}{{j.ev.Settled, "after the last fault"}, {j.ev.Final, "after the shutdown"}} {
		for _, r := range snap.s.Rows {
			if r.LastSeq != nil && *r.LastSeq > 0 {
				hold(r.Session, *r.LastSeq, snap.s.At.UnixNano(), "the table's checkpoint / release_seq "+snap.name+" is")
			}
		}
	}
	rels := append([]Release(nil), j.ev.Releases...)
	sort.SliceStable(rels, func(a, b int) bool { return rels[a].AtNs < rels[b].AtNs })
	for _, r := range rels {
		if r.LastSeq > 0 {
			hold(r.Session, r.LastSeq, r.AtNs, r.Worker+" logged \""+r.Message+"\" at last_seq")
		}
	}
}
