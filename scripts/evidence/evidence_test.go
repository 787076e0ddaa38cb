package evidence_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/scripts/evidence"
	"github.com/wsfleet/wsfleet/scripts/feed"
)

var t0 = time.UnixMilli(1_700_000_000_000)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func conn(session string, open, closeMs, first, last int64, reason string) feed.ConnRecord {
	c := feed.ConnRecord{Session: session, OpenedAt: at(open), FirstSeq: first, LastSeq: last, Sent: last - first + 1, Reason: reason}
	if closeMs >= 0 {
		c.ClosedAt = at(closeMs)
	}
	return c
}

// deliver records seqs lo..hi of session by worker/epoch, 200 ms apart from startMs.
func deliver(session, worker string, epoch, lo, hi, startMs int64) []devstack.SinkRecord {
	var out []devstack.SinkRecord
	for s := lo; s <= hi; s++ {
		out = append(out, devstack.SinkRecord{ConnectionID: session, Seq: s, LeaseEpoch: epoch, WorkerID: worker, ReceivedAtMs: at(startMs + (s-lo)*200).UnixMilli()})
	}
	return out
}

func TestCleanCrashAndHandoff(t *testing.T) {
	// s1: w1 (epoch 1) delivers 1..10, is killed at 2100 ms; w2 (epoch 2)
	// resumes from the checkpoint 8 and delivers 8..20 (8..10 replayed); w2
	// is SIGTERMed at 6550 ms; w3 resumes at 21 and delivers 21..25.
	conns := []feed.ConnRecord{
		conn("s1", 0, 2100, 1, 11, feed.ReasonClient),
		conn("s1", 4000, 6550, 8, 20, feed.ReasonClient),
		conn("s1", 6560, 8000, 21, 26, feed.ReasonClient),
	}
	var sinks []devstack.SinkRecord
	sinks = append(sinks, deliver("s1", "w1", 1, 1, 10, 0)...)
	sinks = append(sinks, deliver("s1", "w2", 2, 8, 20, 4100)...)
	sinks = append(sinks, deliver("s1", "w3", 3, 21, 25, 6600)...)
	faults := []evidence.Fault{
		{Kind: evidence.FaultKill, Worker: "w1", At: at(2100)},
		{Kind: evidence.FaultTerm, Worker: "w2", At: at(6550)},
	}
	rep := evidence.Judge(evidence.Input{Conns: conns, Sinks: sinks, Faults: faults, Rate: 5, CheckpointEvery: time.Second})
	if len(rep.Violations) != 0 {
		t.Fatalf("violations: %v", rep.Violations)
	}
	if rep.Lost != 0 || rep.ReplayCrash != 3 || rep.ReplayHandoff != 0 || rep.MaxConcurrent != 1 || rep.Tail != 1 {
		t.Fatalf("report: %+v", rep)
	}
	if f := rep.Faults[0]; f.Affected != 1 || f.Recovered != 1 || f.Replayed != 3 || f.Recovery.Max != 2000 {
		t.Fatalf("crash: %+v", f)
	}
	if f := rep.Faults[1]; f.Affected != 1 || f.Recovered != 1 || f.Recovery.Max != 50 {
		t.Fatalf("handoff: %+v", f)
	}
}

func TestViolations(t *testing.T) {
	conns := []feed.ConnRecord{
		// Two connections at once (a kick), 500 ms overlap.
		conn("s1", 0, 1500, 1, 10, feed.ReasonKicked),
		conn("s1", 1000, 3000, 5, 15, feed.ReasonClient),
		// s2: seq 3 sent and never delivered; 8..9 never asked for.
		conn("s2", 0, 1000, 1, 5, feed.ReasonClient),
		conn("s2", 1000, 3000, 10, 12, feed.ReasonClient),
		// s3 stopped at 1000 but reconnected at 2000 and still open.
		conn("s3", 0, 900, 1, 4, feed.ReasonClient),
		conn("s3", 2000, -1, 5, 6, feed.ReasonOpen),
	}
	var sinks []devstack.SinkRecord
	sinks = append(sinks, deliver("s1", "w1", 1, 1, 6, 0)...)
	sinks = append(sinks, deliver("s1", "w2", 2, 5, 15, 1000)...) // 5..6 repeated after a handoff
	sinks = append(sinks, devstack.SinkRecord{ConnectionID: "s1", Seq: 16, LeaseEpoch: 1, WorkerID: "w1", ReceivedAtMs: at(9000).UnixMilli()})
	sinks = append(sinks, deliver("s2", "w1", 1, 1, 2, 0)...)
	sinks = append(sinks, deliver("s2", "w1", 1, 4, 5, 500)...)
	sinks = append(sinks, deliver("s2", "w1", 1, 10, 12, 1100)...)
	sinks = append(sinks, deliver("s3", "w1", 1, 1, 6, 0)...)
	faults := []evidence.Fault{{Kind: evidence.FaultTerm, Worker: "w1", At: at(900)}}
	rep := evidence.Judge(evidence.Input{
		Conns: conns, Sinks: sinks, Faults: faults, Rate: 5, CheckpointEvery: time.Second,
		Stopped: map[string]time.Time{"s3": at(1000)},
	})
	if rep.MaxConcurrent != 2 || len(rep.Overlaps) != 1 || rep.Overlaps[0].Dur != 500*time.Millisecond {
		t.Fatalf("overlaps: %d %+v", rep.MaxConcurrent, rep.Overlaps)
	}
	if rep.Lost != 1 || rep.Gaps != 4 || rep.ReplayHandoff != 2 || rep.Stale != 1 {
		t.Fatalf("lost %d gaps %d handoff %d stale %d", rep.Lost, rep.Gaps, rep.ReplayHandoff, rep.Stale)
	}
	if len(rep.Stops.Reopened) != 1 || len(rep.Stops.StillOn) != 1 {
		t.Fatalf("stops: %+v", rep.Stops)
	}
	all := strings.Join(rep.Violations, "\n")
	for _, want := range []string{"lost", "skipped", "graceful handoff", "connections of one session", "stale", "reconnected", "still connected"} {
		if !strings.Contains(all, want) {
			t.Errorf("no violation about %q in:\n%s", want, all)
		}
	}
}

func TestStatsOf(t *testing.T) {
	s := evidence.StatsOf([]float64{5, 1, 4, 2, 3})
	if s.N != 5 || s.P50 != 3 || s.Max != 5 || s.P99 != 5 {
		t.Fatalf("%+v", s)
	}
	if (evidence.StatsOf(nil) != evidence.Stats{}) {
		t.Fatal("empty stats")
	}
}
