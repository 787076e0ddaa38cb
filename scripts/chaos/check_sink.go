// Sink checks: sink-integrity (stdout lines or the destination), and with
// an AWS sink the trust deadline at the destination, the checkpoint prefix
// and the recovery after a sink fault.

package chaos

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"time"
)

// checkDestination is sink-integrity with an AWS sink: every message at
// the destination is a sink envelope naming an incarnation of the run,
// and no worker wrote sink lines to its stdout.
func (j *judge) checkDestination() {
	sk := j.ev.Sink // not nil: Analyze judges evidence without it as stdout lines
	if sk.Broken > 0 {
		j.violate(CheckSink, "", j.t0, "%d message(s) at the destination that are not sink envelopes", sk.Broken)
	}
	if sk.ReaderErr != "" {
		j.violate(CheckSink, "", j.t0, "the destination could not be read whole: %s", sk.ReaderErr)
	}
	unknown := map[string]int{}
	for _, d := range j.ev.Deliveries {
		if j.inc[d.Worker] == nil {
			unknown[d.Worker]++
		}
	}
	sk.Unknown = 0
	// A skip is the worker's word: it must name a message the proxy
	// refused permanently (at every attempt), never one it accepted or
	// refused only transiently.
	refused := map[RecordRef]bool{}
	for _, r := range sk.Refused {
		refused[r] = true
	}
	bad := map[string][]int64{}
	for _, k := range j.ev.Skips {
		if sk.Refused == nil && sk.PermanentlyRefused > 0 {
			break // evidence saved before the proxy's refusals were kept
		}
		if !refused[RecordRef{Session: k.Session, Seq: k.Seq, Sub: k.Sub}] {
			bad[k.Session] = append(bad[k.Session], k.Seq)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(bad)) {
		j.violate(CheckNoLoss, id, j.t0, "the worker logged %d message(s) as skipped after a permanent refusal that the sink never refused permanently, e.g. seq %v: a message lost, not skipped", len(bad[id]), bad[id][:min(len(bad[id]), 8)])
	}
	for w, n := range unknown {
		sk.Unknown += n
		j.violate(CheckSink, "", j.t0, "%d record(s) at the destination name worker %q, no incarnation of the run", n, w)
	}
	lines := 0
	for _, sf := range j.ev.SinkFiles {
		lines += sf.Lines
	}
	if lines > 0 || j.ev.BadLines > 0 {
		j.violate(CheckSink, "", j.t0, "the workers wrote %d line(s) to their stdout sink files (%d not records) with the %s sink", lines, j.ev.BadLines, j.set.Sink)
	}
}

// freezeWindow is a time the harness had some workers' DynamoDB path frozen:
// from F their trust deadline is at most F + TTL − margin.
type freezeWindow struct {
	fault   int
	kind    string
	from    int64 // F
	until   int64 // the thaw (math.MaxInt64: the worker was declared dead)
	workers map[string]bool
}

// freezeWindows lists the harness's DynamoDB-path freezes.
func (j *judge) freezeWindows() []freezeWindow {
	var out []freezeWindow
	for _, f := range j.ev.Faults {
		w := freezeWindow{fault: f.N, kind: f.Kind, from: f.Start.UnixNano(), until: f.End.UnixNano(), workers: map[string]bool{}}
		switch f.Kind {
		case KindDynamoDown, KindSinkRefuseDynamo:
			for _, inc := range j.ev.Incarnations {
				if !inc.Started.After(f.Start) && (inc.Ended.IsZero() || inc.Ended.After(f.Start)) {
					w.workers[inc.ID] = true
				}
			}
		case KindPartition, KindZombie, KindSinkFreezeDynamo:
			// Declared dead while frozen: it never trusts again.
			w.workers[f.Worker] = true
			w.until = math.MaxInt64
		default:
			continue
		}
		out = append(out, w)
	}
	return out
}

// checkTrust: nothing of a frozen worker's tenures reaches the destination
// after F + TTL − margin + the request timeout + the tolerance, while the
// freeze lasts.
func (j *judge) checkTrust() {
	b := j.set.Bounds
	if b.TrustDeadlineMs == 0 || !j.set.destSink() {
		return
	}
	bound := b.TrustDeadlineMs * int64(time.Millisecond)
	for _, w := range j.freezeWindows() {
		type agg struct {
			n      int
			first  int64
			latest int64
			epochs map[int64]bool
			worker string
		}
		late := map[string]*agg{}
		var latest int64 = -1
		for _, d := range j.ev.Deliveries {
			if !w.workers[d.Worker] || d.AtNs <= w.from || d.AtNs >= w.until {
				continue
			}
			latest = max(latest, d.AtNs-w.from)
			if d.AtNs <= w.from+bound {
				continue
			}
			a := late[d.Session]
			if a == nil {
				a = &agg{first: d.AtNs, epochs: map[int64]bool{}, worker: d.Worker}
				late[d.Session] = a
			}
			a.n++
			a.first = min(a.first, d.AtNs)
			a.latest = max(a.latest, d.AtNs)
			a.epochs[d.Epoch] = true
		}
		j.res.TrustLateMs = append(j.res.TrustLateMs, max(float64(latest)/1e6, 0)) // 0: nothing after the freeze
		for _, id := range slices.Sorted(maps.Keys(late)) {
			a := late[id]
			j.violate(CheckTrust, id, a.first, "%s (#%d): %d record(s) of %s (epochs %v) reached the destination %.0f–%.0f ms after its DynamoDB path was frozen, past its trust deadline + the request timeout (bound %d ms)",
				w.kind, w.fault, a.n, a.worker, slices.Sorted(maps.Keys(a.epochs)), float64(a.first-w.from)/1e6, float64(a.latest-w.from)/1e6, b.TrustDeadlineMs)
		}
	}
}

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

// sinkFault measures a sink fault: every session delivering when it began
// delivers a seq it had not delivered by the end, within the bound after
// the end.
func (j *judge) sinkFault(fr *FaultResult) {
	// After refusals, each of a session's records refused permanently that
	// no delivery had passed by the end is still sent at its remaining
	// attempts, one after another (its later entries wait behind it): the
	// bound grows by (attempts − 1) × the longest backoff for each one
	// beyond the first (the proxy's own record of what it refused).
	pending := map[string][]int64{}
	if (fr.Kind == KindSinkRefuse || fr.Kind == KindSinkRefuseDynamo) && j.ev.Sink != nil {
		for _, r := range j.ev.Sink.Refused {
			pending[r.Session] = append(pending[r.Session], r.Seq)
		}
	}
	perRecord := int64(sinkPermanentAttempts-1) * sinkRetryMax.Milliseconds()
	j.newSeqAfter(fr, CheckSinkRecovery, " at the destination", "no new seq at the destination after the fault was lifted", func(id string, maxBefore int64) (int64, string) {
		extra := int64(0)
		for _, q := range pending[id] {
			if q > maxBefore {
				extra++
			}
		}
		return max(extra-1, 0) * perRecord, fmt.Sprintf("; %d record(s) refused permanently still pending", extra)
	})
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

func (j *judge) checkSinks() {
	if j.set.destSink() {
		j.checkDestination()
		return
	}
	if j.ev.BadLines > 0 {
		j.violate(CheckSink, "", j.t0, "%d stdout line(s) that are not sink records", j.ev.BadLines)
	}
	lines := 0
	for _, sf := range j.ev.SinkFiles {
		lines += sf.Lines
		if sf.Bad > 0 {
			j.violate(CheckSink, "", j.t0, "%s: %d unparsable line(s)", sf.Path, sf.Bad)
		}
		if sf.Foreign > 0 {
			j.violate(CheckSink, "", j.t0, "%s: %d record(s) naming a worker that is not one of slot %d's incarnations", sf.Path, sf.Foreign, sf.Slot)
		}
	}
	if len(j.ev.SinkFiles) > 0 && lines != len(j.ev.Deliveries) {
		j.violate(CheckSink, "", j.t0, "the sink files hold %d lines, the harness received %d records", lines, len(j.ev.Deliveries))
	}
}
