// Hot standby checks: the sessions whose source cannot replay (with a
// standby, and the control group without) judged by the feed's own seq in
// the delivered data: the messages lost at an owner's death while a standby
// held the stream (standby-no-loss), the repeats across each takeover
// (standby-repeats), which takeovers were standby promotions. One worker
// per lease epoch, for every session: check_onedeliverer.go.

package chaos

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

// StandbyResult sums up the sessions whose source cannot replay: the
// standby sessions beside the control group.
type StandbyResult struct {
	Standby int `json:"standby_sessions"` // started with a standby
	Control int `json:"control_sessions"` // on such a source, without
	// Deaths are the owner deaths (kill -9, SIGSTOP, a partition from
	// DynamoDB: deathKinds) of the standby sessions; Promotions those a standby's worker
	// took over on its standby connection, the others by a dial.
	Deaths     int `json:"deaths"`
	Promotions int `json:"promotions"`
	// Lost is what standby sessions lost at an owner's death or a
	// rebalancing move though a standby connection had been sent it
	// (judged: 0); LostNoStandby what they lost at one no standby
	// connection had been sent;
	// LostOther what they lost otherwise (the source dropped or closed
	// the connections, a stop): messages of the feed, by its seq.
	Lost          int64 `json:"lost"`
	LostNoStandby int64 `json:"lost_no_standby"`
	LostOther     int64 `json:"lost_other"`
	// Repeats are the deliveries of a feed seq an earlier tenure had
	// delivered, across the standby sessions' takeovers; MaxOne the most
	// in one.
	Repeats int64 `json:"repeats"`
	MaxOne  int64 `json:"max_one"`
	// ControlDeaths and ControlLost are the control group's owner deaths
	// and what it lost at them (expected: about TTL × rate each),
	// ControlLostOther what it lost otherwise.
	ControlDeaths    int   `json:"control_deaths"`
	ControlLost      int64 `json:"control_lost"`
	ControlLostOther int64 `json:"control_lost_other"`
	// Sessions are the per-session figures.
	Sessions []StandbySession `json:"sessions,omitempty"`
}

// StandbySession is one session whose source cannot replay.
type StandbySession struct {
	Session string `json:"session"`
	Source  string `json:"source"` // SourceNoSeq | SourceLive
	Standby bool   `json:"standby"`
	// Delivered counts the feed seqs delivered (after dedupe).
	Delivered int64 `json:"delivered"`
	// Lost at an owner's death (with a standby connection sent it: Lost;
	// without: LostNoStandby), and otherwise.
	Lost          int64 `json:"lost"`
	LostNoStandby int64 `json:"lost_no_standby"`
	LostOther     int64 `json:"lost_other"`
	Repeats       int64 `json:"repeats"`
	// Takeovers are its ownership changes at an owner's death, each
	// "t=S cause: standby by W" (a promotion) or "t=S cause: dial by W".
	Takeovers []string `json:"takeovers,omitempty"`
}

// deathKinds are the causes (causeOf) that end a tenure by its owner's
// death, the takeovers a standby is for (issue 39: kill -9, SIGSTOP, a
// partition). A DynamoDB outage or storm takes every worker's trust, the
// standbys' too: what it costs is reported as lost otherwise.
var deathKinds = map[string]bool{"crash": true, "zombie": true, "partition": true}

// nonReplay reports whether the session's source cannot replay (seq_mode
// none, or no resume): it is judged by the feed seq in its data here, not
// by no-loss.
func (v *sessionView) nonReplay() bool { return v.source != "" }

// feedSeq is the feed's seq of d: the one in its data, or its envelope's
// for a seq'd source (0: none).
func (v *sessionView) feedSeq(d Delivery) int64 {
	if d.FeedSeq > 0 {
		return d.FeedSeq
	}
	if v.source != SourceNoSeq && d.Sub == 0 {
		return d.Seq
	}
	return 0
}

// standbyWorker is the worker id of a standby connection's tenure
// ("<worker id>/standby/<n>"; "" for another tenure).
func standbyWorker(tenure string) string {
	if !feed.IsStandbyTenure(tenure) {
		return ""
	}
	return tenure[:strings.LastIndex(tenure, feed.StandbyTenurePart)]
}

