// Tests of the judge on hand-built scenarios (the fixture the other check
// tests share): a clean run, planted violations, stop / re-start.

package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// TestMain holds every judge pass to the checks it declares (declaredOnly,
// check_passes.go) and checks for leaked goroutines.
func TestMain(m *testing.M) {
	declaredOnly = true
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// scenario is a small run built by hand: two sessions at 5 msg/s; worker-1
// is killed at 11 s while delivering a (checkpoint 45, delivered 50);
// worker-2 takes a over at 15.5 s resuming at 46; worker-2 delivers b
// throughout; every worker stops gracefully at 30 s.
type scenario struct {
	ev  Evidence
	set Settings
}

func tenureDels(session, worker string, epoch, from, to int64, startSec float64) []Delivery {
	var out []Delivery
	for q := from; q <= to; q++ {
		t := at(startSec + float64(q-from)*0.2)
		out = append(out, Delivery{Session: session, Seq: q, Epoch: epoch, Worker: worker, ReceivedAtMs: t.UnixMilli(), AtNs: t.UnixNano()})
	}
	return out
}

func conn(id int64, session string, open, closeSec float64, first, last int64, reason string) feed.ConnRecord {
	c := feed.ConnRecord{ID: id, Session: session, OpenedAt: at(open), ClosedAt: at(closeSec), Reason: reason, FirstSeq: first, LastSeq: last, Sent: last - first + 1}
	return c
}

func p64(v int64) *int64 { return &v }

func newScenario() *scenario {
	cfg := DefaultConfig()
	cfg.Stack.Sink = devstack.SinkStdout // the workers' stdout lines (destScenario: the sqs sink)
	set := cfg.Settings()
	var ev Evidence
	ev.Start, ev.End = t0, at(31)
	ev.Deliveries = append(ev.Deliveries, tenureDels("a", "worker-1", 1, 1, 50, 1)...)      // 1 .. 10.8 s
	ev.Deliveries = append(ev.Deliveries, tenureDels("a", "worker-2", 2, 46, 115, 15.5)...) // 15.5 .. 29.3 s
	ev.Deliveries = append(ev.Deliveries, tenureDels("b", "worker-2", 1, 1, 140, 1)...)     // 1 .. 28.8 s
	ev.Conns = []feed.ConnRecord{
		conn(1, "a", 0.9, 11.0, 1, 52, feed.ReasonClient),
		conn(2, "a", 15.4, 30.0, 46, 116, feed.ReasonClient),
		conn(3, "b", 0.9, 30.0, 1, 141, feed.ReasonClient),
	}
	ev.Actions = []Action{
		{Op: "start", Session: "a", At: at(0.5), Acked: at(0.52)},
		{Op: "start", Session: "b", At: at(0.5), Acked: at(0.53)},
	}
	ev.Incarnations = []Incarnation{
		{ID: "worker-1", Slot: 1, Started: t0, Ended: at(11.0), End: "kill-9", Exit: "0"},
		{ID: "worker-2", Slot: 2, Started: t0, Ended: at(30.0), End: "shutdown", Exit: "0"},
		{ID: "worker-1.r2", Slot: 1, Started: at(12), Ended: at(30.0), End: "shutdown", Exit: "0"},
	}
	ev.Faults = []Fault{{N: 1, Kind: KindKill, Start: at(11.0), End: at(11.0), Worker: "worker-1", NewWorker: "worker-1.r2"}}
	ev.Settled = Snapshot{At: at(29.5), Rows: []Row{
		{Session: "a", State: schema.StateStarted, Owner: "worker-2", Epoch: 2, LastSeq: p64(110)},
		{Session: "b", State: schema.StateStarted, Owner: "worker-2", Epoch: 1, LastSeq: p64(135)},
	}, Workers: []WorkerRow{
		{ID: "worker-1", State: schema.WorkerDead, Epoch: 2, List: schema.WorkerListDone, DeclaredBy: "worker-2"},
		{ID: "worker-1.r2", State: schema.WorkerAlive, Epoch: 1, List: schema.WorkerListAlive},
		{ID: "worker-2", State: schema.WorkerAlive, Epoch: 1, List: schema.WorkerListAlive},
	}}
	ev.Final = Snapshot{At: at(30.5), Rows: []Row{
		{Session: "a", State: schema.StateStarted, Epoch: 2, LastSeq: p64(115)},
		{Session: "b", State: schema.StateStarted, Epoch: 1, LastSeq: p64(140)},
	}, Workers: []WorkerRow{
		{ID: "worker-1", State: schema.WorkerDead, Epoch: 2, List: schema.WorkerListDone, DeclaredBy: "worker-2"},
		{ID: "worker-1.r2", State: schema.WorkerLeft, Epoch: 1, List: schema.WorkerListDone},
		{ID: "worker-2", State: schema.WorkerLeft, Epoch: 1, List: schema.WorkerListDone},
	}}
	ev.SinkFiles = []SinkFile{{Slot: 1, Lines: 50}, {Slot: 2, Lines: len(ev.Deliveries) - 50}}
	return &scenario{ev: ev, set: set}
}

func (s *scenario) judge() Result { return Analyze(s.ev, s.set, Plan{Seed: 1}) }

// plannedSwitch makes b a session with planned reconnects whose worker-2
// (epoch 1) switched connections make-before-break at 10 s: its first
// connection (seqs 1..47) open until 10.05 s, the next one (from seq 46)
// from 9.95 s, both of tenure worker-2/1; the deliveries are the same (the
// dedupe dropped the overlap).
func (s *scenario) plannedSwitch() {
	s.ev.Actions[1].Planned = true
	s.ev.Conns[2] = conn(3, "b", 0.9, 10.05, 1, 47, feed.ReasonClient)
	s.ev.Conns[2].Tenure = "worker-2/1"
	next := conn(7, "b", 9.95, 30.0, 46, 141, feed.ReasonClient)
	next.Tenure = "worker-2/1"
	s.ev.Conns = append(s.ev.Conns, next)
}

// schedule adds a source-schedule episode from 5 s to 8 s in which b (not
// planned) was dropped onto the schedule at 5 s and its next connection
// (5.2 s) closed at its max age at 9 s, its next one opened at 9.1 s; a
// new seq is delivered 200 ms after each close.
func (s *scenario) schedule() {
	s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindSchedule, Start: at(5), End: at(8), Sessions: []string{"b"}})
	s.ev.Conns[2] = conn(3, "b", 0.9, 5.0, 1, 21, feed.ReasonDropped)
	s.ev.Conns = append(s.ev.Conns, conn(7, "b", 5.2, 9.0, 21, 41, feed.ReasonMaxAge), conn(8, "b", 9.1, 30.0, 42, 141, feed.ReasonClient))
}

