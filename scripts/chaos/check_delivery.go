// Delivery checks: tenures, stale epochs and order per session, then loss and
// gaps against what the feed sent (no-loss, order, fencing by epoch).

package chaos

import (
	"fmt"
	"sort"

	"github.com/wsfleet/wsfleet/scripts/devstack"
)

// checkDeliveries walks every session's deliveries in arrival order: tenures,
// stale epochs, order, repeats, then loss and gaps against what the feed sent.
func (j *judge) checkDeliveries() {
	for _, id := range j.ids {
		v := j.sess[id]
		var maxEpoch int64
		var maxFirst int64 = -1 << 62
		v.minD, v.maxD = 1<<62, -1<<62
		for _, d := range v.dels {
			k := fmt.Sprintf("%s@%d", d.Worker, d.Epoch)
			t := v.byKey[k]
			if t == nil {
				t = &tenure{worker: d.Worker, epoch: d.Epoch, firstAt: d.AtNs, firstSeq: d.Seq, maxSeq: -1 << 62}
				v.byKey[k] = t
				v.tenures = append(v.tenures, t)
			}
			t.n++
			t.lastAt = d.AtNs
			if d.Epoch < maxEpoch {
				if t.stale == 0 {
					t.staleFirst = d.AtNs
				}
				t.stale++
			}
			maxEpoch = max(maxEpoch, d.Epoch)
			if d.Seq <= t.maxSeq {
				t.badOrder++
			}
			t.maxSeq = max(t.maxSeq, d.Seq)
			if by, ok := v.seen[d.Seq]; ok {
				if by != t {
					t.repeats++ // across an ownership change (checkTransitions)
				}
				j.res.Totals.Repeats++
				continue
			}
			v.seen[d.Seq] = t
			if d.Seq < maxFirst {
				v.inverted++
			}
			maxFirst = max(maxFirst, d.Seq)
			v.minD, v.maxD = min(v.minD, d.Seq), max(v.maxD, d.Seq)
		}
		j.res.Totals.Tenures += len(v.tenures)
		for _, t := range v.tenures {
			if inc := j.inc[t.worker]; inc != nil && inc.OffsetMs != 0 {
				j.res.ClockOffset.Tenures++
			}
		}
		j.res.Totals.Distinct += int64(len(v.seen))
		for _, t := range v.tenures {
			j.res.Totals.Stale += int64(t.stale)
			if t.stale > 0 {
				j.violate(CheckFencing, id, t.staleFirst, "%d deliveries by %s under epoch %d after a newer epoch of the session had delivered", t.stale, t.worker, t.epoch)
			}
			if t.badOrder > 0 && j.set.destSink() {
				j.res.Totals.Reordered += int64(t.badOrder)
			} else if t.badOrder > 0 {
				j.violate(CheckOrder, id, t.firstAt, "%d deliveries by %s@%d not above the tenure's previous one (out of order or repeated within one tenure)", t.badOrder, t.worker, t.epoch)
			}
		}
		if j.set.Sink == devstack.SinkKinesis {
			j.streamOrder(v)
		}
		if v.inverted > 0 && !j.set.destSink() {
			j.violate(CheckOrder, id, j.t0, "%d first deliveries arrived after a higher seq had been delivered", v.inverted)
		}
		j.lossAndGaps(v)
	}
}

// streamOrder judges a session's order on the kinesis sink: in the
// stream's order (Delivery.Pos; arrival order when unknown), each tenure's
// arrivals rise, but for repeats of what the tenure wrote already (a
// request sent again after a timeout Kinesis applied).
func (j *judge) streamOrder(v *sessionView) {
	dels := append([]Delivery(nil), v.dels...)
	sort.SliceStable(dels, func(a, b int) bool { return dels[a].Pos < dels[b].Pos })
	type pos struct{ seq, sub int64 }
	type state struct {
		max     pos
		any     bool
		written map[pos]bool
		bad     int
		firstAt int64
	}
	by := map[string]*state{}
	var keys []string
	for _, d := range dels {
		k := fmt.Sprintf("%s@%d", d.Worker, d.Epoch)
		st := by[k]
		if st == nil {
			st = &state{written: map[pos]bool{}}
			by[k] = st
			keys = append(keys, k)
		}
		p := pos{d.Seq, d.Sub}
		below := st.any && (p.seq < st.max.seq || p.seq == st.max.seq && p.sub <= st.max.sub)
		if below && !st.written[p] {
			if st.bad == 0 {
				st.firstAt = d.AtNs
			}
			st.bad++
		}
		st.written[p] = true
		if !below {
			st.max, st.any = p, true
		}
	}
	for _, k := range keys {
		if st := by[k]; st.bad > 0 {
			j.res.Totals.Inverted += int64(st.bad)
			j.violate(CheckOrder, v.id, st.firstAt, "%d arrivals by %s in the stream below a seq the tenure had written before (a partition key's order)", st.bad, k)
		}
	}
}

type span struct{ lo, hi int64 }

func (j *judge) lossAndGaps(v *sessionView) {
	if v.nonReplay() {
		return // judged by the feed seqs in its data (check_standby.go)
	}
	var sent []span
	for _, c := range v.conns {
		if c.Sent > 0 {
			sent = append(sent, span{c.FirstSeq, c.LastSeq})
		}
	}
	sort.Slice(sent, func(a, b int) bool { return sent[a].lo < sent[b].lo })
	var merged []span
	for _, s := range sent {
		if n := len(merged); n > 0 && s.lo <= merged[n-1].hi+1 {
			merged[n-1].hi = max(merged[n-1].hi, s.hi)
			continue
		}
		merged = append(merged, s)
	}
	isSent := func(q int64) bool {
		i := sort.Search(len(merged), func(i int) bool { return merged[i].hi >= q })
		return i < len(merged) && merged[i].lo <= q
	}
	var lost, never []int64
	var nLost, nGap, nTail, nNever int64
	for _, s := range merged {
		j.res.Totals.SentSeqs += s.hi - s.lo + 1
		for q := s.lo; q <= s.hi; q++ {
			if _, ok := v.seen[q]; ok {
				continue
			}
			if v.skipped[q] {
				continue // the worker skipped it after a permanent refusal, and logged it
			}
			if q < v.maxD {
				nLost++
				if len(lost) < 8 {
					lost = append(lost, q)
				}
			} else {
				nTail++
			}
		}
	}
	if len(v.seen) > 0 {
		var gaps []int64
		for q := v.minD; q <= v.maxD; q++ {
			if _, ok := v.seen[q]; !ok && !isSent(q) && !v.skipped[q] {
				nGap++
				if len(gaps) < 8 {
					gaps = append(gaps, q)
				}
			}
		}
		if nGap > 0 {
			j.violate(CheckNoLoss, v.id, j.t0, "%d seq(s) inside the delivered range never sent by the source (the worker resumed past them), e.g. %v", nGap, gaps)
		}
		for q := range v.seen {
			if !isSent(q) {
				nNever++
				if len(never) < 8 {
					never = append(never, q)
				}
			}
		}
	}
	if nLost > 0 {
		j.violate(CheckNoLoss, v.id, j.t0, "%d seq(s) sent by the feed and never delivered, e.g. %v", nLost, lost)
	}
	if nNever > 0 {
		j.violate(CheckNoLoss, v.id, j.t0, "%d seq(s) delivered that the feed never sent, e.g. %v", nNever, never)
	}
	j.res.Totals.Lost += nLost
	j.res.Totals.Gaps += nGap
	j.res.Totals.Tail += nTail
}
