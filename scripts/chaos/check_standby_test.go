// Tests of the standby checks on hand-built scenarios: session a of the
// shared fixture on a source that cannot replay, its owner worker-1 killed
// at 11 s, worker-2 taking over at 15.5 s.

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

// floor2 is where epoch 2's numbers start under seq_mode none.
const floor2 = int64(1) << 32

// standbyScenario makes a a session on source (SourceNoSeq or SourceLive),
// with a standby when standby is set: worker-1 (epoch 1) delivers feed
// seqs 1..50 until 10.8 s and is killed at 11 s; worker-2 (epoch 2)
// delivers feed seqs from..115 from 15.5 s. With a standby, worker-2's
// standby connection (tenure worker-2/standby/1) was opened at sbOpen and
// sent feed seqs sbFirst..116, and carries the takeover (no dial);
// without, worker-2 dials at 15.4 s. Under seq_mode none the worker
// numbers the messages (1.. in epoch 1, from 2^32 in epoch 2), the feed's
// seq rides in the data (Delivery.FeedSeq).
func standbyScenario(source string, standby bool, from int64, sbOpen float64, sbFirst int64) *scenario {
	s := newScenario()
	s.ev.Actions[0].Source, s.ev.Actions[0].Standby = source, standby
	s.ev.Deliveries = removeTenure(removeTenure(s.ev.Deliveries, "a", "worker-1"), "a", "worker-2")
	w1 := tenureDels("a", "worker-1", 1, 1, 50, 1)
	w2 := tenureDels("a", "worker-2", 2, from, 115, 15.5)
	for i := range w1 {
		w1[i].FeedSeq = w1[i].Seq
	}
	for i := range w2 {
		w2[i].FeedSeq = w2[i].Seq
		if source == SourceNoSeq {
			w2[i].Seq = floor2 + int64(i) + 1
		}
	}
	s.ev.Deliveries = append(append(s.ev.Deliveries, w1...), w2...)
	last := w2[len(w2)-1].Seq
	s.ev.Settled.Rows[0].LastSeq, s.ev.Final.Rows[0].LastSeq = p64(last), p64(last)
	s.ev.Conns[0].Tenure, s.ev.Conns[0].LastSeq, s.ev.Conns[0].Sent = "worker-1/1", 52, 52
	if standby {
		sb := conn(2, "a", sbOpen, 30.0, sbFirst, 116, feed.ReasonClient)
		sb.Tenure, sb.Standby = "worker-2/standby/1", true
		s.ev.Conns[1] = sb
	} else {
		s.ev.Conns[1] = conn(2, "a", 15.4, 30.0, from, 116, feed.ReasonClient)
		s.ev.Conns[1].Tenure = "worker-2/2"
	}
	s.fixSinks()
	return s
}

// A standby that takes over on its connection, delivering what the dead
// owner had not (from its checkpoint: 5 repeats), loses nothing: the run
// is clean, and the takeover is a promotion; its standby connection
// beside the owner's is not a second owner.
func TestStandbyNoLossPasses(t *testing.T) {
	for _, source := range []string{SourceNoSeq, SourceLive} {
		res := standbyScenario(source, true, 46, 2.0, 10).judge()
		if !res.OK() {
			t.Fatalf("%s: violations %+v", source, res.Violations)
		}
		sb := res.Standby
		if sb.Standby != 1 || sb.Deaths != 1 || sb.Promotions != 1 || sb.Lost+sb.LostNoStandby+sb.LostOther != 0 || sb.Repeats != 5 {
			t.Fatalf("%s: standby %+v", source, sb)
		}
		if len(sb.Sessions) != 1 || len(sb.Sessions[0].Takeovers) != 1 || !strings.Contains(sb.Sessions[0].Takeovers[0], "crash: standby by worker-2@2") {
			t.Fatalf("%s: sessions %+v", source, sb.Sessions)
		}
		if len(res.Overlaps) != 0 {
			t.Fatalf("%s: overlaps %+v", source, res.Overlaps)
		}
	}
}