// zombie turns the kill of worker-1 into a zombie (SIGSTOP at 11 s, SIGCONT
// at 15.2 s) or a partition from DynamoDB (frozen proxy, thawed at 15.2 s):
// worker-2 took a over at 15.5 s; worker-1 learnt it was DEAD at its next
// heartbeat and exited 1 at 15.4 s.
func (s *scenario) zombie(kind string) {
	s.ev.Faults[0] = Fault{N: 1, Kind: kind, Start: at(11.0), End: at(15.2), Worker: "worker-1", NewWorker: "worker-1.r2"}
	s.ev.Incarnations[0].Ended, s.ev.Incarnations[0].End, s.ev.Incarnations[0].Exit = at(15.4), "dead", "exit status 1"
}

// drained makes worker-1's end a SIGTERM at 11.0 s (a rolling restart)
// whose drain hands a over when its tenure has delivered 1..n: worker-1
// delivers until its turn, worker-2 from n+1 at firstNew, no repeat.
func (s *scenario) drained(n int64, firstNew float64) {
	s.ev.Faults[0].Kind = KindRolling
	lastOld := 1 + 0.2*float64(n-1)
	s.ev.Incarnations[0].Ended, s.ev.Incarnations[0].End = at(lastOld+0.1), "sigterm"
	s.ev.Deliveries = removeTenure(removeTenure(s.ev.Deliveries, "a", "worker-1"), "a", "worker-2")
	s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-1", 1, 1, n, 1)...)
	s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-2", 2, n+1, 115, firstNew)...)
	s.ev.Conns[0] = conn(1, "a", 0.9, lastOld+0.05, 1, n, feed.ReasonClient)
	s.ev.Conns[1] = conn(2, "a", firstNew-0.1, 30.0, n+1, 116, feed.ReasonClient)
	s.ev.Settled.Workers[0] = WorkerRow{ID: "worker-1", State: schema.WorkerLeft, Epoch: 1, List: schema.WorkerListDone}
	s.ev.Final.Workers[0] = s.ev.Settled.Workers[0]
	s.fixSinks()
}

