// Package evidence judges a run of wsfleet from evidence the workers do not
// produce about themselves: the feed's connection records (who was connected
// to the source when, and which seqs the source wrote to each connection) and
// the sink records (which seqs reached the sink, under which worker and lease
// epoch, when). It computes, per session and in total: messages lost,
// messages replayed (raw repeats) attributed to the ownership change that
// caused them (crash, graceful handoff, other), gaps the source never sent,
// deliveries under a stale epoch, the most connections the source saw open
// at once, the time to recovery after each injected fault, and how fast
// stopped sessions closed. The demo, the chaos harness and the benchmarks
// share it.
package evidence

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/scripts/feed"
)

// Fault kinds.
const (
	FaultKill = "kill-9"  // SIGKILL of a worker: a crash
	FaultTerm = "sigterm" // SIGTERM of a worker: a graceful handoff
	FaultStop = "sigstop" // SIGSTOP of a worker (a zombie while paused)
)

// Fault is one injected fault on a worker.
type Fault struct {
	Kind   string    `json:"kind"`
	Worker string    `json:"worker"` // the worker id of the incarnation hit
	At     time.Time `json:"at"`
}

// Input is everything a judgement needs.
type Input struct {
	Conns  []feed.ConnRecord
	Sinks  []devstack.SinkRecord
	Faults []Fault
	// Stopped are the sessions stopped through the API, with when the stop
	// was acknowledged.
	Stopped map[string]time.Time
	// Rate is the feed's message rate (messages/s per session).
	Rate float64
	// CheckpointEvery is the workers' checkpoint interval (their renew
	// interval: checkpoints ride on renewals).
	CheckpointEvery time.Duration
}

// Stats are latency figures in milliseconds.
type Stats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// StatsOf computes the Stats of samples in milliseconds.
func StatsOf(ms []float64) Stats {
	if len(ms) == 0 {
		return Stats{}
	}
	s := append([]float64(nil), ms...)
	sort.Float64s(s)
	q := func(p float64) float64 { return s[int(math.Ceil(p*float64(len(s))))-1] }
	return Stats{N: len(s), P50: q(0.5), P99: q(0.99), Max: s[len(s)-1]}
}

// FaultResult is the recovery after one fault.
type FaultResult struct {
	Fault
	Affected    int      `json:"affected"`    // sessions whose latest delivery before the fault was by the worker hit
	Recovered   int      `json:"recovered"`   // of which another worker delivered again
	Unrecovered []string `json:"unrecovered"` // never delivered again by another worker (stopped ones excluded)
	// Recovery: fault → first delivery by another worker, per affected session.
	Recovery Stats `json:"recovery"`
	// Dark: last delivery by the worker hit → first delivery by another.
	Dark Stats `json:"dark"`
	// Replayed are the raw repeats caused by this fault's ownership change.
	Replayed int `json:"replayed"`
}

// Session is the judgement of one session.
type Session struct {
	ID            string `json:"id"`
	Connections   int    `json:"connections"`
	MaxConcurrent int    `json:"max_concurrent"`
	SentSeqs      int64  `json:"sent_seqs"`      // distinct seqs the feed wrote
	Delivered     int64  `json:"delivered"`      // distinct seqs in the sinks
	Raw           int64  `json:"raw"`            // sink records
	Lost          int64  `json:"lost"`           // sent, not delivered, below the highest delivered seq
	Gaps          int64  `json:"gaps"`           // never sent nor delivered, inside the delivered range
	Tail          int64  `json:"tail"`           // sent above the highest delivered seq (in flight at the end)
	ReplayCrash   int64  `json:"replay_crash"`   // repeats across a crash (kill -9 / zombie)
	ReplayHandoff int64  `json:"replay_handoff"` // repeats across a graceful handoff
	ReplayOther   int64  `json:"replay_other"`   // repeats within one tenure or across other changes
	Stale         int64  `json:"stale"`          // deliveries under an epoch older than one already delivered
	Unordered     int64  `json:"unordered"`      // deliveries below the previous one of the same tenure
	Owners        int    `json:"owners"`         // distinct (worker, epoch) tenures that delivered
}

// Overlap is a time during which the source had more than one connection of
// a session open.
type Overlap struct {
	Session string        `json:"session"`
	Start   time.Time     `json:"start"`
	Dur     time.Duration `json:"duration_ns"`
	Max     int           `json:"max"`
}

