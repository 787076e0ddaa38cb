package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// obsSeqs are deliveries of feed seqs by worker, 200 ms apart from at.
func obsSeqs(worker string, at time.Time, seqs ...int64) []sinkObs {
	out := make([]sinkObs, len(seqs))
	for i, q := range seqs {
		out[i] = sinkObs{FeedSeq: q, Seq: int64(i + 1), Worker: worker, At: at.Add(time.Duration(i) * 200 * time.Millisecond)}
	}
	return out
}

// Lost are the feed seqs between the first and the last delivered never
// delivered; repeated the deliveries of a seq already delivered, in any
// order; deliveries without a feed seq are left out.
func TestJudgeFeedSeqs(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		name                      string
		obs                       []sinkObs
		delivered, lost, repeated int64
	}{
		{"none", nil, 0, 0, 0},
		{"clean", obsSeqs("w1", t0, 5, 6, 7, 8), 4, 0, 0},
		// A dial takeover of a live source: 9..58 never delivered.
		{"dial", append(obsSeqs("w1", t0, 5, 6, 7, 8), obsSeqs("w2", t0.Add(11*time.Second), 59, 60)...), 6, 50, 0},
		// A standby's window repeats 7, 8 and goes on live: nothing lost.
		{"standby", append(obsSeqs("w1", t0, 5, 6, 7, 8), obsSeqs("w2", t0.Add(10*time.Second), 7, 8, 9, 10)...), 6, 0, 2},
		// Out of order, a seq three times, a record without a feed seq.
		{"odd", append(obsSeqs("w1", t0, 3, 1, 3, 0, 3), obsSeqs("w2", t0, 5)...), 3, 2, 2},
	} {
		d, l, r := judgeFeedSeqs(tc.obs)
		if d != tc.delivered || l != tc.lost || r != tc.repeated {
			t.Errorf("%s: delivered %d lost %d repeated %d, want %d %d %d", tc.name, d, l, r, tc.delivered, tc.lost, tc.repeated)
		}
	}
}

// Even sessions have a standby, odd ones are the control group; each group
// takes seq_mode none and the seq field without resume by turns.
func TestStandbyFields(t *testing.T) {
	for i, want := range []struct {
		standby, noseq bool
	}{{true, true}, {false, true}, {true, false}, {false, false}, {true, true}} {
		f, sb := standbyFields(i)
		if sb != want.standby || (f["seq_mode"] == "none") != want.noseq {
			t.Errorf("session %d: standby %v fields %v", i, sb, f)
		}
		if v, ok := f["resume_query_param"]; !ok || v != nil {
			t.Errorf("session %d: resume not dropped: %v", i, f)
		}
		if _, ok := f["standby"]; ok != sb {
			t.Errorf("session %d: standby field %v, want %v", i, f, sb)
		}
		if want.noseq {
			if v, ok := f["seq_field"]; !ok || v != nil {
				t.Errorf("session %d: seq_field not dropped: %v", i, f)
			}
		}
	}
}