// fixSinks makes the sink files hold what the deliveries say.
func (s *scenario) fixSinks() {
	n := map[int]int{}
	for _, d := range s.ev.Deliveries {
		n[slotOf(d.Worker)]++
	}
	s.ev.SinkFiles = []SinkFile{{Slot: 1, Lines: n[1]}, {Slot: 2, Lines: n[2]}}
}

func violationsOf(res Result, check string) []Violation {
	var out []Violation
	for _, v := range res.Violations {
		if v.Check == check {
			out = append(out, v)
		}
	}
	return out
}

// A zombie or a partition that ends the way the protocol says (the worker
// fenced, taken over within the bound, then exited non-zero once it learnt
// it was DEAD) is clean.
func TestZombieAndPartitionClean(t *testing.T) {
	for _, kind := range []string{KindZombie, KindPartition} {
		s := newScenario()
		s.zombie(kind)
		res := s.judge()
		if !res.OK() {
			t.Fatalf("%s: violations %+v", kind, res.Violations)
		}
		k := res.Kinds[0]
		for _, kr := range res.Kinds {
			if kr.Kind == kind {
				k = kr
			}
		}
		if k.Faults != 1 || k.Affected != 1 || k.Recovery.Max != 4500 {
			t.Fatalf("%s: %+v", kind, k)
		}
	}
}

func TestCleanRunPasses(t *testing.T) {
	res := newScenario().judge()
	if !res.OK() {
		t.Fatalf("violations: %+v", res.Violations)
	}
	if res.Totals.Lost != 0 || res.Totals.Repeats != 5 || res.Totals.Tenures != 3 || res.Totals.Tail != 2 {
		t.Fatalf("totals %+v", res.Totals)
	}
	k := res.Kinds[0]
	if k.Kind != KindKill || k.Affected != 1 || k.Recovery.N != 1 || k.Recovery.Max != 4500 || k.Repeats != 5 {
		t.Fatalf("kill-9: %+v", k)
	}
	if len(res.Transitions) != 1 || res.Transitions[0].Cause != "crash" || res.Transitions[0].Repeats != 5 {
		t.Fatalf("transitions %+v", res.Transitions)
	}
	if len(res.Missing) != len(Plan{Seed: 1}.kinds())-1 {
		t.Fatalf("missing kinds %v", res.Missing)
	}
}

// A graceful hand-off is judged per session from its previous tenure's
// last delivery: a session the drain handed over 1.3 s after the SIGTERM,
// dark for 0.5 s, is within the bound; one handed over 11 s after it,
// past the shutdown deadline, is not, however short its gap.
func TestGracefulHandoffJudgedPerSession(t *testing.T) {
	s := newScenario()
	s.drained(55, 12.3) // worker-1's last delivery at 11.8 s
	res := s.judge()
	if !res.OK() {
		t.Fatalf("a hand-off dark for 0.5 s, 1.3 s after the SIGTERM: violations %+v", res.Violations)
	}
	fr := res.Faults[0]
	if fr.Affected != 1 || fr.Recovery.Max < 499 || fr.Recovery.Max > 501 || fr.Dark.Max != fr.Recovery.Max {
		t.Fatalf("fault %+v: want one session recovered 500 ms after its previous tenure's last delivery", fr)
	}
	s = newScenario()
	s.drained(105, 22.0) // worker-1's last delivery at 21.8 s
	if v := violationsOf(s.judge(), CheckHandoff); len(v) != 1 || !strings.Contains(v[0].Detail, "shutdown deadline") {
		t.Fatalf("a hand-off 11 s after the SIGTERM: recovery-handoff violations %+v, want one naming the shutdown deadline", v)
	}
}

