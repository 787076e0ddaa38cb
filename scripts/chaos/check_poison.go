// The poisoned source's checks (source-poison, an AWS sink): every poisoned
// message reaches the destination byte for byte, in whichever form the
// envelope carries it; nothing of an episode is stored more often than
// the sink's attempts of one entry; no session stays stuck behind one.

package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/wsfleet/wsfleet/scripts/sinkfault"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// PoisonResult sums up what the sources sent poisoned and what reached the
// destination of it.
type PoisonResult struct {
	Sent      int64          `json:"sent"`      // poisoned seqs the source sent (distinct)
	Delivered int64          `json:"delivered"` // of those, at the destination
	Intact    int64          `json:"intact"`    // of those, every copy byte for byte
	Altered   int64          `json:"altered"`   // of those, a copy altered or without its payload
	Forms     map[string]int `json:"forms,omitempty"`
	// MaxCopies is the most copies of one record (one envelope: session,
	// seq, epoch, worker) stored during an episode or its recovery.
	MaxCopies int `json:"max_copies"`
}

// poisonCopiesMax is the most copies of one record the destination may
// hold from an episode: the sink's attempts of an entry refused
// permanently (a poisoned entry the destination stores but the SDK calls
// failed, an MD5 mismatch, is sent again; the worker must give it up or
// send it in another form, not retry it forever).
const poisonCopiesMax = sinkPermanentAttempts

// checkPoison judges every poisoning episode (FeedStats.Poisons) against
// the destination (an AWS sink; the stdout sink's lines are not read for
// their payload).
func (j *judge) checkPoison() {
	spans := j.ev.FeedStats.Poisons
	if len(spans) == 0 || !j.set.destSink() {
		return
	}
	pr := &j.res.Poison
	type key struct {
		s string
		q int64
	}
	arrivals := map[key][]PoisonArrival{}
	for _, a := range j.ev.Poisoned {
		arrivals[key{a.Session, a.Seq}] = append(arrivals[key{a.Session, a.Seq}], a)
	}
	var stuck []string
	for _, fr := range j.res.Faults {
		if fr.Kind == KindSourcePoison {
			stuck = append(stuck, fr.Unrecovered...)
		}
	}
	bySession := map[string][]feed.PoisonSpan{}
	for _, sp := range spans {
		bySession[sp.Session] = append(bySession[sp.Session], sp)
	}
	for _, id := range slices.Sorted(maps.Keys(bySession)) {
		v := j.sess[id]
		if v == nil || v.nonReplay() {
			continue // never picked (poisonStep): its envelope seqs are not the feed's
		}
		var altered []int64
		var nAltered int64
		var stuckAt int64 = -1
		var stuckNs int64
		for q := range j.sentSeqs(v) {
			var kind feed.Poison
			var from int64
			for _, sp := range bySession[id] {
				if sp.Has(q) {
					kind, from = sp.Kind, sp.Start.UnixNano()
				}
			}
			if kind == feed.PoisonOff {
				continue
			}
			pr.Sent++
			if _, ok := v.seen[q]; !ok {
				if !v.skipped[q] && q > v.maxD && (stuckAt < 0 || q < stuckAt) {
					stuckAt, stuckNs = q, from // no-loss judges a seq below the highest delivered
				}
				continue
			}
			pr.Delivered++
			as := arrivals[key{id, q}]
			copies := 0
			for _, d := range v.dels {
				if d.Seq == q && d.Sub == 0 {
					copies++
				}
			}
			ok := len(as) == copies
			for _, a := range as {
				ok = ok && a.Kind == kind && a.Intact
				if pr.Forms == nil {
					pr.Forms = map[string]int{}
				}
				pr.Forms[a.Form]++
			}
			if ok {
				pr.Intact++
				continue
			}
			nAltered++
			if len(altered) < 8 {
				altered = append(altered, q)
			}
		}
		pr.Altered += nAltered
		if nAltered > 0 {
			j.violate(CheckSink, id, j.t0, "%d poisoned message(s) at the destination not byte for byte what the source sent (altered, or without their payload), e.g. seqs %v%s",
				nAltered, altered, j.poisonForms(id, altered))
		}
		if stuckAt >= 0 && v.startedAt(j.ev.End) && !slices.Contains(stuck, id) {
			j.violate(CheckSinkRecovery, id, stuckNs, "poisoned seq %d never reached the destination and nothing after it did (the session stuck behind it)", stuckAt)
		}
	}
	j.poisonCopies()
}

// sentSeqs is every seq the source sent the session (its connections'
// ranges).
func (j *judge) sentSeqs(v *sessionView) map[int64]bool {
	out := map[int64]bool{}
	for _, c := range v.conns {
		for q := c.FirstSeq; c.Sent > 0 && q <= c.LastSeq; q++ {
			out[q] = true
		}
	}
	return out
}

// poisonForms names the forms the poisoned seqs qs of session id arrived
// in, for a violation's detail.
func (j *judge) poisonForms(id string, qs []int64) string {
	forms := map[string]int{}
	for _, a := range j.ev.Poisoned {
		if a.Session == id && slices.Contains(qs, a.Seq) {
			f := a.Form
			if !a.Intact {
				f += " (altered)"
			}
			forms[f]++
		}
	}
	if len(forms) == 0 {
		return "; none carried a poisoned payload"
	}
	return fmt.Sprintf("; arrived as %v", forms)
}

// poisonCopies: a record first stored during a source-poison episode or
// its recovery (up to the sink recovery bound after it, or the next fault's
// start when sooner: a sink fault's retries are its own) is stored at most
// poisonCopiesMax times (one tenure: a sink's retries; a replay by a newer
// tenure is another record).
func (j *judge) poisonCopies() {
	rec := time.Duration(j.set.Bounds.SinkRecoverMs) * time.Millisecond
	type rk = sinkfault.Key
	first := map[rk]int64{}
	copies := map[rk]int{}
	for _, d := range j.ev.Deliveries {
		k := rk{Session: d.Session, Seq: d.Seq, Sub: d.Sub, Epoch: d.Epoch, Worker: d.Worker}
		copies[k]++
		if f, ok := first[k]; !ok || d.AtNs < f {
			first[k] = d.AtNs
		}
	}
	over := map[string][]rk{}
	for _, f := range j.ev.Faults {
		if f.Kind != KindSourcePoison {
			continue
		}
		lo, hi := f.Start.UnixNano(), f.End.Add(rec).UnixNano()
		for _, g := range j.ev.Faults {
			if g.Kind != KindPolicy && g.Start.After(f.End) {
				hi = min(hi, g.Start.UnixNano())
			}
		}
		for k, n := range copies {
			if first[k] < lo || first[k] > hi {
				continue
			}
			j.res.Poison.MaxCopies = max(j.res.Poison.MaxCopies, n)
			if n > poisonCopiesMax && !slices.Contains(over[k.Session], k) {
				over[k.Session] = append(over[k.Session], k)
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(over)) {
		ks := over[id]
		sort.Slice(ks, func(a, b int) bool {
			return copies[ks[a]] > copies[ks[b]] || (copies[ks[a]] == copies[ks[b]] && ks[a].Seq < ks[b].Seq)
		})
		k := ks[0]
		j.violate(CheckRepeats, id, first[k], "%d record(s) of a source-poison episode stored more than %d times within one tenure (seq %d by %s@%d: %d copies): the sink sent again what the destination had stored",
			len(ks), poisonCopiesMax, k.Seq, k.Worker, k.Epoch, copies[k])
	}
}
