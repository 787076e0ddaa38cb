package streamer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/pipenet"
)

// hbStore counts the heartbeats a worker sends (and can be severed,
// as a kill -9).
type hbStore struct {
	*severableStore
	heartbeats atomic.Int64
}

func (s *hbStore) Heartbeat(ctx context.Context, id string, epoch int64, hb lease.Heartbeat) (lease.WorkerRecord, error) {
	s.heartbeats.Add(1)
	return s.severableStore.Heartbeat(ctx, id, epoch, hb)
}

// noSource is a session transport with no source behind it: every dial
// fails at once, transiently, without I/O (the session retries with its
// back-off, on the bubble's time).
type noSource struct{}

func (noSource) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no source in the bubble")
}

// TestControlPlaneRunsInVirtualTime runs two real workers (New, Run: the
// Keeper, liveness, watch, claim and reconcile, the pacer, the control,
// metrics and rebalance loops, the takeover, the shutdown) on one memory
// store in a testing/synctest bubble, where time advances only when every
// goroutine waits: ten minutes of the fleet's life take a fraction of a
// second in real time. Each worker's clock is skewed (clock.Offset over the
// bubble's): the rules measure durations only. The workers have no admin listener and their sessions no
// source (every dial fails at once and is retried: the data plane is not
// under test), so nothing blocks on real I/O.
func TestControlPlaneRunsInVirtualTime(t *testing.T) {
	const sessions = 20
	real0 := time.Now() // outside the bubble: real time
	var virtual time.Duration
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now() // the bubble's clock
		st := memstore.New()
		for i := range sessions {
			id := fmt.Sprintf("v-%03d", i)
			st.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
				Spec: spectest.Stored(t, spec.Spec{WSURL: "ws://source.test/feed/" + id})})
		}
		type running struct {
			w      *Worker
			store  *hbStore
			skew   time.Duration
			cancel context.CancelFunc
			done   chan error
			err    error
			ended  bool
		}
		stop := func(r *running) error {
			r.cancel()
			if !r.ended {
				r.err, r.ended = <-r.done, true
			}
			return r.err
		}
		var all []*running
		// Every goroutine of the bubble must end before it does, a failed
		// test's too.
		defer func() {
			for _, r := range all {
				_ = stop(r)
			}
		}()
		start := func(id string, skew time.Duration, maxSessions int) *running {
			cfg := DefaultConfig()
			cfg.WorkerID = id
			if maxSessions > 0 {
				cfg.MaxSessions = maxSessions
			}
			cfg.AdminAddr = "" // no listener: nothing in the bubble waits on a socket
			cfg.MaxDialFailures = 0
			log := logging.New(io.Discard, schema.ServiceStreamer, "info")
			r := &running{store: &hbStore{severableStore: &severableStore{Store: st}}, skew: skew, done: make(chan error, 1)}
			all = append(all, r)
			// Each worker on its own clock: the bubble's, offset by skew
			// (as a simulator gives its workers skewed clocks).
			clk := clock.Offset{Base: clock.Real{}, Skew: skew}
			w, err := New(cfg, Deps{Store: r.store, Handler: &recSink{by: map[string][]delivery{}}, Logger: &log, Metrics: io.Discard, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			w.env.Client = &http.Client{Transport: noSource{}}
			r.w = w
			ctx, cancel := context.WithCancel(context.Background())
			r.cancel = cancel
			go func() { r.done <- w.Run(ctx) }()
			return r
		}
		owners := func() map[string]int {
			out := map[string]int{}
			for i := range sessions {
				it, err := st.Get(context.Background(), fmt.Sprintf("v-%03d", i))
				if err != nil {
					t.Fatal(err)
				}
				out[it.Owner]++
			}
			return out
		}
		// b holds at most half the sessions, and a the rest: whichever
		// claims first, b has sessions to lose when it dies (with no cap
		// a could claim all twenty first: nothing would be taken over).
		b := start("vb", 2*time.Second, sessions/2)
		a := start("va", -1500*time.Millisecond, 0)

		// A minute in: every session claimed, each by one worker, which
		// runs it (the table and the workers agree).
		time.Sleep(time.Minute)
		own := owners()
		if own["va"]+own["vb"] != sessions || own["vb"] == 0 || a.w.owned() != own["va"] || b.w.owned() != own["vb"] {
			t.Fatalf("after a minute: table owners %v, a runs %d, b runs %d", own, a.w.owned(), b.w.owned())
		}
		t.Logf("after a minute: a owns %d, b owns %d", own["va"], own["vb"])

		// b dies (kill -9: no release, no LEFT). a declares it dead once its
		// heartbeat stood still for a TTL, and takes its sessions over, not
		// before b's own trust deadline (its last heartbeat's send + TTL −
		// margin, on b's clock: b stopped acting as owner by then).
		var bs []string
		for i := range sessions {
			if id := fmt.Sprintf("v-%03d", i); b.w.keeper.Holds(id) {
				bs = append(bs, id)
			}
		}
		fence := b.w.keeper.TrustedUntil().Add(-b.skew) // on the bubble's clock
		crashed := time.Now()
		crash(b.w, b.store.severableStore, b.cancel, b.done)
		b.ended = true
		ttl := DefaultConfig().LeaseTTL
		var firstTaken time.Time
		for owners()["va"] != sessions {
			if time.Since(crashed) > 3*ttl {
				t.Fatalf("%s after b died, owners %v", time.Since(crashed), owners())
			}
			if firstTaken.IsZero() && slices.ContainsFunc(bs, a.w.keeper.Holds) {
				firstTaken = time.Now()
			}
			time.Sleep(100 * time.Millisecond)
		}
		if firstTaken.IsZero() {
			firstTaken = time.Now()
		}
		recs, err := st.GetWorkers(context.Background(), []string{"vb"})
		if err != nil || len(recs) != 1 || recs[0].State != schema.WorkerDead {
			t.Fatalf("b's record %+v, %v: want DEAD", recs, err)
		}
		if firstTaken.Before(fence) {
			t.Fatalf("a took a session of b %s before b's trust deadline", fence.Sub(firstTaken))
		}
		t.Logf("b's %d sessions taken over %s after it died (TTL %s), %s after its trust deadline",
			len(bs), firstTaken.Sub(crashed).Round(100*time.Millisecond), ttl, firstTaken.Sub(fence).Round(100*time.Millisecond))

		// Ten minutes in all: a heartbeated about once a second all along.
		time.Sleep(10*time.Minute - time.Since(t0))
		virtual = time.Since(t0)
		t.Logf("a sent %d heartbeats in %s", a.store.heartbeats.Load(), virtual)
		if n := a.store.heartbeats.Load(); n < 590 || n > 610 {
			t.Errorf("a sent %d heartbeats in %s, want about 600 (one a second)", n, virtual)
		}
		if got := a.w.owned(); got != sessions {
			t.Errorf("a runs %d sessions, want %d", got, sessions)
		}
		if err := stop(a); err != nil {
			t.Errorf("a's Run: %v", err)
		}
		if own := owners(); own[""] != sessions {
			t.Errorf("after a's shutdown, owners %v: want every session released", own)
		}
	})
	t.Logf("%s of virtual time in %s of real time", virtual.Round(time.Second), time.Since(real0).Round(time.Millisecond))
}

