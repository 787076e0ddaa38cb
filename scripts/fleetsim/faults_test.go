//go:build fleetsim

package fleetsim

import (
	"context"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// The fault scenarios' size here: small enough to run in seconds, big
// enough for every worker to hold sessions.
const (
	faultWorkers  = 6
	faultSessions = 60
	faultFor      = 3 * time.Minute
)

// DynamoDB unreachable for 60 s for every worker: no worker delivers from
// the TTL after the outage began until it ends (each stopped on its own,
// its leases untrusted), and every STARTED session delivers again within
// the bound of the outage's end; no double owner, no loss.
func TestDDBDownSelfFencesAndRecovers(t *testing.T) {
	f := runT(t, Scenarios(faultWorkers, faultSessions, faultFor)["ddb-down"], 1, nil)
	checkSafe(t, f)
	r := faultOf(t, f, kindDDBDown)
	if r.Sessions != faultSessions || r.Unfenced != 0 {
		t.Errorf("ddb-down: %d sessions judged (want %d), %d deliveries while every lease was untrusted", r.Sessions, faultSessions, r.Unfenced)
	}
	if f.LongestSilence < 50 {
		t.Errorf("ddb-down: the longest silence is %.1fs: the workers did not stop in a 60 s outage", f.LongestSilence)
	}
}

// The quiet span's check is not vacuous: with one worker still reaching the
// table (as if it had not self-fenced), the judge counts its deliveries.
func TestDDBDownQuietSpanCatchesAWorkerStillDelivering(t *testing.T) {
	sc := Scenarios(faultWorkers, faultSessions, faultFor)["ddb-down"]
	sc.Faults = []Step{{At: faultAt(faultFor, sc.Ramp), Do: ddbDown(time.Minute, 1)}}
	f := runT(t, sc, 1, nil)
	if r := faultOf(t, f, kindDDBDown); r.Unfenced == 0 {
		t.Fatalf("a worker delivered through the outage, yet the judge counted no delivery in the quiet span: %+v", r)
	}
	if v := f.Verdict(recoveryBound); v == "ok" {
		t.Fatalf("verdict %q with deliveries in the quiet span", v)
	}
}

// Every session of a burst (all started within one minute) delivers, and
// the judge reports the time from each one's start write to its first
// delivery.
func TestBurstStartFirstDelivery(t *testing.T) {
	f := runT(t, Scenarios(faultWorkers, faultSessions, faultFor)["burst-start"], 1, nil)
	checkSafe(t, f)
	fd := f.FirstDelivery
	if fd.N != faultSessions || fd.P50 <= 0 || fd.P50 > fd.P99 || fd.P99 > fd.Max || fd.Max > recoveryBound.Seconds() {
		t.Fatalf("first delivery %+v: want all %d sessions, 0 < p50 <= p99 <= max <= %s", fd, faultSessions, recoveryBound)
	}
}

// The crash of a worker holding every session: every one delivers again.
func TestCrashBigRecovers(t *testing.T) {
	f := runT(t, Scenarios(faultWorkers, faultSessions, faultFor)["crash-big"], 1, nil)
	checkSafe(t, f)
	if r := faultOf(t, f, "kill"); r.Sessions != faultSessions {
		t.Fatalf("the busiest worker held %d of %d sessions when it died", r.Sessions, faultSessions)
	}
}

// A source host refusing beyond a per-IP connection rate (HTTP 429): each
// worker dials from its own address and the source counts per address.
// Here the limit is 8 attempts a window, below a worker's share of the
// sessions (10), as Binance's 300 is below the share of a worker holding
// thousands on one exchange host. Without WSFLEET_DIAL_LIMITS (docs/worker.md): the
// worker retries a refused dial on its usual back-off (≤ ReconnectMax, 30
// s) per session, so once a worker has more sessions to dial on one host
// than the limit allows, their retries keep its address over the limit:
// those sessions stay dark, owned by a live worker, until the dial
// failures make them FAILED. The test checks that the simulator shows it
// (the refusals counted, the judge reporting the sessions not delivering)
// and that safety holds; the test below shows the lockout gone with the
// limit configured.
func TestSourceLimitLocksOutAWorkerOverTheLimit(t *testing.T) {
	sc := Scenarios(faultWorkers, faultSessions, faultFor)["source-limit"]
	sc.Fleet = func(c *Config) { c.ConnLimit = feed.ConnLimit{Max: 8, Per: 5 * time.Minute} }
	f := runT(t, sc, 1, nil)
	if f.SourceRefused == 0 {
		t.Fatalf("no dial refused at a limit of 8 per 5 min per worker: %+v", f)
	}
	if f.DoubleOwners != 0 || f.Fenced+f.Gaps != 0 || f.SourceOverlaps != 0 {
		t.Errorf("source-limit: safety: %s", f.Verdict(recoveryBound))
	}
	dark := f.Silent
	for _, r := range f.Faults {
		dark += r.Sessions - r.Recovered
	}
	if dark == 0 {
		t.Fatalf("every session delivered again after %d refusals: the lockout (docs/worker.md) is gone; assert recovery here now", f.SourceRefused)
	}
	t.Logf("refused %d dials; %d sessions never delivered, %d of the dead worker's not again: %s", f.SourceRefused, f.Silent, dark-f.Silent, f.Verdict(recoveryBound))
}

// A worker dies while by_owner lags beyond IndexLagBound (by_worker_list
// does not): its record moves to DONE before the index shows the session
// it acquired last (checked in the table just before the index shows it),
// and the sweep of DONE records finds that session within the bound the
// README states (the lag plus DoneSweepEvery); it is never left owned by
// the dead worker.
func TestLagSweepFindsTheHiddenSession(t *testing.T) {
	sc := Scenarios(faultWorkers, faultSessions, faultFor)["lag-sweep"]
	var doneFirst bool
	var probed string
	probe := Step{At: faultAt(faultFor, sc.Ramp) + lagSweepLag - 5*time.Second, Do: func(fl *Fleet) error {
		ss := fl.Sessions()
		id := ss[len(ss)-1]
		it, err := fl.Table.Mem().Get(context.Background(), id)
		if err != nil {
			return err
		}
		rec, err := fl.Table.Mem().GetWorker(context.Background(), it.Owner)
		if err != nil {
			return err
		}
		probed = it.Owner + " " + rec.List
		doneFirst = rec.List == schema.WorkerListDone
		return nil
	}}
	sc.Faults = append(sc.Faults, probe)
	f := runT(t, sc, 1, nil)
	checkSafe(t, f)
	if !doneFirst {
		t.Errorf("before by_owner showed the last session, its owner and record were %q: want the dead worker, DONE (the sweep not exercised)", probed)
	}
	r := faultOf(t, f, kindLagSweep)
	if r.Sessions != 1 || r.Recovered != 1 || r.Max > lagSweepBound().Seconds() || r.Max < lagSweepLag.Seconds() {
		t.Fatalf("lag-sweep: %+v: want the session delivering again after the lag %s, within %s", r, lagSweepLag, lagSweepBound())
	}
}

// The judge's quiet span and a fault's own bound, on a hand-made record.
func TestJudgeQuietSpanAndOwnBound(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	r := newRecord()
	r.quietSpan(at(10), at(70))
	msg := sink.Message{ConnectionID: "a", WorkerID: "w1", LeaseEpoch: 1}
	for i, s := range []int{1, 15} {
		msg.Seq = int64(i)
		r.handleAt(msg, at(s))
	}
	r.fault(Fault{Kind: kindDDBDown, At: at(70), Quiet: at(10), Sessions: []string{"a"}})
	r.fault(Fault{Kind: kindLagSweep, At: at(70), Sessions: []string{"a"}, Bound: 100 * time.Second})
	msg.Seq = 2
	r.handleAt(msg, at(75))
	if got := r.faults[0].recovery(t0); got.Unfenced != 1 || got.Recovered != 1 || got.Max != 5 {
		t.Fatalf("recovery %+v: want 1 delivery in the quiet span, recovered after 5 s", got)
	}
	f := Figures{Faults: []Recovery{r.faults[1].recovery(t0)}}
	if v := f.Verdict(time.Second); v != "ok" {
		t.Fatalf("verdict %q: the fault's own bound (100 s) not used", v)
	}
}

// faultOf is f's first judged fault of kind.
func faultOf(t *testing.T, f Figures, kind string) Recovery {
	t.Helper()
	for _, r := range f.Faults {
		if r.Kind == kind {
			return r
		}
	}
	t.Fatalf("%s: no %s fault judged: %+v", f.Scenario, kind, f.Faults)
	return Recovery{}
}

// The lockout above is gone once the workers know the source's limit
// (WSFLEET_DIAL_LIMITS): no dial is refused, and every session, the dead
// worker's among them, delivers again, the ones over a worker's window
// after waiting their turn (within a window: the run lasts long enough for
// the survivors' second window).
func TestSourceLimitPacedByTheWorkersNeverRefused(t *testing.T) {
	sc := Scenarios(faultWorkers, faultSessions, faultFor)["source-limit-paced"]
	lim := feed.ConnLimit{Max: 8, Per: 5 * time.Minute}
	sc.Fleet = func(c *Config) { c.ConnLimit = lim; c.Worker = dialLimited(lim) }
	sc.Duration = 4 * lim.Per
	f := runT(t, sc, 1, nil)
	// A session over its new owner's window waits for it: at most a window
	// more than a takeover's bound.
	checkSafeWithin(t, f, lim.Per+recoveryBound)
	if f.SourceRefused != 0 {
		t.Fatalf("%d dials refused with the workers paced to the source's limit", f.SourceRefused)
	}
	if f.Silent != 0 {
		t.Fatalf("%d sessions never delivered: %s", f.Silent, f.Verdict(recoveryBound))
	}
	r := faultOf(t, f, "kill")
	if r.Recovered != r.Sessions || r.Sessions == 0 {
		t.Fatalf("the dead worker's sessions: %d of %d delivering again", r.Recovered, r.Sessions)
	}
	t.Logf("the dead worker's %d sessions delivering again: p50 %.1f s, max %.1f s", r.Sessions, r.P50, r.Max)
}