// checkStandby judges every session whose source cannot replay by the feed
// seqs in its data: holes in what each start delivered, attributed to an
// owner's death (the tenures either side, causeOf) and to a standby
// connection sent the missing seqs; the takeovers' repeats and source.
func (j *judge) checkStandby() {
	sb := &j.res.Standby
	bounds := j.replayBounds()
	for _, id := range j.ids {
		v := j.sess[id]
		if !v.nonReplay() {
			continue
		}
		ss := StandbySession{Session: id, Source: v.source, Standby: v.standby}
		if v.standby {
			sb.Standby++
		} else {
			sb.Control++
		}
		first := map[int64]*tenure{} // feed seq → the tenure that delivered it first
		var starts []int64
		for _, a := range v.actions {
			if a.Op != "stop" {
				starts = append(starts, a.At.UnixNano())
			}
		}
		perStart := map[int][]int64{}
		repeats := map[*tenure]int64{}
		for _, d := range v.dels {
			f := v.feedSeq(d)
			if f <= 0 {
				continue
			}
			t := v.byKey[fmt.Sprintf("%s@%d", d.Worker, d.Epoch)]
			if by, ok := first[f]; ok {
				if by != t {
					repeats[t]++
				}
				continue
			}
			first[f] = t
			n := sort.Search(len(starts), func(i int) bool { return starts[i] > d.AtNs })
			perStart[n] = append(perStart[n], f)
		}
		ss.Delivered = int64(len(first))
		for _, n := range slices.Sorted(maps.Keys(perStart)) {
			seqs := perStart[n]
			sort.Slice(seqs, func(a, b int) bool { return seqs[a] < seqs[b] })
			for i := 1; i < len(seqs); i++ {
				lo, hi := seqs[i-1]+1, seqs[i]-1
				if hi < lo {
					continue
				}
				j.standbyHole(v, &ss, first[seqs[i-1]], first[seqs[i]], lo, hi)
			}
		}
		// The takeovers at an owner's death: by the standby or a dial, and
		// their repeats.
		for i := 1; i < len(v.tenures); i++ {
			prev, next := v.tenures[i-1], v.tenures[i]
			c := j.causeOf(v, prev, next)
			r := repeats[next]
			ss.Repeats += r
			if v.standby {
				sb.Repeats += r
				sb.MaxOne = max(sb.MaxOne, r)
				if b, ok := bounds[c.kind]; !ok && r > 0 {
					j.violate(CheckStandbyRepeats, id, next.firstAt, "%d feed seq(s) delivered again when %s took over from %s after %s (none allowed)", r, next.key(), prev.key(), withArticle(causeText(c.kind)))
				} else if ok && r > b {
					j.violate(CheckStandbyRepeats, id, next.firstAt, "%d feed seqs delivered again when %s took over from %s after %s (bound %d)", r, next.key(), prev.key(), withArticle(causeText(c.kind)), b)
				}
			}
			if !deathKinds[c.kind] {
				continue
			}
			how := "dial"
			if v.promoted(prev, next, c.atNs) {
				how = "standby"
			}
			if v.standby {
				sb.Deaths++
				if how == "standby" {
					sb.Promotions++
				}
			} else {
				sb.ControlDeaths++
			}
			ss.Takeovers = append(ss.Takeovers, fmt.Sprintf("t=%.1fs %s: %s by %s", j.sec(next.firstAt), c.kind, how, next.key()))
		}
		sb.Sessions = append(sb.Sessions, ss)
	}
}

