package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/scripts/chaos"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

func TestClaimLatencies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	log := `{"level":"info","message":"worker started"}
{"Acquired":3,"ClaimLatencyMs":[20,50.5,7],"Service":"streamer"}
{"Acquired":1,"ClaimLatencyMs":12,"Service":"streamer"}
{"Acquired":0,"Service":"streamer"}
not json "ClaimLatencyMs"
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := claimLatencies(path)
	if err != nil || len(got) != 4 || got[1] != 50.5 || got[3] != 12 {
		t.Fatalf("%v %v", got, err)
	}
}

func TestHandoffSteps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	log := `{"level":"info","message":"lease released","release_ms":12.5,"publish_ms":1.25,"handed_off":true}
{"level":"info","message":"lease released","release_ms":3}
{"level":"warn","message":"hand-off notification (reconciliation will find the released lease)","handed_off":true}
{"level":"info","message":"lease released","release_ms":80,"publish_ms":2,"handed_off":true}
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	rel, pub, err := handoffSteps(path)
	if err != nil || len(rel) != 2 || rel[0] != 12.5 || rel[1] != 80 || len(pub) != 2 || pub[0] != 1.25 {
		t.Fatalf("release %v publish %v %v", rel, pub, err)
	}
}

// The handover figures come from the chaos checks: raw repeats across the
// signal, the most in one change, losses, stale epochs and connections open
// at once.
func TestJudgeHandover(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	at := func(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// deliver: seqs lo..hi of s1 by worker/epoch, 200 ms apart from startMs.
	deliver := func(worker string, epoch, lo, hi, startMs int64) []chaos.Delivery {
		var out []chaos.Delivery
		for q := lo; q <= hi; q++ {
			a := at(startMs + (q-lo)*200)
			out = append(out, chaos.Delivery{Session: "s1", Seq: q, Epoch: epoch, Worker: worker, ReceivedAtMs: a.UnixMilli(), AtNs: a.UnixNano()})
		}
		return out
	}
	conn := func(id int64, openMs, closeMs, first, last int64) feed.ConnRecord {
		return feed.ConnRecord{ID: id, Session: "s1", OpenedAt: at(openMs), ClosedAt: at(closeMs), FirstSeq: first, LastSeq: last, Sent: last - first + 1, Reason: feed.ReasonClient}
	}
	// The replay bound: rate × (checkpoint 60 s × 1.1 + 1 s) + 1 = 5 × 67 + 1.
	// w1 (epoch 1) delivers 1..10 and is signalled at 2100 ms; w2 (epoch 2)
	// resumes from the checkpoint 8 at fromMs: 8..10 are repeated.
	ev := func(fromMs int64) chaos.Evidence {
		return chaos.Evidence{
			Start: t0, End: at(9000),
			Deliveries: append(deliver("w1", 1, 1, 10, 0), deliver("w2", 2, 8, 20, fromMs)...),
			Conns:      []feed.ConnRecord{conn(1, 0, 2100, 1, 11), conn(2, fromMs-100, 8000, 8, 21)},
		}
	}
	rounds := []roundData{{victim: "w1", at: at(2100)}}
	crash := &HandoverResult{Kind: kindKill, FeedRate: 5}
	judgeHandover(crash, ev(4100), rounds, nil)
	if crash.Lost != 0 || crash.Duplicated != 3 || crash.DuplicatedMax != 3 || crash.ReplayBound != 336 || crash.MaxConcurrent != 1 || crash.Stale != 0 || len(crash.Violations) != 0 {
		t.Fatalf("kill -9: %+v", crash)
	}

	// The same after a SIGTERM: the repeats are violations. Also a seq
	// lost, a stale delivery (w1 delivers 11 after w2 delivered 8..10,
	// and w2 repeats it) and two connections at once.
	e := ev(3000)
	e.Conns[1].OpenedAt = at(1900)
	var kept []chaos.Delivery
	for _, d := range e.Deliveries {
		if d.Seq != 15 {
			kept = append(kept, d)
		}
	}
	e.Deliveries = append(kept, deliver("w1", 1, 11, 11, 3500)...)
	term := &HandoverResult{Kind: kindTerm, FeedRate: 5}
	judgeHandover(term, e, rounds, nil)
	if term.Lost != 1 || term.Duplicated != 4 || term.DuplicatedMax != 0 || term.MaxConcurrent != 2 || term.Stale != 1 {
		t.Fatalf("sigterm: %+v", term)
	}
	all := strings.Join(term.Violations, "\n")
	for _, check := range []string{chaos.CheckRepeats, chaos.CheckNoLoss, chaos.CheckFencing, chaos.CheckOneConn} {
		if !strings.Contains(all, "["+check+"]") {
			t.Errorf("no %s violation in:\n%s", check, all)
		}
	}
}

// A crash round's gap splits at the victim's declared death (its record's
// ended_at_ms): kill → dead once per round, dead → first message per
// session moved.
func TestTakeoverSplit(t *testing.T) {
	kill := time.UnixMilli(1_700_000_000_000)
	rd := roundData{at: kill, moved: map[string]sinkObs{
		"a": {At: kill.Add(10_200 * time.Millisecond)},
		"b": {At: kill.Add(10_500 * time.Millisecond)},
	}}
	if a, b := rd.takeover(); a != nil || b != nil {
		t.Fatalf("no death recorded: want nothing, got %v %v", a, b)
	}
	rd.deadAtMs = kill.Add(9_900 * time.Millisecond).UnixMilli()
	toDead, toFirst := rd.takeover()
	if len(toDead) != 1 || toDead[0] != 9_900*time.Millisecond {
		t.Fatalf("kill → dead: %v", toDead)
	}
	got := Summarize(toFirst)
	if got.N != 2 || got.Min != 300 || got.Max != 600 {
		t.Fatalf("dead → first: %+v", got)
	}
}
