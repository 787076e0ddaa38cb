package streamer

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// reservationBound is how long a directed hand-off keeps a session for its
// receiver (lease.Config.HandoffBound, which the workers do not change).
var reservationBound = lease.DefaultConfig("").HandoffBound

// A receiver whose hand-off gate answers the first POST /handoff with 429
// (over its rate, or its slots full) is told again: the session moves to it
// at once, not after the reservation lapses. Without the retry the sender
// falls back to a start notification, which the sender itself consumes
// here and drops (the session is reserved for another worker), as most
// workers of a fleet would: the failure of a clean-clone run of
// TestRebalanceNewWorkersTakeTheirShare (a move dark 5.13 s).
func TestHandoffRetriesTellingAReceiverThatAnswered429(t *testing.T) {
	e := newEnv(t)
	gate := newRefusingAdmin(t, 1, http.StatusTooManyRequests)
	b := e.moveToNewWorker(t, func(c *Config) { c.AdvertiseAddr = gate.addr }, func(b *testWorker) { gate.forwardTo(b.AdminAddr()) })
	testwait.Eventually(t, 4*reservationBound, "a hand-off refused with 429", func() bool { return gate.refusedID() != "" })
	e.movedPromptly(t, gate.refusedID(), b)
	if n := gate.requests.Load(); n < 2 {
		t.Fatalf("b was asked %d time(s), want its 429 followed by a retry", n)
	}
	// The giver's line says the offer was refused and times it apart from
	// the release's write.
	testwait.Eventually(t, 5*time.Second, "the giver's hand-off line with give_ms", func() bool {
		for _, l := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(l, gate.refusedID()) && strings.Contains(l, `"given":false`) && strings.Contains(l, `"give_ms":`) && strings.Contains(l, `"release_ms":`) {
				return true
			}
		}
		return false
	})
}

// A receiver whose store fails its first three acquires (a store timeout,
// a throttle) keeps claiming the session it was handed: until the
// reservation lapses nobody else may.
func TestHandoffClaimRetriesUntilTheReservationLapses(t *testing.T) {
	e := newEnv(t)
	flaky := &failingAcquires{}
	flaky.left.Store(3)
	e.failAcquiresOf("w2", flaky)
	b := e.moveToNewWorker(t, func(*Config) {}, func(*testWorker) {})
	testwait.Eventually(t, 4*reservationBound, "an acquire failed", func() bool { return flaky.firstID() != "" })
	e.movedPromptly(t, flaky.firstID(), b)
	if n := flaky.calls.Load(); n < 4 {
		t.Fatalf("b's store saw %d acquire(s), want 3 failed and 1 more", n)
	}
}

// A receiver whose trust lapsed for a moment (a late heartbeat: its claims
// answer "draining" while it still runs) keeps claiming the session it was
// handed once its trust is back. The lapse is injected as acquires that
// fail with lease.ErrUntrusted (the keeper's own fence answers the same).
func TestHandoffClaimRetriesThroughATrustLapse(t *testing.T) {
	e := newEnv(t)
	flaky := &failingAcquires{err: lease.ErrUntrusted}
	flaky.left.Store(2)
	e.failAcquiresOf("w2", flaky)
	b := e.moveToNewWorker(t, func(*Config) {}, func(*testWorker) {})
	testwait.Eventually(t, 4*reservationBound, "an acquire failed", func() bool { return flaky.firstID() != "" })
	e.movedPromptly(t, flaky.firstID(), b)
}

// moveToNewWorker starts worker a (w1) with 6 sessions, rebalancing every
// 500 ms one move at a time, then worker b (w2, built with mod, started
// with started) that consumes no work queue, reconciles once a minute and
// does not rebalance: a moves some of its sessions to b, and only the
// direct path (POST /handoff) can give b one before its reservation lapses
// (a takes a session it could not hand off back only once it lapsed).
func (e *env) moveToNewWorker(t *testing.T, mod func(*Config), started func(*testWorker)) *testWorker {
	t.Helper()
	e.feed = feed.StartForTest(t, feed.Config{Rate: 10, Mode: feed.ModeAllow}) // light: this machine is loaded
	e.worker(func(c *Config) { c.RebalanceEvery, c.MinHold, c.RebalanceMaxMoves = 500*time.Millisecond, 0, 1 })
	e.streaming(6, 3)
	e.queueless = true
	b := e.worker(func(c *Config) { c.ReconcileEvery, c.RebalanceEvery = time.Minute, 0; mod(c) })
	started(b)
	return b
}