// One round: the standby session is delivered again 9.9 s after the last
// message the victim delivered, 20 ms after the declared death, with its
// window's repeats and nothing lost; the control session loses what the
// source sent meanwhile; one is never delivered again.
func TestSummarizeStandby(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	kill := t0.Add(1000 * time.Millisecond)
	dead := kill.Add(9800 * time.Millisecond)
	col := newCollector()
	add := func(id string, obs []sinkObs) {
		col.obs[id] = append(col.obs[id], obs...)
	}
	// Victim w1 delivers 1..5 at 0..800 ms; the kill at 1000 ms.
	add("sb-1", obsSeqs("w1", t0, 1, 2, 3, 4, 5))
	add("sb-1", obsSeqs("w2", dead.Add(20*time.Millisecond), 3, 4, 5, 6, 7))
	add("sb-2", obsSeqs("w1", t0, 1, 2, 3, 4, 5))
	add("sb-2", obsSeqs("w3", dead.Add(600*time.Millisecond), 56, 57))
	add("sb-3", obsSeqs("w1", t0, 1, 2, 3, 4, 5))
	first := func(id string) sinkObs {
		for _, o := range col.obs[id] {
			if o.Worker != "w1" {
				return o
			}
		}
		t.Fatalf("%s: no move", id)
		return sinkObs{}
	}
	conn := func(id, tenure string, open, closed time.Time, standby bool) feed.ConnRecord {
		return feed.ConnRecord{Session: id, Tenure: tenure, OpenedAt: open, ClosedAt: closed, Standby: standby, Reason: feed.ReasonClient}
	}
	conns := []feed.ConnRecord{
		conn("sb-1", "w1/1", t0.Add(-time.Second), kill.Add(time.Second), false),
		conn("sb-1", "w2/standby/1", t0.Add(-500*time.Millisecond), time.Time{}, true),
		conn("sb-2", "w1/1", t0.Add(-time.Second), kill.Add(time.Second), false),
		conn("sb-2", "w3/2", dead.Add(500*time.Millisecond), time.Time{}, false),
		{Session: "sb-2", OpenedAt: t0, Reason: feed.ReasonRefused},
		conn("sb-3", "w1/1", t0.Add(-time.Second), kill.Add(time.Second), false),
	}
	rd := standbyRound{victim: "w1", at: kill, ids: []string{"sb-1", "sb-2", "sb-3"}, standby: map[string]bool{"sb-1": true, "sb-3": true},
		moved: map[string]sinkObs{"sb-1": first("sb-1"), "sb-2": first("sb-2")}, deadAtMs: dead.UnixMilli(), promotions: 1,
		acquired: map[string]acquireLine{"sb-1": {At: dead.Add(15 * time.Millisecond), Standby: true}, "sb-2": {At: dead.Add(100 * time.Millisecond)}},
		cost: StandbyCost{WindowSeconds: 36, Held: 2, Wanted: 2, StandbyHours: 0.02, WindowBytes: 4000, RSSDeltaBytes: 200 << 10,
			Steady: map[string]Usage{dynamostore.OpGet: {Reads: 2, ReadUnits: 2}},
			Round:  map[string]Usage{dynamostore.OpAssignStandby: {Writes: 3, WriteUnits: 3}, dynamostore.OpDropStandby: {Writes: 3, WriteUnits: 3}}}}
	res := &StandbyRun{Rounds: 1, SessionsPerRound: 3, FeedRate: 5, ExpectedLost: 50}
	summarizeStandby(res, []standbyRound{rd}, col, conns)

	sb, ctl := res.Standby, res.Control
	if sb.Sessions != 2 || sb.Unrecovered != 1 || sb.Lost != 0 || sb.Repeated != 3 || sb.RepeatedMax != 3 || sb.Delivered != 12 || sb.ConnsAtKill != 3 {
		t.Fatalf("standby group: %+v", sb)
	}
	// Dark: the victim's last (800 ms) → the first after (dead + 20 ms).
	if sb.Dark.N != 1 || sb.Dark.Max != 10020 || sb.DeadToFirst.N != 1 || sb.DeadToFirst.Max != 20 {
		t.Fatalf("standby dark %+v, dead → first %+v", sb.Dark, sb.DeadToFirst)
	}
	if sb.Promoted != 1 || sb.DeadToAcquired.Max != 15 || sb.AcquiredToFirst.Max != 5 || ctl.Promoted != 0 || ctl.DeadToAcquired.Max != 100 || ctl.AcquiredToFirst.Max != 500 {
		t.Fatalf("acquire split: standby %+v / %+v, control %+v / %+v", sb.DeadToAcquired, sb.AcquiredToFirst, ctl.DeadToAcquired, ctl.AcquiredToFirst)
	}
	if ctl.Sessions != 1 || ctl.Lost != 50 || ctl.LostMax != 50 || ctl.Repeated != 0 || ctl.ConnsAtKill != 1 || ctl.DeadToFirst.Max != 600 {
		t.Fatalf("control group: %+v", ctl)
	}
	if res.Promotions != 1 || res.Cost.Held != 2 || res.Cost.Round[dynamostore.OpAssignStandby].Writes != 3 {
		t.Fatalf("run: %+v", res)
	}
	if got := res.Cost.RRUPerSH(); got != 100 {
		t.Fatalf("read units per standby-hour: %v", got)
	}
	if got := res.Cost.WRUPerSH(); got != 0 {
		t.Fatalf("write units per standby-hour: %v", got)
	}
}