// Every planted violation is found by the check that owns it.
func TestPlantedViolations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check string
		plant func(s *scenario)
	}{
		{"two connections at once", CheckOneConn, func(s *scenario) {
			s.ev.Conns[1].OpenedAt = at(10.5) // a's new connection while the old one is open
		}},
		{"two connections of two tenures at once", CheckOneConn, func(s *scenario) {
			s.plannedSwitch()
			s.ev.Conns[3].Tenure = "worker-1.r2/2" // another owner, though the session is planned
		}},
		{"two connections of one tenure, the session not planned", CheckOneConn, func(s *scenario) {
			s.plannedSwitch()
			s.ev.Actions[1].Planned = false
		}},
		{"two connections of one tenure that never delivered the session", CheckOneConn, func(s *scenario) {
			s.plannedSwitch()
			s.ev.Conns[2].Tenure, s.ev.Conns[3].Tenure = "worker-2/7", "worker-2/7"
		}},
		{"three connections of one tenure", CheckOneConn, func(s *scenario) {
			s.plannedSwitch()
			third := conn(9, "b", 10.0, 10.02, 47, 47, feed.ReasonClient)
			third.Tenure = "worker-2/1"
			s.ev.Conns = append(s.ev.Conns, third)
		}},
		{"two connections of one tenure past the switch timeout", CheckOneConn, func(s *scenario) {
			s.plannedSwitch()
			s.ev.Conns[2].ClosedAt, s.ev.Conns[2].LastSeq, s.ev.Conns[2].Sent = at(15), 72, 72 // 5 s together (bound 3 s + 1 s)
		}},
		{"a close at the max age not recovered in time", CheckSource, func(s *scenario) {
			s.schedule()
			s.ev.Deliveries = removeTenure(s.ev.Deliveries, "b", "worker-2")
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("b", "worker-2", 1, 1, 41, 1)...)
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("b", "worker-2", 1, 42, 140, 12.5)...) // 3.5 s after the close (bound 3 s)
			s.ev.Conns[4].OpenedAt = at(12.4)
		}},
		{"attempt refused by the one-connection policy", CheckOneConn, func(s *scenario) {
			s.ev.Conns = append(s.ev.Conns, feed.ConnRecord{ID: 9, Session: "b", OpenedAt: at(5), ClosedAt: at(5), Reason: feed.ReasonRefused, RefusedBy: string(feed.ModeRefuseNewer)})
		}},
		{"a sent seq never delivered", CheckNoLoss, func(s *scenario) {
			s.ev.Deliveries = removeSeq(s.ev.Deliveries, "b", 70)
		}},
		{"a seq the source never sent", CheckNoLoss, func(s *scenario) {
			s.ev.Deliveries = removeSeq(s.ev.Deliveries, "b", 61)
			s.ev.Conns[2].LastSeq = 60
			s.ev.Conns = append(s.ev.Conns, conn(4, "b", 13.0, 30.0, 62, 141, feed.ReasonClient))
			s.ev.Conns[2].ClosedAt = at(12.9)
		}},
		{"checkpoint ahead of the sink", CheckNoLoss, func(s *scenario) {
			s.ev.Final.Rows[1].LastSeq = p64(150)
		}},
		{"a stale epoch delivers", CheckFencing, func(s *scenario) {
			d := tenureDels("a", "worker-1", 1, 60, 60, 20)[0]
			s.ev.Deliveries = append(s.ev.Deliveries, d)
		}},
		{"a zombie delivers after it woke", CheckFencing, func(s *scenario) {
			s.zombie(KindZombie)
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-1", 1, 51, 51, 15.3)...)
		}},
		{"a partitioned worker delivers past its trust deadline", CheckFencing, func(s *scenario) {
			s.zombie(KindPartition)
			// 11 s + TTL 4 s − margin 1 s + slack 0.5 s = 14.5 s.
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-1", 1, 51, 51, 14.6)...)
		}},
		{"a worker delivers past its trust deadline with DynamoDB down", CheckFencing, func(s *scenario) {
			s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindDynamoDown, Start: at(20), End: at(28)})
			// b's tenure 1 still delivers at 23.6 s, after 20 s + TTL 4 s − margin 1 s + slack 0.5 s.
		}},
		{"a zombie that kept running once declared dead", CheckCrash, func(s *scenario) {
			s.zombie(KindZombie)
			s.ev.Incarnations[0].End, s.ev.Incarnations[0].Exit = "alive", "still running after it was declared dead: killed"
		}},
		{"a partitioned worker that exited 0 once declared dead", CheckCrash, func(s *scenario) {
			s.zombie(KindPartition)
			s.ev.Incarnations[0].Exit = "0"
		}},
		{"recovery after a partition too slow", CheckCrash, func(s *scenario) {
			s.zombie(KindPartition)
			s.ev.Deliveries = removeTenure(s.ev.Deliveries, "a", "worker-2")
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-2", 2, 46, 100, 17)...)
			s.ev.Conns[1].OpenedAt = at(16.9)
		}},
		{"out of order within a tenure", CheckOrder, func(s *scenario) {
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("b", "worker-2", 1, 30, 30, 28.9)...)
		}},
		{"repeats across a graceful handoff", CheckRepeats, func(s *scenario) {
			s.ev.Faults[0].Kind = KindRolling
			s.ev.Incarnations[0].End = "sigterm"
		}},
		{"repeats above the crash bound", CheckRepeats, func(s *scenario) {
			s.ev.Deliveries = removeTenure(s.ev.Deliveries, "a", "worker-2")
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-2", 2, 30, 115, 15.5)...)
			s.ev.Conns[1].FirstSeq, s.ev.Conns[1].Sent = 30, 116-30+1
		}},
		{"recovery after a crash too slow", CheckCrash, func(s *scenario) {
			s.ev.Deliveries = removeTenure(s.ev.Deliveries, "a", "worker-2")
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-2", 2, 46, 100, 19)...)
			s.ev.Conns[1].OpenedAt = at(18.9)
		}},
		{"never recovered after a crash", CheckCrash, func(s *scenario) {
			s.ev.Deliveries = removeTenure(s.ev.Deliveries, "a", "worker-2")
			s.ev.Conns = append(s.ev.Conns[:1], s.ev.Conns[2])
		}},
		{"graceful handoff slower than 1 s", CheckHandoff, func(s *scenario) {
			s.ev.Faults[0].Kind = KindRolling
			s.ev.Deliveries = removeTenure(s.ev.Deliveries, "a", "worker-2")
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("a", "worker-2", 2, 51, 115, 15.5)...)
			s.ev.Conns[1].FirstSeq = 51
		}},
		{"a stop not closed in time, delivering after it", CheckStop, func(s *scenario) {
			s.ev.Actions = append(s.ev.Actions, Action{Op: "stop", Session: "b", At: at(20), Acked: at(20.05), Epoch: 1})
			s.ev.Conns[2].ClosedAt = at(23)
			s.ev.Deliveries = removeAfter(s.ev.Deliveries, "b", at(22.9))
		}},
		{"a stopped session reopened by a newer tenure", CheckStop, func(s *scenario) {
			s.ev.Actions = append(s.ev.Actions, Action{Op: "stop", Session: "b", At: at(20), Acked: at(20.05), Epoch: 1})
			s.ev.Conns[2].ClosedAt, s.ev.Conns[2].LastSeq = at(20.3), 96
			s.ev.Deliveries = removeAfter(s.ev.Deliveries, "b", at(20.2))
			s.ev.Conns = append(s.ev.Conns, conn(5, "b", 25, 30, 97, 120, feed.ReasonClient))
			s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("b", "worker-1.r2", 2, 97, 120, 25.1)...)
		}},
		{"a start never delivered", CheckClaim, func(s *scenario) {
			s.ev.Actions = append(s.ev.Actions, Action{Op: "start", Session: "c", At: at(5), Acked: at(5.1)})
		}},
		{"a session owned by a dead worker", CheckEndOwners, func(s *scenario) {
			s.ev.Settled.Rows[0].Owner = "worker-1"
		}},
		{"a session owned by a left worker", CheckEndOwners, func(s *scenario) {
			s.ev.Settled.Workers[2].State = schema.WorkerLeft
		}},
		{"a STARTED session owned by nobody", CheckEndOwners, func(s *scenario) {
			s.ev.Settled.Rows[1].Owner = ""
		}},
		{"a killed worker still ALIVE in the table", CheckEndOwners, func(s *scenario) {
			s.ev.Settled.Workers[0].State = schema.WorkerAlive
		}},
		{"a session still owned after the graceful shutdown", CheckRelease, func(s *scenario) {
			s.ev.Final.Rows[0].Owner = "worker-2"
		}},
		{"a worker record not LEFT after the graceful shutdown", CheckRelease, func(s *scenario) {
			s.ev.Final.Workers[2].State = schema.WorkerAlive
		}},
		{"a killed worker's record not DEAD at the end", CheckRelease, func(s *scenario) {
			s.ev.Final.Workers = s.ev.Final.Workers[1:]
		}},
		{"a final checkpoint behind the sink", CheckRelease, func(s *scenario) {
			s.ev.Final.Rows[0].LastSeq = p64(110)
		}},
		{"a worker that did not exit 0 after SIGTERM", CheckRelease, func(s *scenario) {
			s.ev.Incarnations[1].Exit = "exit status 1"
		}},
		{"a sink line naming another slot's worker", CheckSink, func(s *scenario) {
			s.ev.SinkFiles[0].Foreign = 1
		}},
		{"sink files and received lines differ", CheckSink, func(s *scenario) {
			s.ev.SinkFiles[0].Lines = 49
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario()
			tc.plant(s)
			if tc.check != CheckSink {
				s.fixSinks()
			}
			res := s.judge()
			if len(violationsOf(res, tc.check)) == 0 {
				t.Fatalf("no %s violation; got %+v", tc.check, res.Violations)
			}
			for _, v := range res.Violations {
				t.Logf("%s: %s", v.Check, v.Detail)
			}
			if res.OK() {
				t.Fatal("OK with a violation")
			}
		})
	}
}