// StopResult is how fast stopped sessions left the source.
type StopResult struct {
	Sessions int      `json:"sessions"`
	Closed   Stats    `json:"closed"`             // stop acknowledged → the source's connection closed
	Reopened []string `json:"reopened,omitempty"` // connected again after the stop
	StillOn  []string `json:"still_open,omitempty"`
	LateSink []string `json:"late_sink,omitempty"` // delivered more than CloseBound after the stop
}

// Report is the whole judgement.
type Report struct {
	Sessions      []Session     `json:"sessions"`
	Faults        []FaultResult `json:"faults"`
	Overlaps      []Overlap     `json:"overlaps"`
	Stops         StopResult    `json:"stops"`
	MaxConcurrent int           `json:"max_concurrent"`
	Lost          int64         `json:"lost"`
	Gaps          int64         `json:"gaps"`
	Tail          int64         `json:"tail"`
	ReplayCrash   int64         `json:"replay_crash"`
	ReplayHandoff int64         `json:"replay_handoff"`
	ReplayOther   int64         `json:"replay_other"`
	// ReplayCrashMax is the most repeats one session had across one crash;
	// ReplayBound is what the checkpoint interval allows.
	ReplayCrashMax int64    `json:"replay_crash_max"`
	ReplayBound    int64    `json:"replay_bound"`
	Stale          int64    `json:"stale"`
	Unordered      int64    `json:"unordered"`
	SentSeqs       int64    `json:"sent_seqs"`
	Raw            int64    `json:"raw"`
	Violations     []string `json:"violations"`
}

// interval is a closed range of seqs.
type interval struct{ lo, hi int64 }

func union(iv []interval) []interval {
	sort.Slice(iv, func(i, j int) bool { return iv[i].lo < iv[j].lo })
	var out []interval
	for _, x := range iv {
		if x.hi < x.lo {
			continue
		}
		if n := len(out); n > 0 && x.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, x.hi)
			continue
		}
		out = append(out, x)
	}
	return out
}

func contains(iv []interval, v int64) bool {
	i := sort.Search(len(iv), func(i int) bool { return iv[i].hi >= v })
	return i < len(iv) && iv[i].lo <= v
}

type tenure struct {
	worker string
	epoch  int64
}

// CloseBound is how long after a stop a session's connection may stay open
// and deliver: a stop is seen by the owner at its next renewal at the latest.
func CloseBound(checkpointEvery time.Duration) time.Duration {
	return checkpointEvery*2 + 2*time.Second
}

// Judge computes the Report.
func Judge(in Input) Report {
	var rep Report
	faultOf := map[string]Fault{} // worker id → the fault that ended it
	for _, f := range in.Faults {
		if f.Kind == FaultKill || f.Kind == FaultTerm || f.Kind == FaultStop {
			faultOf[f.Worker] = f
		}
	}

	conns := map[string][]feed.ConnRecord{}
	for _, c := range in.Conns {
		if c.Reason == feed.ReasonRefused || c.Reason == feed.ReasonBadReq {
			continue
		}
		conns[c.Session] = append(conns[c.Session], c)
	}
	sinks := map[string][]devstack.SinkRecord{}
	for _, r := range in.Sinks {
		sinks[r.ConnectionID] = append(sinks[r.ConnectionID], r)
	}
	ids := map[string]bool{}
	for k := range conns {
		ids[k] = true
	}
	for k := range sinks {
		ids[k] = true
	}
	var names []string
	for k := range ids {
		names = append(names, k)
	}
	sort.Strings(names)

	// Replays per (fault worker, session), for the per-fault counts and the
	// per-crash maximum.
	replayByFault := map[string]int{}
	for _, id := range names {
		s, ovs, perFault := judgeSession(id, conns[id], sinks[id], faultOf)
		for w, n := range perFault {
			replayByFault[w] += int(n)
			if f := faultOf[w]; f.Kind != FaultTerm && n > rep.ReplayCrashMax {
				rep.ReplayCrashMax = n
			}
		}
		rep.Sessions = append(rep.Sessions, s)
		rep.Overlaps = append(rep.Overlaps, ovs...)
		rep.MaxConcurrent = max(rep.MaxConcurrent, s.MaxConcurrent)
		rep.Lost += s.Lost
		rep.Gaps += s.Gaps
		rep.Tail += s.Tail
		rep.ReplayCrash += s.ReplayCrash
		rep.ReplayHandoff += s.ReplayHandoff
		rep.ReplayOther += s.ReplayOther
		rep.Stale += s.Stale
		rep.Unordered += s.Unordered
		rep.SentSeqs += s.SentSeqs
		rep.Raw += s.Raw
	}
	// A crash can repeat what was accepted since the last checkpoint: one
	// checkpoint interval with its 10 % jitter, plus 1 s for the renewal's
	// latency and one retry, plus the message in hand.
	rep.ReplayBound = int64(math.Ceil(in.Rate*(in.CheckpointEvery.Seconds()*1.1+1))) + 1

	for _, f := range in.Faults {
		fr := judgeFault(f, sinks, in.Stopped)
		fr.Replayed = replayByFault[f.Worker]
		rep.Faults = append(rep.Faults, fr)
	}
	rep.Stops = judgeStops(in, conns, sinks)
	rep.Violations = violations(rep)
	return rep
}