// A zombie's and a partition's takeover by the standby is a promotion too,
// and a hole across it that the standby had been sent fails.
func TestStandbyAfterZombieAndPartition(t *testing.T) {
	for _, kind := range []string{KindZombie, KindPartition} {
		s := standbyScenario(SourceLive, true, 46, 2.0, 10)
		s.zombie(kind)
		if res := s.judge(); !res.OK() || res.Standby.Promotions != 1 {
			t.Fatalf("%s: violations %+v, standby %+v", kind, res.Violations, res.Standby)
		}
		s = standbyScenario(SourceLive, true, 55, 2.0, 10)
		s.zombie(kind)
		if v := violationsOf(s.judge(), CheckStandbyNoLoss); len(v) != 1 || !strings.Contains(v[0].Detail, "feed seqs 51..54 (4)") {
			t.Fatalf("%s: standby-no-loss %+v", kind, v)
		}
	}
}

// Feed seqs missing across a death that the standby connection had been
// sent fail standby-no-loss; the same hole where no standby connection
// had them (it opened after) is reported, not judged.
func TestStandbyHoleFails(t *testing.T) {
	res := standbyScenario(SourceNoSeq, true, 60, 2.0, 10).judge()
	v := violationsOf(res, CheckStandbyNoLoss)
	if len(v) != 1 || !strings.Contains(v[0].Detail, "feed seqs 51..59 (9)") || res.Standby.Lost != 9 {
		t.Fatalf("violations %+v, standby %+v", res.Violations, res.Standby)
	}
	res = standbyScenario(SourceNoSeq, true, 60, 13.0, 61).judge()
	if v := violationsOf(res, CheckStandbyNoLoss); len(v) != 0 || res.Standby.LostNoStandby != 9 || res.Standby.Promotions != 0 {
		t.Fatalf("no standby held: violations %+v, standby %+v", v, res.Standby)
	}
}

// A standby session's rebalancing move loses nothing its standby had been
// sent (the worker moves it only to its standby's worker: a promotion);
// the same hole across a control session's move is reported, not judged.
func TestStandbyMoveIsJudgedAsADeathIs(t *testing.T) {
	moved := func(standby bool, from int64) Result {
		s := standbyScenario(SourceLive, standby, from, 2.0, 10)
		s.ev.Faults = nil
		s.ev.Moves = []Move{{Session: "a", From: "worker-1", To: "worker-2", AtNs: at(10.85).UnixNano()}}
		return s.judge()
	}
	if res := moved(true, 51); len(violationsOf(res, CheckStandbyNoLoss)) != 0 || res.Standby.Lost != 0 {
		t.Fatalf("a lossless move: violations %+v, standby %+v", res.Violations, res.Standby)
	}
	res := moved(true, 55)
	if v := violationsOf(res, CheckStandbyNoLoss); len(v) != 1 || !strings.Contains(v[0].Detail, "feed seqs 51..54 (4)") || !strings.Contains(v[0].Detail, "rebalancing move") {
		t.Fatalf("a move that lost 51..54 the standby had: standby-no-loss %+v", v)
	}
	if res := moved(false, 55); len(violationsOf(res, CheckStandbyNoLoss)) != 0 || res.Standby.ControlLostOther != 4 {
		t.Fatalf("a control session's move: violations %+v, standby %+v", res.Violations, res.Standby)
	}
}

// A control session (no standby) loses what was sent while nobody was
// connected: reported, not a violation, and no-loss does not judge it.
func TestControlLossIsReported(t *testing.T) {
	for _, source := range []string{SourceNoSeq, SourceLive} {
		res := standbyScenario(source, false, 78, 0, 0).judge()
		if !res.OK() {
			t.Fatalf("%s: violations %+v", source, res.Violations)
		}
		sb := res.Standby
		if sb.Control != 1 || sb.ControlDeaths != 1 || sb.ControlLost != 27 || sb.Standby != 0 {
			t.Fatalf("%s: standby %+v", source, sb)
		}
	}
}

// Repeats across a standby's takeover above the crash's replay bound fail
// standby-repeats (the usual repeats check leaves standby sessions to it).
func TestStandbyRepeatsOverTheBound(t *testing.T) {
	s := standbyScenario(SourceLive, true, 1, 0.9, 1)
	res := s.judge()
	v := violationsOf(res, CheckStandbyRepeats)
	if len(v) != 1 || res.Standby.Repeats != 50 || !strings.Contains(v[0].Detail, fmt.Sprintf("(bound %d)", s.set.Bounds.ReplayCrash)) {
		t.Fatalf("violations %+v, standby %+v (bound %d)", res.Violations, res.Standby, s.set.Bounds.ReplayCrash)
	}
	if len(violationsOf(res, CheckRepeats)) != 0 {
		t.Fatalf("repeats judged twice: %+v", res.Violations)
	}
}