// A planned reconnect (two connections of one tenure, the session started
// with planned reconnects, the tenure its owner of record) is no overlap
// of two owners; a source-schedule episode whose closes are reconnected
// within the bound is clean.
func TestPlannedReconnectIsNoOverlap(t *testing.T) {
	s := newScenario()
	s.plannedSwitch()
	res := s.judge()
	if !res.OK() {
		t.Fatalf("violations: %+v", res.Violations)
	}
	pl := res.Planned
	if len(res.Overlaps) != 0 || len(res.PlannedOverlaps) != 1 || pl.Overlaps != 1 || pl.Rejected != 0 || pl.Sessions != 1 {
		t.Fatalf("overlaps %+v, planned %+v, figures %+v", res.Overlaps, res.PlannedOverlaps, pl)
	}
	if o := res.PlannedOverlaps[0]; o.Tenure != "worker-2/1" || o.Max != 2 || o.DurMs < 99 || o.DurMs > 101 || pl.Dark.Max > 201 {
		t.Fatalf("planned overlap %+v, dark %+v", o, pl.Dark)
	}

	s = newScenario()
	s.schedule()
	res = s.judge()
	if !res.OK() {
		t.Fatalf("source schedule: violations: %+v", res.Violations)
	}
	for _, k := range res.Kinds {
		if k.Kind == KindSchedule && (k.Faults != 1 || k.Affected != 1 || k.Recovery.N != 2 || k.Recovery.Max > 201 || k.Never != 0) {
			t.Fatalf("source schedule: %+v", k)
		}
	}
}

