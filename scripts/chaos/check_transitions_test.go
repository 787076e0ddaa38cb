// Tests of the ownership-change checks: rebalancing moves, scale-out and
// scale-in, a hand-off cut off by an outage.

package chaos

import (
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

// rebalanced turns worker-1's tenure of a into a rebalancing move to
// worker-2 (logged at 10.85 s, just after worker-1's last delivery at
// 10.8 s), worker-2 delivering from resume (seq) at startSec.
func (s *scenario) rebalanced(resume int64, startSec float64) {
	s.ev.Moves = []Move{{Session: "a", From: "worker-1", To: "worker-2", AtNs: at(10.85).UnixNano()}}
	s.ev.Deliveries = removeTenure(s.ev.Deliveries, "a", "worker-2")
	s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-2", 2, resume, 115, startSec)...)
	s.ev.Conns[0].ClosedAt = at(10.9)
	s.ev.Conns[1].OpenedAt, s.ev.Conns[1].FirstSeq, s.ev.Conns[1].Sent = at(startSec-0.05), resume, 116-resume+1
	s.fixSinks()
}

func transitionOf(res Result, cause string) *Transitions {
	for i := range res.Transitions {
		if res.Transitions[i].Cause == cause {
			return &res.Transitions[i]
		}
	}
	return nil
}

func TestRebalancingMovesAreJudgedAsGracefulHandoffs(t *testing.T) {
	s := newScenario()
	s.rebalanced(51, 11.0)
	res := s.judge()
	if len(res.Violations) > 0 {
		t.Fatalf("a quick move with nothing repeated: violations %+v", res.Violations)
	}
	if tr := transitionOf(res, "rebalance"); tr == nil || tr.Count != 1 || tr.Repeats != 0 {
		t.Fatalf("transitions %+v: want one rebalancing move", res.Transitions)
	}

	// The scenario's kill of worker-1 at 11 s overlaps the move: its
	// slowness is the crash's (judged by the crash checks), not the move's.
	s = newScenario()
	s.rebalanced(51, 12.5)
	if res := s.judge(); len(violationsOf(res, CheckRebalance)) > 0 {
		t.Errorf("a move slowed by a crash: %+v", violationsOf(res, CheckRebalance))
	}

	s = newScenario()
	s.ev.Faults = nil      // no fault: the move alone
	s.rebalanced(46, 12.5) // 1.7 s dark, and seqs 46..50 again
	res = s.judge()
	if len(violationsOf(res, CheckRebalance)) == 0 {
		t.Errorf("a move whose receiver delivered 1.7 s after the sender: no %s violation in %+v", CheckRebalance, res.Violations)
	}
	if len(violationsOf(res, CheckRepeats)) == 0 {
		t.Errorf("a move that repeated 5 seqs: no %s violation in %+v", CheckRepeats, res.Violations)
	}
}

// A move the sender logged between its last delivery and the receiver's
// first ended the tenure, though a freeze of the sender's sink and
// DynamoDB began just before its last delivery (the move needs neither:
// its hand-off goes to the receiver over HTTP). Seen in a short chaos run:
// the judge took such a move for a partition's takeover.
func TestAMoveDuringAFreezeOfItsSenderIsTheMoves(t *testing.T) {
	s := newScenario()
	s.rebalanced(51, 11.0)
	s.ev.Faults[0] = Fault{N: 1, Kind: KindSinkFreezeDynamo, Start: at(10.7), End: at(15.2), Worker: "worker-1"}
	res := s.judge()
	if tr := transitionOf(res, "rebalance"); tr == nil || tr.Count != 1 {
		t.Fatalf("transitions %+v: want the move judged a rebalancing move", res.Transitions)
	}
	if tr := transitionOf(res, "partition"); tr != nil {
		t.Fatalf("transitions %+v: the move judged a partition's takeover", res.Transitions)
	}
}

func TestScaleOutIsBalancedWithinItsBound(t *testing.T) {
	plant := func(end time.Time) Result {
		s := newScenario()
		s.rebalanced(51, 11.0)
		s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindScaleOut, Start: at(10.5), End: end, Worker: "worker-2"})
		return s.judge()
	}
	res := plant(at(12))
	if len(res.Violations) > 0 {
		t.Fatalf("balanced 1.5 s after the join: violations %+v", res.Violations)
	}
	var fr *FaultResult
	for i := range res.Faults {
		if res.Faults[i].Kind == KindScaleOut {
			fr = &res.Faults[i]
		}
	}
	if fr == nil || fr.Affected != 1 || fr.Recovered != 1 {
		t.Fatalf("scale-out fault %+v: want the one session moved to the new worker", fr)
	}
	if res := plant(at(10.5)); len(violationsOf(res, CheckRebalance)) != 1 {
		t.Errorf("never balanced: violations %+v, want one %s", res.Violations, CheckRebalance)
	}
	bound := time.Duration(DefaultConfig().Settings().Bounds.BalanceMs) * time.Millisecond
	if res := plant(at(10.5).Add(bound + time.Second)); len(violationsOf(res, CheckRebalance)) != 1 {
		t.Errorf("balanced after the bound: violations %+v, want one %s", res.Violations, CheckRebalance)
	}
}