func judgeSession(id string, cs []feed.ConnRecord, rs []devstack.SinkRecord, faultOf map[string]Fault) (Session, []Overlap, map[string]int64) {
	s := Session{ID: id, Connections: len(cs)}
	var sent []interval
	type ev struct {
		t     time.Time
		delta int
	}
	var evs []ev
	for _, c := range cs {
		if c.Sent > 0 {
			sent = append(sent, interval{c.FirstSeq, c.LastSeq})
		}
		evs = append(evs, ev{c.OpenedAt, +1})
		end := c.ClosedAt
		if end.IsZero() {
			end = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		evs = append(evs, ev{end, -1})
	}
	sent = union(sent)
	for _, x := range sent {
		s.SentSeqs += x.hi - x.lo + 1
	}
	// Most connections open at once; a close at the same instant as an open
	// counts first.
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].t.Equal(evs[j].t) {
			return evs[i].delta < evs[j].delta
		}
		return evs[i].t.Before(evs[j].t)
	})
	var ovs []Overlap
	open := 0
	var cur *Overlap
	for _, e := range evs {
		open += e.delta
		s.MaxConcurrent = max(s.MaxConcurrent, open)
		if open > 1 && cur == nil {
			cur = &Overlap{Session: id, Start: e.t, Max: open}
		}
		if cur != nil {
			cur.Max = max(cur.Max, open)
			if open <= 1 {
				cur.Dur = e.t.Sub(cur.Start)
				ovs = append(ovs, *cur)
				cur = nil
			}
		}
	}
	if cur != nil {
		ovs = append(ovs, *cur)
	}

	// Deliveries in arrival order (per worker the stdout order; across
	// workers by received_at_ms, stable).
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].ReceivedAtMs < rs[j].ReceivedAtMs })
	s.Raw = int64(len(rs))
	first := map[int64]tenure{}
	lastOf := map[tenure]int64{}
	tenures := map[tenure]bool{}
	perFault := map[string]int64{}
	var maxEpoch, maxEpochAt int64
	minSeq, maxSeq := int64(math.MaxInt64), int64(math.MinInt64)
	for _, r := range rs {
		t := tenure{r.WorkerID, r.LeaseEpoch}
		tenures[t] = true
		if r.LeaseEpoch < maxEpoch && r.ReceivedAtMs > maxEpochAt {
			s.Stale++
		}
		if r.LeaseEpoch > maxEpoch {
			maxEpoch, maxEpochAt = r.LeaseEpoch, r.ReceivedAtMs
		}
		if prev, ok := lastOf[t]; ok && r.Seq <= prev {
			if _, seen := first[r.Seq]; !seen {
				s.Unordered++ // a new seq below one this tenure already delivered
			}
		}
		lastOf[t] = r.Seq
		f, seen := first[r.Seq]
		if !seen {
			first[r.Seq] = t
			minSeq, maxSeq = min(minSeq, r.Seq), max(maxSeq, r.Seq)
			continue
		}
		// A repeat: blame the ownership change from the first tenure.
		switch {
		case f == t || f.worker == t.worker:
			s.ReplayOther++
		case faultOf[f.worker].Kind == FaultTerm:
			s.ReplayHandoff++
			perFault[f.worker]++
		case faultOf[f.worker].Kind != "":
			s.ReplayCrash++
			perFault[f.worker]++
		default:
			s.ReplayOther++
		}
	}
	s.Owners = len(tenures)
	s.Delivered = int64(len(first))
	if s.Delivered > 0 {
		for _, x := range sent {
			for v := x.lo; v <= x.hi; v++ {
				if _, ok := first[v]; ok {
					continue
				}
				if v < maxSeq {
					s.Lost++
				} else {
					s.Tail++
				}
			}
		}
		for v := minSeq; v <= maxSeq; v++ {
			if _, ok := first[v]; !ok && !contains(sent, v) {
				s.Gaps++
			}
		}
	} else {
		s.Tail = s.SentSeqs
	}
	return s, ovs, perFault
}