// sampleStandby is a standby run as summarizeStandby leaves it.
func sampleStandby() *StandbyRun {
	return &StandbyRun{Rounds: 1, SessionsPerRound: 40, FeedRate: 5, ExpectedLost: 50, Promotions: 20,
		Standby: StandbyGroup{Sessions: 20, Dark: Dist{N: 20, P50: 9900, P99: 10400, Max: 10400}, DeadToFirst: Dist{N: 20, P50: 12, P99: 30, Max: 30},
			Repeated: 1000, RepeatedMax: 55, ConnsAtKill: 40, Delivered: 4000},
		Control: StandbyGroup{Sessions: 20, Dark: Dist{N: 20, P50: 10500, P99: 11000, Max: 11000}, DeadToFirst: Dist{N: 20, P50: 400, P99: 700, Max: 700},
			Lost: 1040, LostMax: 55, ConnsAtKill: 20, Delivered: 3000},
		Cost: StandbyCost{WindowSeconds: 36, Held: 20, Wanted: 20, StandbyHours: 0.2, WindowBytes: 20 * 6000, RSSDeltaBytes: 20 * 40 << 10,
			Steady: map[string]Usage{dynamostore.OpGet: {Reads: 24, ReadUnits: 24}},
			Round:  map[string]Usage{dynamostore.OpAssignStandby: {Writes: 40, WriteUnits: 40}, dynamostore.OpDropStandby: {Writes: 40, WriteUnits: 40}}},
	}
}

func TestStandbyGoals(t *testing.T) {
	rep := sampleReport()
	rep.Failover.Standby = sampleStandby()
	var got []Goal
	for _, g := range Goals(rep) {
		if strings.HasPrefix(g.Figure, "Hot standby") {
			got = append(got, g)
		}
	}
	if len(got) != 3 || !got[0].Met || !got[1].Met || !got[2].Met || got[0].Measured != "0 (1040)" || got[1].Measured != ms(30) || got[2].Measured != "0" {
		t.Fatalf("goals: %+v", got)
	}
	rep.Failover.Standby.Standby.Lost, rep.Failover.Standby.Standby.DeadToFirst.P99 = 3, 80
	rep.Failover.Standby.Cost.Steady[dynamostore.OpAssignStandby] = Usage{Writes: 1, WriteUnits: 1}
	rep.Failover.Standby.Cost.StandbyHours = 0.5
	got = got[:0]
	for _, g := range Goals(rep) {
		if strings.HasPrefix(g.Figure, "Hot standby") {
			got = append(got, g)
		}
	}
	if got[0].Met || got[0].Miss != "3 lost" || got[1].Met || got[1].Miss != "+"+ms(30) || got[2].Met || got[2].Measured != "2" {
		t.Fatalf("missed goals: %+v", got)
	}
	rep.Failover.Standby = nil
	for _, g := range Goals(rep) {
		if strings.HasPrefix(g.Figure, "Hot standby") {
			t.Fatalf("no standby run, goal %q", g.Figure)
		}
	}
}