// TestSessionsStreamInVirtualTime runs a real worker's sessions too in a
// synctest bubble: the test feed (testkit/feed) serves them over in-memory
// pipes (pipenet.Net) instead of sockets, so the data plane (dial, handshake,
// read, deliver, checkpoint, close) runs on the bubble's time as the
// control plane does. Ten virtual minutes of streaming take about a second.
func TestSessionsStreamInVirtualTime(t *testing.T) {
	const sessions, rate = 5, 2.0 // messages/s per session
	real0 := time.Now()
	var virtual time.Duration
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		f, pn, stopFeed := pipeFeed(t, rate)
		defer stopFeed()
		st := memstore.New()
		ids := putFeedSessions(t, st, sessions)
		cfg := DefaultConfig()
		cfg.WorkerID = "vs"
		cfg.AdminAddr = ""
		log := logging.New(io.Discard, schema.ServiceStreamer, "info")
		rec := &recSink{by: map[string][]delivery{}}
		w, err := New(cfg, Deps{Store: st, Handler: rec, Logger: &log, Metrics: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		w.env.Client = &http.Client{Transport: &http.Transport{DialContext: pn.DialContext, DisableKeepAlives: true}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		stopped := false
		defer func() {
			if !stopped {
				cancel()
				<-done
			}
		}()

		time.Sleep(10 * time.Minute)
		virtual = time.Since(t0)
		want := rate * virtual.Seconds()
		for _, id := range ids {
			ds := rec.get(id)
			if n := float64(len(ds)); n < 0.95*want || n > want+1 {
				t.Errorf("%s: %d messages delivered in %s, want about %.0f", id, len(ds), virtual, want)
			}
			for i := 1; i < len(ds); i++ {
				if ds[i].seq != ds[i-1].seq+1 {
					t.Fatalf("%s: seq %d after %d", id, ds[i].seq, ds[i-1].seq)
				}
			}
			it, err := st.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			// Checkpointed at least every CheckpointEvery.
			if last := ds[len(ds)-1].seq; it.Owner != "vs" || it.LastSeq < last-int64(rate*(cfg.CheckpointEvery.Seconds()+1)) {
				t.Errorf("%s: table owner %q last_seq %d, delivered up to %d", id, it.Owner, it.LastSeq, last)
			}
		}
		cancel()
		stopped = true
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		for _, id := range ids {
			it, err := st.Get(context.Background(), id)
			ds := rec.get(id)
			if err != nil || it.Owner != "" || it.LastSeq != ds[len(ds)-1].seq {
				t.Errorf("%s after the shutdown: owner %q last_seq %d (%v), delivered up to %d", id, it.Owner, it.LastSeq, err, ds[len(ds)-1].seq)
			}
		}
		if ov := f.Stats().Overlaps; len(ov) > 0 {
			t.Errorf("two connections of a session open at once: %+v", ov)
		}
		t.Logf("%d sessions, %d messages each", sessions, rec.count(ids[0]))
	})
	t.Logf("%s of virtual time in %s of real time", virtual.Round(time.Second), time.Since(real0).Round(time.Millisecond))
}

// tick keeps a ticker's cadence on a clock.Clock: a tick taken late does
// not shift the next, and the ticks missed meanwhile are skipped.
func TestTickKeepsItsCadence(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	tk := newTick(f, time.Second)
	defer tk.Stop()
	f.Advance(time.Second)
	<-tk.C()
	f.Advance(300 * time.Millisecond) // the pass took 300 ms
	tk.next()
	f.Advance(699 * time.Millisecond)
	select {
	case <-tk.C():
		t.Fatal("fired before the next tick of the cadence")
	default:
	}
	f.Advance(time.Millisecond)
	if at := <-tk.C(); !at.Equal(time.Unix(2, 0)) {
		t.Fatalf("tick at %v, want 2 s", at)
	}
	f.Advance(2500 * time.Millisecond) // 2.5 s late: ticks 3 and 4 are skipped
	tk.next()
	f.Advance(499 * time.Millisecond)
	select {
	case <-tk.C():
		t.Fatal("a skipped tick fired")
	default:
	}
	f.Advance(time.Millisecond)
	if at := <-tk.C(); !at.Equal(time.Unix(5, 0)) {
		t.Fatalf("tick at %v, want 5 s", at)
	}
}

// pipeFeed serves the test feed (testkit/feed, rate messages a second per
// session) over in-memory pipes, for a testing/synctest bubble: dial it
// through pn; stop ends it (the bubble waits for its goroutines).
func pipeFeed(t *testing.T, rate float64) (f *feed.Server, pn *pipenet.Net, stop func()) {
	t.Helper()
	f, err := feed.New(feed.Config{Rate: rate, Mode: feed.ModeAllow})
	if err != nil {
		t.Fatal(err)
	}
	pn = pipenet.New()
	srv := &http.Server{Handler: f.Handler()}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(pn) }()
	return f, pn, func() {
		f.Close()
		_ = srv.Close()
		<-served
	}
}

// putFeedSessions writes n STARTED sessions (s-000, s-001, ...) streaming
// from the test feed, resumable (from=), as ingest writes them.
func putFeedSessions(t *testing.T, st *memstore.Store, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("s-%03d", i)
		ids = append(ids, id)
		st.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
			Spec: spectest.Stored(t, spec.Spec{WSURL: "ws://feed.test" + feed.PathPrefix + id, Resume: &spec.Resume{QueryParam: "from"}})})
	}
	return ids
}