// A hand-off that stops reading just before DynamoDB stops answering cannot
// write its final seq: the tenure ends because of the outage, and its
// successor (acquiring after it) repeats what was delivered since the last
// checkpoint, within the outage bound. Seen in a seeded run: a rebalancing
// move's release timed out 190 ms after the sender's last delivery.
func TestHandoffCutOffByAnOutageIsTheOutages(t *testing.T) {
	// worker-1 last delivers a at 10.8 s (its hand-off's release then
	// fails) and worker-2 resumes a at 46 at 15.5 s, after the outage. b:
	// worker-2 fences itself 2 s into the outage and acquires it again (a new
	// tenure, resuming exactly) once DynamoDB is back.
	outage := func(startSec float64) *scenario {
		s := newScenario()
		s.ev.Faults = []Fault{{N: 1, Kind: KindDynamoDown, Start: at(startSec), End: at(15.0), Note: "dynalite frozen"}}
		s.ev.Deliveries = removeTenure(s.ev.Deliveries, "b", "worker-2")
		s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("b", "worker-2", 1, 1, 61, 1)...)      // 1 .. 13 s
		s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("b", "worker-2", 2, 62, 130, 15.2)...) // 15.2 .. 28.8 s
		s.ev.Conns[2] = conn(3, "b", 0.9, 30.0, 1, 131, feed.ReasonClient)
		s.ev.Settled.Rows[1].Epoch, s.ev.Settled.Rows[1].LastSeq = 2, p64(125)
		s.ev.Final.Rows[1].Epoch, s.ev.Final.Rows[1].LastSeq = 2, p64(130)
		s.fixSinks()
		return s
	}
	res := outage(11.0).judge()
	if len(res.Violations) > 0 {
		t.Fatalf("a hand-off cut off by an outage 0.2 s after its last delivery: %+v", res.Violations)
	}
	if tr := transitionOf(res, "outage"); tr == nil || tr.Count != 2 || tr.Repeats != 5 {
		t.Fatalf("transitions %+v: want two outage changes, 5 repeats (a's)", res.Transitions)
	}
	// 2 s before the outage, nothing the outage did explains a's repeats.
	res = outage(12.8).judge()
	if v := violationsOf(res, CheckRepeats); len(v) != 1 || v[0].Session != "a" {
		t.Fatalf("repeats after a tenure that ended 2 s before the outage: want one %s violation on a, got %+v", CheckRepeats, res.Violations)
	}
}

// A scale-in is a graceful SIGTERM: its hand-offs are judged as such (no
// repeat allowed), not as changes no fault explains.
func TestScaleInHandoffsAreGracefulHandoffs(t *testing.T) {
	s := newScenario()
	s.rebalanced(51, 11.0)
	s.ev.Moves = nil
	s.ev.Faults = []Fault{{N: 1, Kind: KindScaleIn, Start: at(10.7), End: at(10.9), Worker: "worker-1"}}
	s.ev.Incarnations[0].End = "shutdown"
	res := s.judge()
	if tr := transitionOf(res, "handoff"); tr == nil || tr.Count != 1 || transitionOf(res, "unexplained") != nil {
		t.Fatalf("transitions %+v: want the scale-in's change as one graceful handoff", res.Transitions)
	}
	s.rebalanced(46, 11.0) // seqs 46..50 again
	s.ev.Moves = nil
	if v := violationsOf(s.judge(), CheckRepeats); len(v) != 1 {
		t.Fatalf("a scale-in hand-off that repeated 5 seqs: want one %s violation, got %+v", CheckRepeats, v)
	}
}