func TestRenderStandby(t *testing.T) {
	rep := sampleReport()
	rep.Failover.Standby = sampleStandby()
	md := Render(rep)
	for _, want := range []string{
		"### Hot standby beside the dial takeover (sources that cannot replay)",
		"| declared dead → first message, p50 / p99 / max | " + distCell(rep.Failover.DeadToFirst) + " | " + ms(12) + " / " + ms(30) + " / " + ms(30) + " | ",
		"| messages lost (all sessions / most in one) | 0 | 0 / 0 | 1040 / 55 |",
		"| connections per session at the feed at the kill | 1 | 2.00 | 1.00 |",
		"In short: dial (no standby): 52.0 lost per session (TTL × rate = 50); standby: 0 lost, 1000 repeated (50.0 per session; 20 of 20 takeovers on the standby's connection, no dial).",
		"| window held (the holders' standby_window_bytes) | 6,000 B per standby |",
		"| holder's RSS, window end − start before any standby | 40 KiB per standby |",
		"| DynamoDB read units of the backstop re-read (the holders' consistent gets, every 30 s) | 120 per session-hour |",
		"| one-off writes over the rounds: assign_standby / drop_standby (requests, write units) | 40, 40 / 40, 40 |",
		"Hot standby: owner declared dead → first message at the sink, p99",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if i, j := strings.Index(md, "## 2. Crash failover"), strings.Index(md, "### Hot standby"); i < 0 || j < i {
		t.Errorf("the standby part is not in the failover section")
	}
	model := *rep.Failover
	model.Standby = sampleStandby()
	model.Standby.Standby.Lost = 7
	rep.OnModel = &ModelResults{Profile: "aws", Failover: &model}
	md = Render(rep)
	for _, want := range []string{
		"| messages lost / repeated | 0 / 1000 | 1040 / 0 | 7 / 1000 | 1040 / 0 |",
		"| Hot standby, source without replay: messages lost by standby sessions at a kill -9 of the owner (the control group without standby in brackets) | 0 (1040) | 7 (1040) | 0 | **no** | 7 lost |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the model section lacks %q", want)
		}
	}
	rep.Failover.Standby, rep.OnModel = nil, nil
	if strings.Contains(Render(rep), "### Hot standby") {
		t.Error("no standby run, yet a standby part")
	}
}

// The first "lease acquired" line after the kill per session of the run,
// with whether it took the standby's connection.
func TestAcquiredAfter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	log := `{"level":"info","connection_id":"sb-r1-0000","lease_epoch":1,"standby":false,"time":"2026-12-04T20:17:01.000Z","message":"lease acquired"}
{"level":"info","connection_id":"sb-r1-0000","lease_epoch":2,"standby":true,"time":"2026-12-04T20:17:26.959Z","message":"lease acquired"}
{"level":"info","connection_id":"sb-r1-0001","lease_epoch":2,"standby":false,"time":"2026-12-04T20:17:27.054Z","message":"lease acquired"}
{"level":"info","connection_id":"sb-r1-0001","lease_epoch":3,"standby":false,"time":"2026-12-04T20:17:29.000Z","message":"lease acquired"}
{"level":"info","connection_id":"fo-r1-0001","lease_epoch":2,"time":"2026-12-04T20:17:27.000Z","message":"lease acquired"}
{"level":"info","connection_id":"sb-r1-0002","time":"2026-12-04T20:17:27.000Z","message":"lease released"}
not json "lease acquired"
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	kill := time.Date(2026, 12, 4, 20, 17, 16, 0, time.UTC)
	got, err := acquiredAfter(path, map[string]bool{"sb-r1-0000": true, "sb-r1-0001": true, "sb-r1-0002": true}, kill)
	if err != nil {
		t.Fatal(err)
	}
	a, b := got["sb-r1-0000"], got["sb-r1-0001"]
	if len(got) != 2 || !a.Standby || a.At.Sub(kill) != 10959*time.Millisecond || b.Standby || b.At.Sub(kill) != 11054*time.Millisecond {
		t.Fatalf("%+v", got)
	}
}