func judgeFault(f Fault, sinks map[string][]devstack.SinkRecord, stopped map[string]time.Time) FaultResult {
	fr := FaultResult{Fault: f}
	at := f.At.UnixMilli()
	var rec, dark []float64
	for id, rs := range sinks {
		// The latest delivery before the fault decides whether the session
		// was the hit worker's.
		var lastBefore *devstack.SinkRecord
		for i := range rs {
			if rs[i].ReceivedAtMs <= at && (lastBefore == nil || rs[i].ReceivedAtMs >= lastBefore.ReceivedAtMs) {
				lastBefore = &rs[i]
			}
		}
		if lastBefore == nil || lastBefore.WorkerID != f.Worker {
			continue
		}
		fr.Affected++
		var next *devstack.SinkRecord
		for i := range rs {
			if rs[i].ReceivedAtMs >= at && rs[i].WorkerID != f.Worker && (next == nil || rs[i].ReceivedAtMs < next.ReceivedAtMs) {
				next = &rs[i]
			}
		}
		if next == nil {
			if _, ok := stopped[id]; !ok {
				fr.Unrecovered = append(fr.Unrecovered, id)
			}
			continue
		}
		fr.Recovered++
		rec = append(rec, float64(next.ReceivedAtMs-at))
		dark = append(dark, float64(next.ReceivedAtMs-lastBefore.ReceivedAtMs))
	}
	sort.Strings(fr.Unrecovered)
	fr.Recovery, fr.Dark = StatsOf(rec), StatsOf(dark)
	return fr
}

func judgeStops(in Input, conns map[string][]feed.ConnRecord, sinks map[string][]devstack.SinkRecord) StopResult {
	sr := StopResult{Sessions: len(in.Stopped)}
	bound := CloseBound(in.CheckpointEvery)
	var closed []float64
	var ids []string
	for id := range in.Stopped {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		at := in.Stopped[id]
		var lastClose time.Time
		open, reopened := false, false
		for _, c := range conns[id] {
			if c.OpenedAt.After(at.Add(100 * time.Millisecond)) {
				reopened = true
			}
			if c.ClosedAt.IsZero() {
				open = true
			} else if c.ClosedAt.After(lastClose) {
				lastClose = c.ClosedAt
			}
		}
		if reopened {
			sr.Reopened = append(sr.Reopened, id)
		}
		if open {
			sr.StillOn = append(sr.StillOn, id)
		} else if !lastClose.IsZero() {
			closed = append(closed, float64(max(lastClose.Sub(at), 0).Milliseconds()))
		}
		for _, r := range sinks[id] {
			if r.ReceivedAtMs > at.Add(bound).UnixMilli() {
				sr.LateSink = append(sr.LateSink, id)
				break
			}
		}
	}
	sr.Closed = StatsOf(closed)
	return sr
}

func violations(r Report) []string {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	if r.Lost > 0 {
		add("%d message(s) lost (sent by the feed, never delivered)", r.Lost)
	}
	if r.Gaps > 0 {
		add("%d seq(s) skipped: never requested from the source inside a delivered range", r.Gaps)
	}
	if r.ReplayHandoff > 0 {
		add("%d message(s) replayed across a graceful handoff (want 0)", r.ReplayHandoff)
	}
	if r.ReplayCrashMax > r.ReplayBound {
		add("%d message(s) replayed in one session after a crash, above the checkpoint bound %d", r.ReplayCrashMax, r.ReplayBound)
	}
	if r.MaxConcurrent > 1 {
		add("the feed saw %d connections of one session at once (%d overlap(s))", r.MaxConcurrent, len(r.Overlaps))
	}
	if r.Stale > 0 {
		add("%d deliveries under a stale lease epoch", r.Stale)
	}
	if r.Unordered > 0 {
		add("%d deliveries out of order within a tenure", r.Unordered)
	}
	for _, f := range r.Faults {
		if len(f.Unrecovered) > 0 {
			add("%s of %s: %d session(s) never delivered again: %v", f.Kind, f.Worker, len(f.Unrecovered), f.Unrecovered)
		}
	}
	if len(r.Stops.Reopened) > 0 {
		add("stopped session(s) reconnected: %v", r.Stops.Reopened)
	}
	if len(r.Stops.StillOn) > 0 {
		add("stopped session(s) still connected: %v", r.Stops.StillOn)
	}
	if len(r.Stops.LateSink) > 0 {
		add("stopped session(s) still delivering after the bound: %v", r.Stops.LateSink)
	}
	return v
}
