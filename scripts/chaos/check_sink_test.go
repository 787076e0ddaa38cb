// Tests of the sink checks with an AWS sink (the destination read back):
// sink-integrity, trust-deadline, checkpoint-prefix, recovery-sink.

package chaos

import (
	"testing"

	"github.com/wsfleet/wsfleet/scripts/devstack"
)

// destScenario is newScenario judged as a run of the batched sqs sink: the
// deliveries are what the destination held (stamped by the sink proxy),
// the workers' stdout sink files are empty.
func destScenario() *scenario {
	s := newScenario()
	cfg := DefaultConfig()
	s.set = cfg.Settings()
	s.ev.SinkFiles = []SinkFile{{Slot: 1}, {Slot: 2}}
	s.ev.Sink = &SinkEvidence{Sink: devstack.SinkSQS, Messages: int64(len(s.ev.Deliveries)), Stamped: len(s.ev.Deliveries)}
	return s
}

func TestDestinationRunPasses(t *testing.T) {
	s := destScenario()
	if s.set.Bounds.TrustDeadlineMs != 3600 || s.set.SinkRequestTimeoutMs != 500 || s.set.Bounds.SinkRecoverMs != 6500 {
		t.Fatalf("bounds %+v, request timeout %d", s.set.Bounds, s.set.SinkRequestTimeoutMs)
	}
	if res := s.judge(); !res.OK() {
		t.Fatalf("violations: %+v", res.Violations)
	}
	// A standard queue keeps no order, and a retry after a timeout whose
	// request was stored repeats an entry within its tenure: counted, not
	// judged.
	s.ev.Deliveries[10].AtNs, s.ev.Deliveries[11].AtNs = s.ev.Deliveries[11].AtNs, s.ev.Deliveries[10].AtNs
	s.ev.Deliveries = append(s.ev.Deliveries, s.ev.Deliveries[20])
	res := s.judge()
	if !res.OK() || res.Totals.Reordered == 0 {
		t.Fatalf("reordered %d, violations %+v", res.Totals.Reordered, res.Violations)
	}
	// A message the worker logged as skipped after a permanent refusal is
	// excused from no-loss and from the checkpoint prefix.
	s = destScenario()
	s.ev.Deliveries = removeSeq(s.ev.Deliveries, "b", 70)
	s.ev.Skips = []Skip{{Session: "b", Seq: 70, Epoch: 1, Worker: "worker-2", AtNs: at(15).UnixNano()}}
	s.ev.Sink.Refused = []RecordRef{{Session: "b", Seq: 70}}
	if res := s.judge(); !res.OK() || res.Totals.Skipped != 1 {
		t.Fatalf("skipped %d, violations %+v", res.Totals.Skipped, res.Violations)
	}
	// A sink fault that every session rides out.
	s = destScenario()
	s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindSinkLatency, Start: at(20), End: at(24)})
	res = s.judge()
	if !res.OK() {
		t.Fatalf("sink latency: %+v", res.Violations)
	}
	for _, k := range res.Kinds {
		if k.Kind == KindSinkLatency && (k.Affected != 2 || k.Recovery.N != 2) {
			t.Fatalf("sink latency %+v", k)
		}
	}
}

// Every planted violation of the destination checks is found by the check
// that owns it.
func TestPlantedSinkViolations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check string
		plant func(s *scenario)
	}{
		{"a partitioned worker's record reaches the destination past its trust deadline + the request timeout", CheckTrust, func(s *scenario) {
			s.zombie(KindPartition)
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-1", 1, 51, 51, 11+3.65)...)
		}},
		{"one worker's sink and DynamoDB path frozen: a record after the bound", CheckTrust, func(s *scenario) {
			s.zombie(KindSinkFreezeDynamo)
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-1", 1, 51, 51, 11+3.7)...)
		}},
		{"every DynamoDB path frozen: a record of a frozen worker before the thaw, after the bound", CheckTrust, func(s *scenario) {
			s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindSinkRefuseDynamo, Start: at(20), End: at(23.8)})
			// b's worker-2 keeps delivering through the freeze.
		}},
		{"a checkpoint past a seq missing at the destination", CheckPrefix, func(s *scenario) {
			s.ev.Deliveries = removeSeq(s.ev.Deliveries, "b", 100)
		}},
		{"a released last_seq past what the destination holds", CheckPrefix, func(s *scenario) {
			s.ev.Releases = []Release{{Session: "a", Worker: "worker-2", Epoch: 2, LastSeq: 116, Message: releaseLogMessage, AtNs: at(30).UnixNano()}}
		}},
		{"a session that never delivers new seqs after a sink freeze", CheckSinkRecovery, func(s *scenario) {
			s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindSinkFreeze, Start: at(20), End: at(22)})
			s.ev.Deliveries = removeAfter(s.ev.Deliveries, "b", at(20))
		}},
		{"a session delivering again past the bound after a sink freeze", CheckSinkRecovery, func(s *scenario) {
			s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindSinkFreeze, Start: at(15), End: at(16)})
			var keep []Delivery
			for _, d := range s.ev.Deliveries {
				if d.Session != "b" || d.AtNs <= at(15).UnixNano() || d.AtNs > at(23).UnixNano() {
					keep = append(keep, d)
				}
			}
			s.ev.Deliveries = keep
		}},
		{"a skip logged for a message the sink never refused permanently", CheckNoLoss, func(s *scenario) {
			s.ev.Deliveries = removeSeq(s.ev.Deliveries, "b", 70)
			s.ev.Skips = []Skip{{Session: "b", Seq: 70, Epoch: 1, Worker: "worker-2", AtNs: at(15).UnixNano()}}
			s.ev.Sink.Refused = []RecordRef{{Session: "b", Seq: 71}}
		}},
		{"a destination record naming no worker of the run", CheckSink, func(s *scenario) {
			s.ev.Deliveries = append(s.ev.Deliveries, Delivery{Session: "b", Seq: 141, Epoch: 1, Worker: "worker-9", AtNs: at(29).UnixNano()})
		}},
		{"sink lines on a worker's stdout with the sqs sink", CheckSink, func(s *scenario) {
			s.ev.SinkFiles[0].Lines = 3
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := destScenario()
			tc.plant(s)
			res := s.judge()
			if len(violationsOf(res, tc.check)) == 0 {
				t.Fatalf("no %s violation; got %+v", tc.check, res.Violations)
			}
		})
	}
}