// movedPromptly waits until b delivers session id, which was handed off
// to it, and checks that the source was dark less than the reservation
// bound across the hand-off (its connection closed with 1001). Without the
// fixes b never claims it (it reconciles once a minute): a's reconciler
// takes it back once its reservation lapsed. The deadline is long for this
// loaded machine, whose starved workers may fence themselves meanwhile.
func (e *env) movedPromptly(t *testing.T, id string, b *testWorker) {
	t.Helper()
	testwait.Eventually(t, 4*reservationBound, id+" delivering from "+b.ID(), func() bool {
		return len(byWorker(e.sink.get(id), b.ID())) >= 1
	})
	gap := e.handoffGap(id)
	switch lost := e.leasesLost(); {
	case gap < 0:
		t.Fatalf("%s was not handed off (no connection closed with 1001)\n%s", id, e.moveStory(id))
	case gap >= reservationBound && lost > 0:
		// A starved machine: a worker that missed its heartbeats fenced
		// itself (the crash path, not the hand-off's).
		t.Logf("%s dark %s after %d lease(s) lost to missed heartbeats: not judged", id, gap, lost)
	case gap >= reservationBound:
		t.Fatalf("%s dark %s across its hand-off (the reservation bound %s)\n%s", id, gap, reservationBound, e.moveStory(id))
	}
}

// handoffGap is the longest time session id's source had no connection
// after one closed with 1001 (a hand-off), -1 when none did.
func (e *env) handoffGap(id string) time.Duration {
	gap := time.Duration(-1)
	rs := e.feed.Records(id)
	for k := 1; k < len(rs); k++ {
		if rs[k-1].ClientCode == int(websocket.StatusGoingAway) {
			gap = max(gap, rs[k].OpenedAt.Sub(rs[k-1].ClosedAt))
		}
	}
	return gap
}

// A rebalancing move whose receiver answers 503 (full or draining) stays
// with its sender: the sender acquires the tenure it gave again at once
// (takeBack) and delivers on, with no gap and no repeat, and publishes no
// start notification. Before, the tenure was released for anyone with a
// start notification, and the session was dark until a worker took it:
// 2.2–2.7 s in chaos runs (the rebalance check's bound is 1 s), when the
// workers the notification ranks first were restarting. The receiver here
// refuses every hand-off; the sender's own queue is the only consumer of
// the notification it would have sent.
func TestRebalancingMoveRefusedWith503StaysWithItsSender(t *testing.T) {
	e := newEnv(t)
	starts := &countingQueue{WorkQueue: WorkQueue(e.queue)}
	e.workerQueue = starts
	gate := newRefusingAdmin(t, 1<<30, http.StatusServiceUnavailable)
	b := e.moveToNewWorker(t, func(c *Config) { c.AdvertiseAddr = gate.addr }, func(b *testWorker) { gate.forwardTo(b.AdminAddr()) })
	testwait.Eventually(t, 4*reservationBound, "a rebalancing move refused with 503", func() bool { return gate.refusedID() != "" })
	id := gate.refusedID()
	first := e.sink.get(id)[0]
	testwait.Eventually(t, 4*reservationBound, id+" delivered by its sender at a later epoch", func() bool {
		ds := e.sink.get(id)
		return ds[len(ds)-1].epoch > first.epoch
	})
	ds := e.sink.get(id)
	contiguous(t, ds) // no gap, no duplicate across the move taken back
	for _, d := range ds {
		if d.worker != first.worker {
			t.Fatalf("%s delivered by %s, want only its sender %s (the receiver refused every move)\n%s", id, d.worker, first.worker, e.moveStory(id))
		}
	}
	if n := starts.startsOf(id); n != 0 {
		t.Fatalf("%d start notification(s) of %s published: the refused move was released for anyone\n%s", n, id, e.moveStory(id))
	}
	if b.owns(id) {
		t.Fatalf("%s owned by the receiver that refused it", id)
	}
	if !strings.Contains(e.logs.String(), "rebalancing move: the receiver will not take it (taken back)") {
		t.Fatalf("no log line of the move taken back\n%s", e.moveStory(id))
	}
}