// Two owners' connections open at once are still a one-connection
// violation beside a standby's; two workers under one epoch are two
// deliverers.
func TestStandbyBesideTwoOwnersAndOneDeliverer(t *testing.T) {
	s := standbyScenario(SourceLive, true, 46, 2.0, 10)
	other := conn(9, "a", 5.0, 6.0, 20, 25, feed.ReasonKicked)
	other.Tenure = "worker-3/1"
	s.ev.Conns = append(s.ev.Conns, other)
	res := s.judge()
	if v := violationsOf(res, CheckOneConn); len(v) != 1 || !strings.Contains(v[0].Detail, "2 connections open at once") {
		t.Fatalf("one-connection: %+v", res.Violations)
	}
	s = standbyScenario(SourceLive, true, 46, 2.0, 10)
	s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-2", 1, 60, 61, 12)...)
	res = s.judge()
	if v := violationsOf(res, CheckOneDeliverer); len(v) != 1 || !strings.Contains(v[0].Detail, "under lease epoch 1") {
		t.Fatalf("one-deliverer: %+v", res.Violations)
	}
}

// The report's hot standby section sets the standby sessions beside the
// control group, one row per session.
func TestStandbyReport(t *testing.T) {
	s := standbyScenario(SourceNoSeq, true, 46, 2.0, 10)
	res := s.judge()
	dir := t.TempDir()
	if err := WriteOutputs(dir, res, s.ev); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Hot standby", "| with a standby | 1 | 1 | 1 | 0 | 0 | 0 | 0 | 5 (5) |", "| control (no standby) | 0 |",
		"| a | noseq | yes | 115 | 0 | 0 | 0 | 5 | t=15.5s crash: standby by worker-2@2 |", "every 4th session with a hot standby"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// A standby connection of the dying owner's own worker (the connection its
// promotion adopted, still named by the standby tenure it was dialed with)
// is no standby at that owner's death: the hole is the no-standby kind.
func TestStandbyOfTheDyingOwnerIsNoStandby(t *testing.T) {
	s := standbyScenario(SourceNoSeq, true, 60, 2.0, 10)
	s.ev.Conns[1].Tenure = "worker-1/standby/1"
	res := s.judge()
	if v := violationsOf(res, CheckStandbyNoLoss); len(v) != 0 || res.Standby.LostNoStandby != 9 {
		t.Fatalf("violations %+v, standby %+v", v, res.Standby)
	}
}

// A standby session's move whose receiver was cut off from DynamoDB after
// it said it would take the session (within the heartbeat its answer
// trusts) loses what its standby had to two faults at once: reported as
// lost otherwise. The same hole is a violation when the receiver had been
// cut off longer than that before its answer, or when the sender never
// asked it.
func TestStandbyMoveToAReceiverThatFaultedAfterItsAnswer(t *testing.T) {
	const hb = 1.0 // the scenario's heartbeat interval, s
	moved := func(readyAt, partitioned float64) Result {
		s := standbyScenario(SourceLive, true, 55, 2.0, 10)
		s.set.HeartbeatMs = int64(hb * 1000)
		s.ev.Faults = []Fault{{N: 1, Kind: KindPartition, Worker: "worker-2", Start: at(partitioned), End: at(partitioned + 6)}}
		m := Move{Session: "a", From: "worker-1", To: "worker-2", AtNs: at(10.85).UnixNano()}
		if readyAt > 0 {
			m.ReadyAtNs = at(readyAt).UnixNano()
		}
		s.ev.Moves = []Move{m}
		return s.judge()
	}
	for _, partitioned := range []float64{10.7, 10.79 - hb} {
		if res := moved(10.79, partitioned); len(violationsOf(res, CheckStandbyNoLoss)) != 0 || res.Standby.LostOther != 4 {
			t.Fatalf("receiver cut off at %.2f s, its answer at 10.79 s: violations %+v, standby %+v", partitioned, res.Violations, res.Standby)
		}
	}
	if v := violationsOf(moved(10.79, 10.79-2*hb), CheckStandbyNoLoss); len(v) != 1 || !strings.Contains(v[0].Detail, "feed seqs 51..54 (4)") {
		t.Fatalf("receiver cut off 2 heartbeats before its answer: standby-no-loss %+v", v)
	}
	if v := violationsOf(moved(0, 10.7), CheckStandbyNoLoss); len(v) != 1 {
		t.Fatalf("a move whose receiver was not asked: standby-no-loss %+v", v)
	}
}