// standbyHole attributes the feed seqs lo..hi, missing between what
// tenures before and after delivered: lost at an owner's death or a
// standby session's rebalancing move (the tenures differ, one ended
// before) with a standby connection sent some of them (a violation for a
// standby session), at one without, or otherwise.
func (j *judge) standbyHole(v *sessionView, ss *StandbySession, before, after *tenure, lo, hi int64) {
	n := hi - lo + 1
	sb := &j.res.Standby
	death := false
	var c cause
	if before != nil && after != nil && before != after {
		c = j.causeOf(v, before, after)
		// A standby session's rebalancing move is judged as a death is:
		// the worker moves it only to its standby's worker, once that
		// worker said it would take it, and the promotion goes on after
		// the last message delivered; unless the receiver met a fault it
		// could not know of when it said so (receiverFaulted). (The
		// control group's moves lose what a dial misses: not judged.)
		death = deathKinds[c.kind] || (v.standby && c.kind == "rebalance" && !j.receiverFaulted(v.id, before, after, c))
	}
	var held []string
	for _, cr := range v.conns {
		// A standby connection of the dying owner's own worker cannot
		// help: it is the connection a promotion adopted (the feed keeps
		// the tenure it was dialed with), or it dies with the owner.
		if before != nil && standbyWorker(cr.Tenure) == before.worker {
			continue
		}
		if cr.Standby && cr.Sent > 0 && cr.FirstSeq <= hi && cr.LastSeq >= lo {
			held = append(held, fmt.Sprintf("#%d (%s, seqs %d..%d)", cr.ID, cr.Tenure, cr.FirstSeq, cr.LastSeq))
		}
	}
	switch {
	case death && len(held) > 0:
		ss.Lost += n
		if v.standby {
			sb.Lost += n
			j.violate(CheckStandbyNoLoss, v.id, after.firstAt, "feed seqs %d..%d (%d) never delivered across %s's takeover from %s after %s, though the standby connection(s) %s had been sent them",
				lo, hi, n, after.key(), before.key(), withArticle(causeText(c.kind)), strings.Join(held, ", "))
		} else {
			sb.ControlLost += n
		}
	case death:
		ss.LostNoStandby += n
		if v.standby {
			sb.LostNoStandby += n
		} else {
			sb.ControlLost += n
		}
	default:
		ss.LostOther += n
		if v.standby {
			sb.LostOther += n
		} else {
			sb.ControlLostOther += n
		}
	}
}

// receiverFaulted reports whether the rebalancing move c that ended tenure
// before met a fault of its receiver that the receiver could not have
// known of when it said it would take the session: one that began at most
// one and a half heartbeat intervals before that answer (a worker answers
// only while its last heartbeat that succeeded was sent within that,
// lease.Keeper.HeartbeatCurrent) and before after's first delivery: its
// kill, pause, partition or restart, or the table's outage or storm. What
// the standby had been sent is then lost to two faults at once, the move
// and its receiver's, and counted as lost otherwise; a move whose
// receiver was not asked first (no ready answer logged) is never excused.
func (j *judge) receiverFaulted(id string, before, after *tenure, c cause) bool {
	var m *Move
	for i, mv := range j.moves[id] {
		if mv.From == before.worker && mv.AtNs == c.atNs {
			m = &j.moves[id][i]
		}
	}
	if m == nil || m.ReadyAtNs == 0 {
		return false
	}
	from := m.ReadyAtNs - 3*j.set.HeartbeatMs*int64(time.Millisecond)/2
	for _, f := range j.ev.Faults {
		at := f.Start.UnixNano()
		if at < from || at > after.firstAt {
			continue
		}
		switch f.Kind {
		case KindKill, KindZombie, KindPartition, KindSinkFreezeDynamo, KindRolling, KindScaleIn, KindClockOffset:
			if f.Worker == m.To {
				return true
			}
		case KindDynamoDown, KindSinkRefuseDynamo, KindThrottle, KindAmbiguous:
			return true
		}
	}
	return false
}

// promoted reports whether next took the session over on a standby
// connection: one of next's worker, open at the death (at) and still when
// next first delivered.
func (v *sessionView) promoted(prev, next *tenure, at int64) bool {
	for _, cr := range v.conns {
		if !cr.Standby || standbyWorker(cr.Tenure) != next.worker {
			continue
		}
		opened := cr.OpenedAt.UnixNano()
		if opened <= min(at, prev.lastAt) && (cr.ClosedAt.IsZero() || cr.ClosedAt.UnixNano() >= next.firstAt) {
			return true
		}
	}
	return false
}

// replayBounds are the repeats a takeover of each cause may bring (the
// replay bounds; a cause without one allows none).
func (j *judge) replayBounds() map[string]int64 {
	b := j.set.Bounds
	return map[string]int64{"crash": b.ReplayCrash, "zombie": b.ReplayCrash, "partition": b.ReplayOutage, "outage": b.ReplayOutage, "storm": b.ReplayStorm}
}