// countingQueue is a work queue that counts the start notifications
// published through it, by session.
type countingQueue struct {
	WorkQueue
	mu     sync.Mutex
	starts map[string]int
}

func (q *countingQueue) Publish(ctx context.Context, n notify.Notification) error {
	if n.Type == schema.NotifyStart {
		q.mu.Lock()
		if q.starts == nil {
			q.starts = map[string]int{}
		}
		q.starts[n.ConnectionID]++
		q.mu.Unlock()
	}
	return q.WorkQueue.Publish(ctx, n)
}

func (q *countingQueue) startsOf(id string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.starts[id]
}

// tellTransient retries what a retry may mend and nothing else: a 503 (the
// receiver is full or draining) is final.
func TestTellTransientRetriesOnlyWhatMayMend(t *testing.T) {
	ctx := context.Background()
	timeout := &url.Error{Op: "Post", URL: "http://x/handoff", Err: context.DeadlineExceeded}
	reset := &url.Error{Op: "Post", URL: "http://x/handoff", Err: syscall.ECONNRESET}
	refused := &url.Error{Op: "Post", URL: "http://x/handoff", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}
	for _, c := range []struct {
		name string
		err  error
		want bool
		// wontTake: receiverWontTake (no reservation for it)
		wontTake bool
	}{
		{"429", &tellStatusError{to: "w2", status: "429 Too Many Requests", code: 429}, true, false},
		{"500", &tellStatusError{to: "w2", status: "500 Internal Server Error", code: 500}, true, false},
		{"503", &tellStatusError{to: "w2", status: "503 Service Unavailable", code: 503}, false, true},
		{"400", &tellStatusError{to: "w2", status: "400 Bad Request", code: 400}, false, false},
		{"timeout", timeout, true, false},
		{"reset", reset, true, false},
		{"refused", refused, false, true},
		{"no address", fmt.Errorf("%w for w2", errNoAdminAddr), false, true},
	} {
		if got := tellTransient(ctx, c.err); got != c.want {
			t.Errorf("%s: tellTransient = %v, want %v", c.name, got, c.want)
		}
		if got := receiverWontTake(c.err); got != c.wontTake {
			t.Errorf("%s: receiverWontTake = %v, want %v", c.name, got, c.wontTake)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if tellTransient(done, timeout) {
		t.Error("retried after the caller's context ended")
	}
}

// darkest is the session of ids whose source was dark longest across a
// change of owner, and for how long.
func darkest(t *testing.T, f *feed.Server, ids []string) (string, time.Duration) {
	t.Helper()
	worst, gap := "", time.Duration(-1)
	for _, id := range ids {
		if gs := moveGaps(t, f, []string{id}); len(gs) > 0 && slices.Max(gs) > gap {
			worst, gap = id, slices.Max(gs)
		}
	}
	return worst, gap
}

// moveStory is what the source, the sink and the workers' logs say of
// session id: its connections (opened, closed, why), its deliveries (runs
// of one tenure), then every log line naming it.
func (e *env) moveStory(id string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "session %s\nconnections at the source:\n", id)
	for _, r := range e.feed.Records(id) {
		closed := "open"
		if !r.ClosedAt.IsZero() {
			closed = fmt.Sprintf("closed %s (%s, client code %d)", r.ClosedAt.Format("15:04:05.000"), r.Reason, r.ClientCode)
		}
		fmt.Fprintf(&b, "  #%d from seq %d: opened %s, %s\n", r.ID, r.From, r.OpenedAt.Format("15:04:05.000"), closed)
	}
	b.WriteString("deliveries at the sink (worker, epoch, seqs):\n")
	ds := e.sink.get(id)
	for i := 0; i < len(ds); {
		j := i + 1
		for j < len(ds) && ds[j].worker == ds[i].worker && ds[j].epoch == ds[i].epoch && ds[j].seq == ds[j-1].seq+1 {
			j++
		}
		fmt.Fprintf(&b, "  %s epoch %d: %d..%d from %s\n", ds[i].worker, ds[i].epoch, ds[i].seq, ds[j-1].seq, ds[i].at.Format("15:04:05.000"))
		i = j
	}
	b.WriteString("log lines naming it:\n")
	for line := range strings.Lines(e.logs.String()) {
		if strings.Contains(line, id) {
			b.WriteString("  " + line)
		}
	}
	return b.String()
}

// refusingAdmin stands in front of a worker's admin server: it answers the
// first n POST /handoff with code (remembering the first one's session), and
// forwards everything else.
type refusingAdmin struct {
	addr     string
	target   atomic.Pointer[string]
	refuse   atomic.Int64
	requests atomic.Int64
	refused  atomic.Pointer[string] // the first session refused
}

func (g *refusingAdmin) refusedID() string {
	if p := g.refused.Load(); p != nil {
		return *p
	}
	return ""
}

func newRefusingAdmin(t *testing.T, n int, code int) *refusingAdmin {
	t.Helper()
	g := &refusingAdmin{}
	g.refuse.Store(int64(n))
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: "http", Host: *g.target.Load()})
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == handoffPath {
			g.requests.Add(1)
			if g.refuse.Add(-1) >= 0 {
				id := r.URL.Query().Get("connection_id")
				g.refused.CompareAndSwap(nil, &id)
				rw.Header().Set("Retry-After", "1")
				http.Error(rw, `{"error":"refused by the test"}`, code)
				return
			}
		}
		proxy.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	g.addr = srv.Listener.Addr().String()
	return g
}

