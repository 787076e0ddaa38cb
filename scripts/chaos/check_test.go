package chaos

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

// zombie turns the kill of worker-1 into a zombie (SIGSTOP at 11 s, SIGCONT
// at 15.2 s) or a partition from DynamoDB (frozen proxy, thawed at 15.2 s):
// worker-2 took a over at 15.5 s; worker-1 learnt it was DEAD at its next
// heartbeat and exited 1 at 15.4 s.
func (s *scenario) zombie(kind string) {
	s.ev.Faults[0] = Fault{N: 1, Kind: kind, Start: at(11.0), End: at(15.2), Worker: "worker-1", NewWorker: "worker-1.r2"}
	s.ev.Incarnations[0].Ended, s.ev.Incarnations[0].End, s.ev.Incarnations[0].Exit = at(15.4), "dead", "exit status 1"
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
	if len(res.Missing) != len(AllKinds)-1 {
		t.Fatalf("missing kinds %v", res.Missing)
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

// A line cut short by a kill is not a record: the sink file check counts
// it, and the delivery check needs the next owner to deliver it again.
func TestSinkFileHalfLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "worker-1.sink.jsonl")
	body := `{"connection_id":"a","seq":1,"lease_epoch":1,"worker_id":"worker-1","received_at_ms":1}` + "\n" +
		`{"connection_id":"a","seq":2,"lease_epoch":1,"worker_id":"worker-9","received_at_ms":2}` + "\n" +
		`{"connection_id":"a","seq":3,"lease_ep`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	sf, err := readSinkFile(path, 1, map[string]bool{"worker-1": true})
	if err != nil {
		t.Fatal(err)
	}
	if sf.Lines != 3 || sf.Bad != 1 || sf.Foreign != 1 {
		t.Fatalf("%+v", sf)
	}
	if sf, err := readSinkFile(filepath.Join(t.TempDir(), "none"), 2, nil); err != nil || sf.Lines != 0 {
		t.Fatalf("missing file: %+v %v", sf, err)
	}
}

func TestPlan(t *testing.T) {
	c := ShortConfig()
	c.Seed = 42
	a, b := NewPlan(c), NewPlan(c)
	if a.String() != b.String() {
		t.Fatal("the same seed made two plans")
	}
	c.Seed = 43
	if NewPlan(c).String() == a.String() {
		t.Fatal("two seeds made the same plan")
	}
	kinds := map[string]bool{}
	for _, s := range a.Steps {
		kinds[s.Kind] = true
		if (s.Kind == KindZombie || s.Kind == KindPartition) && s.Hold <= time.Duration(c.Settings().Bounds.CrashMs)*time.Millisecond {
			t.Fatalf("%s held %v, not past the crash bound (its watchers must have declared it dead)", s.Kind, s.Hold)
		}
		if s.Kind == KindDynamoDown && s.Hold != 2*c.Stack.Worker.LeaseTTL {
			t.Fatalf("DynamoDB down %v", s.Hold)
		}
		if s.Kind == KindClockOffset && (s.Offset == 0 || s.Offset.Abs() > c.ClockOffsetMax) {
			t.Fatalf("offset %v outside the max %v", s.Offset, c.ClockOffsetMax)
		}
	}
	for _, k := range AllKinds {
		if !kinds[k] {
			t.Fatalf("the short plan lacks %s", k)
		}
	}
	if len(a.Steps) != len(AllKinds) || a.Steps[0].Kind != KindClockOffset {
		t.Fatalf("short plan: %s", a)
	}
	// The demo plan is fixed, and the short run runs its steps right after
	// the clock offset.
	d := c
	d.Plan = PlanDemo
	demo := NewPlan(d)
	d.Seed = 42
	if demo.String() != NewPlan(d).String() || len(demo.Steps) != len(demoKinds) || demo.PolicyAfter != 0 {
		t.Fatalf("demo plan:\n%s", demo)
	}
	for i, s := range demo.Steps {
		got := a.Steps[i+1]
		if got.Kind != s.Kind || got.Gap != s.Gap || got.Count != s.Count || got.Pick != s.Pick || s.Kind != demoKinds[i] {
			t.Fatalf("short step %d %+v, demo step %+v", i+2, got, s)
		}
	}
	long := DefaultConfig()
	long.Seed = 42
	lp := NewPlan(long)
	var planned time.Duration
	for _, s := range lp.Steps {
		planned += estimate(s, long)
	}
	if planned < 2*long.Duration || len(lp.Steps) < 4*len(AllKinds) || lp.PolicyAfter != 0 {
		t.Fatalf("10-minute plan: %d steps, %v planned", len(lp.Steps), planned)
	}
}

// The demo plan's result lists its own kinds only: none is missing.
func TestDemoPlanKinds(t *testing.T) {
	s := newScenario()
	res := Analyze(s.ev, s.set, Plan{Name: PlanDemo})
	if !res.OK() || len(res.Missing) != len(demoKinds)-1 || len(res.Kinds) != len(demoKinds) || res.Kinds[0].Kind != KindKill {
		t.Fatalf("missing %v, kinds %+v, violations %+v", res.Missing, res.Kinds, res.Violations)
	}
	var md strings.Builder
	WriteReport(&md, res)
	if !strings.Contains(md.String(), "the demo plan") || !strings.Contains(md.String(), "`make demo`") {
		t.Fatalf("report:\n%s", md.String())
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

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	c.OutDir = "x"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	d := DemoConfig()
	d.OutDir = "x"
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Stack.Workers, c.Stack.InMemory, c.FeedPingEvery, c.OutDir, c.Plan = 2, true, 5*time.Second, "", "nope"
	c.Stack.DynamoProxies = false
	err := c.Validate()
	for _, want := range []string{"workers", "on disk", "feed ping", "out dir", "plan", "proxy"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// The outputs: the report names every fault kind and check, and the SVG is
// well-formed XML with a row per session.
func TestOutputs(t *testing.T) {
	s := newScenario()
	s.ev.Faults = append(s.ev.Faults, Fault{N: 2, Kind: KindDynamoDown, Start: at(12), End: at(14)})
	res := s.judge()
	dir := t.TempDir()
	if err := WriteOutputs(dir, res, s.ev); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append([]string{"## Recovery time per fault kind", "## Checks", "## Violations", "timeline.svg"}, checkNames()...) {
		if !strings.Contains(string(md), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	f, err := os.Open(filepath.Join(dir, TimelineFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	texts := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("timeline.svg is not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "text" {
			texts++
		}
	}
	if texts < 10 {
		t.Fatalf("%d text elements", texts)
	}
	if _, err := os.Stat(filepath.Join(dir, ResultFile)); err != nil {
		t.Fatal(err)
	}
	// The saved evidence judges the same way again.
	path := filepath.Join(dir, EvidenceFile)
	if err := SaveEvidence(path, Saved{Settings: s.set, Plan: Plan{Seed: 1}, Evidence: s.ev}); err != nil {
		t.Fatal(err)
	}
	saved, err := LoadEvidence(path)
	if err != nil {
		t.Fatal(err)
	}
	again := Analyze(saved.Evidence, saved.Settings, saved.Plan)
	if again.Totals != res.Totals || len(again.Violations) != len(res.Violations) {
		t.Fatalf("re-judged %+v, judged %+v", again.Totals, res.Totals)
	}
}

func checkNames() []string {
	var out []string
	for _, c := range checkRules {
		out = append(out, c.name)
	}
	return out
}

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