// Just inside the bounds is clean: a partitioned worker's record at
// F + TTL − margin + the request timeout.
func TestTrustDeadlineBoundIsInclusive(t *testing.T) {
	s := destScenario()
	s.zombie(KindPartition)
	s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-1", 1, 51, 51, 11+3.55)...)
	res := s.judge()
	if v := violationsOf(res, CheckTrust); len(v) != 0 {
		t.Fatalf("trust-deadline: %+v", v)
	}
	if len(res.TrustLateMs) != 1 || res.TrustLateMs[0] < 3549 || res.TrustLateMs[0] > 3551 {
		t.Fatalf("trust late %v", res.TrustLateMs)
	}
}

// Evidence without a destination (the benchmarks judge their stdout lines
// with chaos's default settings, whose sink is sqs) is judged as stdout
// lines: order judged, no sink bounds.
func TestEvidenceWithoutDestinationIsJudgedAsStdout(t *testing.T) {
	s := newScenario()
	s.set = DefaultConfig().Settings()
	res := s.judge()
	if !res.OK() || res.Settings.Sink != devstack.SinkStdout || res.Settings.Bounds.TrustDeadlineMs != 0 || res.Settings.Bounds.FenceSlackMs != 500 {
		t.Fatalf("settings %+v, violations %+v", res.Settings, res.Violations)
	}
	s.ev.Deliveries[10].AtNs, s.ev.Deliveries[11].AtNs = s.ev.Deliveries[11].AtNs, s.ev.Deliveries[10].AtNs
	if res := s.judge(); len(violationsOf(res, CheckOrder)) == 0 {
		t.Fatalf("no order violation on stdout lines out of order: %+v", res.Violations)
	}
}

// After refusals, each record refused permanently that was still pending
// at the end extends its session's recovery bound by its remaining
// attempts (2 × 5 s): one pending record, 11.5 s; two, 21.5 s.
func TestRefusalRecoveryGrowsWithPendingPermanentRefusals(t *testing.T) {
	build := func(refused ...int64) Result {
		s := destScenario()
		s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindSinkRefuse, Start: at(14), End: at(15)})
		var keep []Delivery
		for _, d := range s.ev.Deliveries {
			if d.Session != "b" || d.AtNs <= at(15).UnixNano() || d.AtNs > at(27.5).UnixNano() {
				keep = append(keep, d)
			}
		}
		s.ev.Deliveries = keep
		for _, q := range refused {
			s.ev.Sink.Refused = append(s.ev.Sink.Refused, RecordRef{Session: "b", Seq: q})
			s.ev.Skips = append(s.ev.Skips, Skip{Session: "b", Seq: q, Epoch: 1, Worker: "worker-2"})
		}
		return s.judge()
	}
	if v := violationsOf(build(), CheckSinkRecovery); len(v) != 1 {
		t.Fatalf("12.6 s after refusals with none pending: %+v", v)
	}
	if v := violationsOf(build(80, 81), CheckSinkRecovery); len(v) != 0 {
		t.Fatalf("12.6 s after refusals with two pending: %+v", v)
	}
}

// On the kinesis sink order is judged in the stream's order (Pos): a
// tenure's arrival below a seq it had written is a violation; a repeat of
// what it wrote (a request sent again after a timeout) is not.
func TestKinesisOrderIsJudgedInTheStreamsOrder(t *testing.T) {
	kin := func() *scenario {
		s := destScenario()
		s.set.Sink = devstack.SinkKinesis
		s.ev.Sink.Sink = devstack.SinkKinesis
		for i := range s.ev.Deliveries {
			s.ev.Deliveries[i].Pos = int64(i + 1)
		}
		return s
	}
	if res := kin().judge(); !res.OK() || res.Totals.Inverted != 0 {
		t.Fatalf("inverted %d, violations %+v", res.Totals.Inverted, res.Violations)
	}
	s := kin()
	d := s.ev.Deliveries
	d = append(d, d[20:25]...) // pack 21..25 written again after its timeout
	for i := range d {
		d[i].Pos = int64(i + 1)
	}
	s.ev.Deliveries = d
	if res := s.judge(); !res.OK() || res.Totals.Inverted != 0 {
		t.Fatalf("a repeat of a written pack: inverted %d, violations %+v", res.Totals.Inverted, res.Violations)
	}
	s = kin()
	d = s.ev.Deliveries
	d[10].Pos, d[11].Pos = d[11].Pos, d[10].Pos // same stamps order, the stream's order swapped
	if res := s.judge(); len(violationsOf(res, CheckOrder)) == 0 || res.Totals.Inverted == 0 {
		t.Fatalf("no order violation for an inversion in the stream: %+v", res.Violations)
	}
}