// forwardTo sets the admin server the requests not refused go to.
func (g *refusingAdmin) forwardTo(addr string) { g.target.Store(&addr) }

// failingAcquires fails the first left acquires with err (by default a
// store request that timed out), and remembers the first one's session.
type failingAcquires struct {
	lease.Store
	err   error // wrapped in each failure (nil: a timeout)
	left  atomic.Int64
	calls atomic.Int64
	first atomic.Pointer[string] // the session of the first acquire
}

func (s *failingAcquires) firstID() string {
	if p := s.first.Load(); p != nil {
		return *p
	}
	return ""
}

func (s *failingAcquires) Acquire(ctx context.Context, id, owner string, from lease.From) (lease.Item, error) {
	s.calls.Add(1)
	s.first.CompareAndSwap(nil, &id)
	if s.left.Add(-1) >= 0 {
		if s.err != nil {
			return lease.Item{}, fmt.Errorf("acquire %s: injected: %w", id, s.err)
		}
		return lease.Item{}, fmt.Errorf("acquire %s: injected: the store request timed out", id)
	}
	return s.Store.Acquire(ctx, id, owner, from)
}

// failAcquiresOf makes worker id's store the flaky one (the others keep
// theirs).
func (e *env) failAcquiresOf(id string, flaky *failingAcquires) {
	e.storeFor = func(w string, st lease.Store) lease.Store {
		if w != id {
			return st
		}
		flaky.Store = st
		return flaky
	}
}

// A takeover's part whose first acquire comes long after it was told (it
// waited for the claim pace behind the rest of its part) and fails
// transiently is tried again, not announced to the back of the work queue:
// nothing reserves it, so the told time bounds nothing.
func TestTakeoverPartClaimedLateIsRetriedNotAnnounced(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	st.Put(lease.Item{ConnectionID: "s-1", DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq})
	deadWorker(t, st, "w-dead", "s-1")
	it, err := st.Get(ctx, "s-1")
	if err != nil {
		t.Fatal(err)
	}
	prev := &lease.Token{ConnectionID: "s-1", Owner: it.Owner, Epoch: it.Epoch}
	// Stopped meanwhile: the retry's acquire ends the claim (not started)
	// without starting a session.
	st.Update("s-1", func(it *lease.Item) { it.DesiredState = schema.StateStopped })
	flaky := &failingAcquires{Store: st}
	flaky.left.Store(1)
	q := &batchQueue{sent: map[string]bool{}}
	w := bareWorker(t, "w-receiver", flaky, q, nil)
	if err := w.keeper.Register(ctx); err != nil {
		t.Fatal(err)
	}
	w.setState(stateRunning)
	w.takeHandedOff("s-1", prev, w.deps.Clock.Now().Add(-30*time.Second))
	if n := flaky.calls.Load(); n != 2 {
		t.Fatalf("%d acquires: want the timed-out one and a retry", n)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.sent["s-1"] {
		t.Fatal("the part was announced on the work queue: want it retried by its receiver")
	}
}