func removeSeq(ds []Delivery, session string, seq int64) []Delivery {
	var out []Delivery
	for _, d := range ds {
		if d.Session != session || d.Seq != seq {
			out = append(out, d)
		}
	}
	return out
}

func removeTenure(ds []Delivery, session, worker string) []Delivery {
	var out []Delivery
	for _, d := range ds {
		if d.Session != session || d.Worker != worker {
			out = append(out, d)
		}
	}
	return out
}

func removeAfter(ds []Delivery, session string, t time.Time) []Delivery {
	var out []Delivery
	for _, d := range ds {
		if d.Session != session || d.AtNs <= t.UnixNano() {
			out = append(out, d)
		}
	}
	return out
}

// The host's CPU pressure is turned into per-second fractions and each
// violation carries the worst second around it.
func TestHostCPUPressure(t *testing.T) {
	s := newScenario()
	s.ev.Actions = append(s.ev.Actions, Action{Op: "start", Session: "c", At: at(5), Acked: at(5.1)})
	for i := 0; i <= 31; i++ {
		us := int64(0)
		if i >= 6 {
			us = 600_000 // second 5 is 60 % stalled
		}
		s.ev.CPUPressure = append(s.ev.CPUPressure, PressureSample{AtNs: at(float64(i)).UnixNano(), TotalUs: us})
	}
	res := s.judge()
	h := res.HostCPU
	if !h.Measured || h.Max < 0.59 || h.Max > 0.61 || h.Over50 != 1 || h.PerSec[5] < 0.59 || h.PerSec[6] != 0 {
		t.Fatalf("pressure %+v", h)
	}
	v := violationsOf(res, CheckClaim)
	if len(v) != 1 || v[0].HostCPU < 0.59 {
		t.Fatalf("violations %+v", v)
	}
}

// A stop followed by a re-start that resumes at the checkpoint is clean; a
// re-start that repeats what the stop's release covered is not.
func TestStopRestart(t *testing.T) {
	build := func(resumeAt int64) *scenario {
		s := newScenario()
		s.ev.Actions = append(s.ev.Actions,
			Action{Op: "stop", Session: "b", At: at(10), Acked: at(10.05), Epoch: 1, Fault: 2},
			Action{Op: "restart", Session: "b", At: at(14), Acked: at(14.05), Fault: 2})
		s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindChurn, Start: at(10), End: at(14.05), Sessions: []string{"b"}})
		s.ev.Deliveries = removeTenure(s.ev.Deliveries, "b", "worker-2")
		s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("b", "worker-2", 1, 1, 45, 1)...) // up to 9.8 s
		s.ev.Deliveries = append(s.ev.Deliveries, tenureDels("b", "worker-1.r2", 2, resumeAt, 110, 14.3)...)
		s.ev.Conns[2] = conn(3, "b", 0.9, 10.3, 1, 46, feed.ReasonClient)
		s.ev.Conns = append(s.ev.Conns, conn(6, "b", 14.2, 30, resumeAt, 111, feed.ReasonClient))
		s.ev.Final.Rows[1].LastSeq = p64(110)
		s.ev.Settled.Rows[1].LastSeq = p64(105)
		s.fixSinks()
		return s
	}
	res := build(46).judge()
	if !res.OK() {
		t.Fatalf("violations: %+v", res.Violations)
	}
	if res.StopsChecked != 1 || res.Stops.N != 1 || res.Stops.Max > 300 {
		t.Fatalf("stops %d %+v", res.StopsChecked, res.Stops)
	}
	var churn *KindResult
	for i := range res.Kinds {
		if res.Kinds[i].Kind == KindChurn {
			churn = &res.Kinds[i]
		}
	}
	if churn == nil || churn.Affected != 1 || churn.Recovery.N != 1 {
		t.Fatalf("churn %+v", churn)
	}
	res = build(40).judge()
	if v := violationsOf(res, CheckRepeats); len(v) != 1 || !strings.Contains(v[0].Detail, "stop") {
		t.Fatalf("repeats after a graceful stop: %+v", res.Violations)
	}
}

func TestStatsOf(t *testing.T) {
	s := StatsOf([]float64{5, 1, 4, 2, 3})
	if s.N != 5 || s.P50 != 3 || s.Max != 5 || s.P99 != 5 {
		t.Fatalf("%+v", s)
	}
	if (StatsOf(nil) != Stats{}) {
		t.Fatal("empty stats")
	}
}

// A DynamoDB storm: every session delivering when it began must deliver a
// new seq within the bound after it was lifted (recovery-outage).
func TestStormRecovery(t *testing.T) {
	storm := func() *scenario {
		s := newScenario()
		s.set.Bounds.StormMs = 1000
		s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindThrottle, Start: at(20), End: at(22)})
		return s
	}
	res := storm().judge()
	if vs := violationsOf(res, CheckOutage); len(vs) != 0 {
		t.Fatalf("clean storm: %+v", vs)
	}
	if k := res.Faults[1]; k.Affected != 2 || k.Recovered != 2 || k.Recovery.N != 2 || k.Dark.N != 2 {
		t.Fatalf("clean storm: %+v", k)
	}
	// b's first new seq 2 s after the storm lifted: over the bound.
	s := storm()
	s.ev.Deliveries = slices.DeleteFunc(s.ev.Deliveries, func(d Delivery) bool {
		return d.Session == "b" && d.AtNs > at(22).UnixNano() && d.AtNs < at(24).UnixNano()
	})
	vs := violationsOf(s.judge(), CheckOutage)
	if len(vs) != 1 || vs[0].Session != "b" || !strings.Contains(vs[0].Detail, "dynamodb-throttle: a new seq (116, by worker-2@1) only 2000 ms after the storm lifted (bound 1000 ms)") {
		t.Fatalf("late: %+v", vs)
	}
	// b delivers nothing after it: never recovered.
	s = storm()
	s.ev.Deliveries = removeAfter(s.ev.Deliveries, "b", at(22))
	vs = violationsOf(s.judge(), CheckOutage)
	if len(vs) != 1 || vs[0].Detail != "dynamodb-throttle: no new seq delivered after the storm was lifted" {
		t.Fatalf("never: %+v", vs)
	}
}
