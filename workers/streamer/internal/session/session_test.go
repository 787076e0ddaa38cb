package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a sink that keeps every delivered message.
type recorder struct {
	mu   sync.Mutex
	msgs []sink.Message
	at   []time.Time
	fail func(m sink.Message) error
}

func (r *recorder) Handle(_ context.Context, m sink.Message) error {
	at := time.Now() // when the delivery began (right after the session's validity check)
	if r.fail != nil {
		if err := r.fail(m); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m.Data = append([]byte(nil), m.Data...)
	r.msgs = append(r.msgs, m)
	r.at = append(r.at, at)
	return nil
}

func (r *recorder) seqs() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]int64, len(r.msgs))
	for i, m := range r.msgs {
		out[i] = m.Seq
	}
	return out
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// harness is one keeper on a memstore, and the sessions it runs.
type harness struct {
	t      *testing.T
	store  *memstore.Store
	keeper *lease.Keeper
	env    *Env
	rec    *recorder
	down   atomic.Bool // the store fails every call
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*Session
	noteGens []int64 // the generations notes' NoteError was called with
}

func testConfig() *Config {
	return &Config{
		WorkerID: "w1", DialTimeout: 2 * time.Second, PingEvery: 0, PingTimeout: time.Second,
		CloseGrace: 500 * time.Millisecond, Backoff: backoff.Policy{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond},
		StableAfter: time.Second, ReadLimit: 1 << 20, SinkAttempts: 3, SinkTimeout: 300 * time.Millisecond,
	}
}

// leaseConfig is a short liveness: trust lasts TTL - SafetyMargin = 1.4 s
// after a heartbeat's send, with a heartbeat every 200 ms that may take
// 500 ms (Validate: 1.4 s ≥ 0.7 s).
func leaseConfig(owner string) lease.Config {
	lc := lease.DefaultConfig(owner)
	lc.TTL, lc.HeartbeatEvery, lc.SafetyMargin, lc.RPCTimeout = 2*time.Second, 200*time.Millisecond, 600*time.Millisecond, 500*time.Millisecond
	lc.Tick, lc.RetryEvery = 20*time.Millisecond, 100*time.Millisecond
	return lc
}

func newHarness(t *testing.T, cfg *Config) *harness {
	t.Helper()
	h := &harness{t: t, store: memstore.New(), rec: &recorder{}, sessions: map[string]*Session{}}
	h.store.SetFail(func(string) (error, bool) {
		if h.down.Load() {
			return errors.New("table unreachable"), false
		}
		return nil, false
	})
	k, err := lease.NewKeeper(h.store, clock.Real{}, leaseConfig(cfg.WorkerID), obs{h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.keeper = k
	client := NewClient(netguard.Loopback, nil, nil)
	h.env = &Env{Config: cfg, Handler: h.rec, Client: client, Log: zerolog.Nop(), Counters: &Counters{}}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.wg.Go(func() { _ = k.Run(ctx) })
	h.wg.Go(func() {
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				h.mu.Lock()
				for _, s := range h.sessions {
					if s.Due(now) { // as the worker's control loop
						s.Tick(now)
					}
				}
				h.mu.Unlock()
			}
		}
	})
	t.Cleanup(func() {
		h.mu.Lock()
		for _, s := range h.sessions {
			s.Interrupt(ErrCrashed)
		}
		h.mu.Unlock()
		cancel()
		h.wg.Wait()
	})
	return h
}

// obs plays the worker's part for the Keeper: an ended tenure closes its
// session at once; a mailbox entry (ingest's note of a stop or a new
// generation) is re-read, installed on the tenure, and acked.
type obs struct{ h *harness }

func (obs) Heartbeat(time.Duration, error) {}
func (obs) WorkerDied(string)              {}

func (o obs) Ended(held *lease.Held, err error) {
	o.h.mu.Lock()
	s := o.h.sessions[held.ID()]
	o.h.mu.Unlock()
	if s != nil && s.Held() == held {
		s.Interrupt(err)
	}
}

func (o obs) Mailbox(ids []string) {
	// Called from a heartbeat, inside the Keeper's Run (itself in h.wg).
	o.h.wg.Go(func() {
		for _, id := range ids {
			o.h.reread(id)
		}
	})
}

func (h *harness) reread(id string) {
	defer h.keeper.Ack(id)
	held := h.keeper.Get(id)
	if held == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	it, err := h.store.Get(ctx, id)
	if err != nil {
		return
	}
	if it.DesiredState != schema.StateStarted {
		h.mu.Lock()
		s := h.sessions[id]
		h.mu.Unlock()
		if s != nil {
			s.Interrupt(ErrStopRequested)
		}
		return
	}
	held.SetItem(it)
	h.mu.Lock()
	if s := h.sessions[id]; s != nil {
		s.Poke() // as the worker's apply does
	}
	h.mu.Unlock()
}

// notify puts id in the worker's mailbox, as ingest does after a stop or a
// new start of a session the worker owns.
func (h *harness) notify(id string) {
	h.store.UpdateWorker(h.env.Config.WorkerID, func(r *lease.WorkerRecord) {
		if !slices.Contains(r.Mailbox, id) {
			r.Mailbox = append(r.Mailbox, id)
		}
	})
}

func (h *harness) put(id, url string, mod func(*lease.Item)) {
	it := lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
		Spec: spectest.Stored(h.t, spec.Spec{WSURL: url, Resume: &spec.Resume{QueryParam: "from"}})}
	if mod != nil {
		mod(&it)
	}
	h.store.Put(it)
}

// start acquires id and runs its session; the returned channel gets Run's result.
func (h *harness) start(id string) (*Session, <-chan error) {
	h.t.Helper()
	held, err := h.keeper.Acquire(context.Background(), id, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	s := New(h.env, held, 0)
	h.mu.Lock()
	h.sessions[id] = s
	h.mu.Unlock()
	done := make(chan error, 1)
	h.wg.Go(func() { done <- s.Run(context.Background()) })
	return s, done
}

// running are sessions started together and their Run results.
type running struct {
	sessions []*Session
	dones    []<-chan error
}

// startMany puts and starts n sessions on url (ids sa, sb, …).
func (h *harness) startMany(n int, url string) *running {
	r := &running{}
	for i := 0; i < n; i++ {
		id := "s" + string(rune('a'+i))
		h.put(id, url, nil)
		s, done := h.start(id)
		r.sessions, r.dones = append(r.sessions, s), append(r.dones, done)
	}
	return r
}

// waitConnected waits until every session of r is connected.
func (r *running) waitConnected(t *testing.T, within time.Duration, what string) {
	t.Helper()
	testwait.Eventually(t, within, what, func() bool {
		for _, s := range r.sessions {
			if !s.Status().Connected {
				return false
			}
		}
		return true
	})
}

// stop stops every session of r and waits for each.
func (r *running) stop(t *testing.T) {
	t.Helper()
	for i, s := range r.sessions {
		s.Interrupt(ErrStopRequested)
		_ = wait(t, r.dones[i], 5*time.Second)
	}
}

func wait(t *testing.T, done <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		t.Fatalf("session still running after %s", within)
		return nil
	}
}

// contiguous checks seqs are first, first+1, … with no gap and no repeat.
func contiguous(t *testing.T, seqs []int64) {
	t.Helper()
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("seq %d follows %d (index %d): gap or duplicate in %v", seqs[i], seqs[i-1], i, seqs)
		}
	}
}

func newFeed(t *testing.T, cfg feed.Config) *feed.Server {
	cfg.Mode = feed.ModeAllow // violations are counted, overlaps kept visible
	return feed.StartForTest(t, cfg)
}

func TestDropResumesWithoutGapOrDuplicate(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 200})
	h := newHarness(t, testConfig())
	h.put("s1", f.URL("s1"), nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "20 messages", func() bool { return h.rec.count() >= 20 })
	if n := f.Drop("s1", 0); n != 1 {
		t.Fatalf("dropped %d connections", n)
	}
	before := s.LastSeq()
	testwait.Eventually(t, 5*time.Second, "messages after the drop", func() bool { return s.LastSeq() > before+20 })
	s.Interrupt(ErrShutdown)
	if err := wait(t, done, 5*time.Second); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Run = %v", err)
	}
	contiguous(t, h.rec.seqs())
	conns := f.Records("s1")
	if len(conns) < 2 {
		t.Fatalf("%d connections, want a reconnect", len(conns))
	}
	// The reconnect asks for the seq after the last delivered one (messages
	// already in flight when the source dropped may still be delivered, so
	// it is at least before+1), and the sink saw no gap and no repeat.
	if conns[1].From < before+1 || conns[1].From > s.LastSeq() {
		t.Fatalf("reconnect resumed from %d; last delivered before the drop %d, at the end %d", conns[1].From, before, s.LastSeq())
	}
	if err := feed.NoOverlap(conns); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 2*time.Second, "feed sees the close", func() bool { return f.Ended("s1") })
	conns = f.Records("s1")
	if last := conns[len(conns)-1]; last.ClientCode != int(websocket.StatusGoingAway) {
		t.Fatalf("shutdown closed with %d, want 1001", last.ClientCode)
	}
	if got := s.reconnects.Load(); got < 1 {
		t.Fatalf("reconnects = %d", got)
	}
}

// replayServer sends a fixed list of messages then holds the connection.
func replayServer(t *testing.T, msgs []string) string {
	t.Helper()
	_, url := newScripted(t, func(l *link) {
		for _, m := range msgs {
			if l.send(websocket.MessageText, m) != nil {
				return
			}
		}
		l.drain()
	})
	return url
}

func TestDedupeDropsSeqAtOrBelowLastAndSkipsUnsequenced(t *testing.T) {
	url := replayServer(t, []string{`{"seq":6}`, `{"seq":5}`, `{"seq":7}`, `{"seq":7}`, `not json`, `{"other":1}`, `{"seq":8,"x":{"seq":1}}`, `{"seq":3}`, `{"seq":10}`})
	h := newHarness(t, testConfig())
	h.put("s1", url, func(it *lease.Item) { it.LastSeq = 5 }) // checkpoint 5: resume at 6
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "4 messages", func() bool { return h.rec.count() >= 4 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	if got := fmt.Sprint(h.rec.seqs()); got != "[6 7 8 10]" {
		t.Fatalf("delivered %s, want [6 7 8 10]", got)
	}
	if d := h.env.Counters.DuplicatesDropped.Load(); d != 3 {
		t.Fatalf("duplicates dropped = %d, want 3", d)
	}
	if u := h.env.Counters.SeqMissingDropped.Load(); u != 2 || s.Status().SeqMissingDropped != 2 {
		t.Fatalf("seq missing dropped = %d (status %d), want 2", u, s.Status().SeqMissingDropped)
	}
	if s.gaps.Load() != 1 {
		t.Fatalf("gaps = %d, want 1 (8 → 10)", s.gaps.Load())
	}
	if h.keeper.Held()[0].LastSeq() != 10 {
		t.Fatalf("observed %d, want 10", h.keeper.Held()[0].LastSeq())
	}
}

// A seq outside 0 to jsonseq.MaxSeq (2^53 - 1) is unusable like a missing
// one: dropped and counted, never the session's last seq (finding 10 of
// issue 35: one near MaxInt64 made every later message a duplicate and
// overflowed the resume value).
func TestOutOfRangeSeqIsDroppedNotCheckpointed(t *testing.T) {
	url := replayServer(t, []string{`{"seq":6}`, `{"seq":9223372036854775807}`, `{"seq":"9007199254740992"}`, `{"seq":-4}`, `{"seq":7}`, `{"seq":9007199254740991}`})
	h := newHarness(t, testConfig())
	h.put("s1", url, func(it *lease.Item) { it.LastSeq = 5 })
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "3 messages", func() bool { return h.rec.count() >= 3 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	if got := fmt.Sprint(h.rec.seqs()); got != "[6 7 9007199254740991]" {
		t.Fatalf("delivered %s, want [6 7 9007199254740991]", got)
	}
	if u := h.env.Counters.SeqMissingDropped.Load(); u != 3 || s.Status().SeqMissingDropped != 3 {
		t.Fatalf("seq missing dropped = %d (status %d), want 3", u, s.Status().SeqMissingDropped)
	}
	if d := h.env.Counters.DuplicatesDropped.Load(); d != 0 {
		t.Fatalf("duplicates dropped = %d, want 0", d)
	}
}

func TestCloseCodes(t *testing.T) {
	for _, c := range []struct {
		reason error
		code   int
	}{
		{ErrShutdown, int(websocket.StatusGoingAway)},
		{ErrStopRequested, int(websocket.StatusNormalClosure)},
		{lease.ErrStopped, int(websocket.StatusNormalClosure)},
		{lease.ErrLeaseLost, -1},
		{lease.ErrUntrusted, -1},
		{lease.ErrWorkerDead, -1},
	} {
		t.Run(c.reason.Error(), func(t *testing.T) {
			f := newFeed(t, feed.Config{Rate: 50})
			h := newHarness(t, testConfig())
			h.put("s1", f.URL("s1"), nil)
			s, done := h.start("s1")
			testwait.Eventually(t, 5*time.Second, "a message", func() bool { return h.rec.count() >= 1 })
			s.Interrupt(c.reason)
			if err := wait(t, done, 5*time.Second); !errors.Is(err, c.reason) {
				t.Fatalf("Run = %v, want %v", err, c.reason)
			}
			testwait.Eventually(t, 2*time.Second, "feed sees the close", func() bool { return f.Ended("s1") })
			if got := f.Records("s1")[0].ClientCode; got != c.code {
				t.Fatalf("close status %d, want %d (connections: %+v)", got, c.code, f.Records("s1"))
			}
		})
	}
}

// lastDelivery is when the sink last accepted a message.
func (r *recorder) lastDelivery() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at[len(r.at)-1]
}

// The worker is declared dead (its record DEAD at a new liveness epoch, as
// a reaper's DeclareDead writes it): its next heartbeat fails, which ends
// its liveness at once, and the session stops delivering and closes its
// socket at once (no close handshake: the session is someone else's now),
// within a heartbeat period and a tick or two.
func TestWorkerDeclaredDeadClosesAtOnceAndStopsDelivering(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 200})
	h := newHarness(t, testConfig())
	h.put("s1", f.URL("s1"), nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "messages", func() bool { return h.rec.count() >= 5 })
	declared := time.Now()
	h.store.UpdateWorker("w1", func(r *lease.WorkerRecord) {
		r.State, r.Epoch, r.List, r.DeclaredBy = schema.WorkerDead, r.Epoch+1, schema.WorkerListGone, "w-reaper"
	})
	lc := leaseConfig("w1")
	// The next heartbeat is sent within HeartbeatEvery (+ a tick: the loop
	// checks at ticks) and fails at once; the tick after it ends the tenure.
	bound := lc.HeartbeatEvery + 2*lc.Tick + 500*time.Millisecond
	// Whichever sees it first ends the session: the delivery's validity
	// check (ErrUntrusted: the failed heartbeat ended the worker's trust)
	// or the Keeper's tick ending the tenure (ErrWorkerDead).
	if err := wait(t, done, 5*time.Second); !errors.Is(err, lease.ErrWorkerDead) && !errors.Is(err, lease.ErrUntrusted) {
		t.Fatalf("Run = %v, want ErrWorkerDead or ErrUntrusted", err)
	}
	if !errors.Is(h.keeper.Ended(), lease.ErrWorkerDead) || s.Held().Valid() {
		t.Fatalf("keeper ended %v, tenure valid %v: want the worker dead and the tenure invalid", h.keeper.Ended(), s.Held().Valid())
	}
	testwait.Eventually(t, lc.Tick+500*time.Millisecond, "the tenure ended with ErrWorkerDead", func() bool {
		return errors.Is(s.Held().Err(), lease.ErrWorkerDead)
	})
	testwait.Eventually(t, 2*time.Second, "feed sees the close", func() bool { return f.Session("s1").Open == 0 })
	conns := f.Records("s1")
	if conns[0].EndedAt.IsZero() || conns[0].EndedAt.Sub(declared) > bound {
		t.Fatalf("closed %v after the declaration, bound %s", conns[0].EndedAt.Sub(declared), bound)
	}
	if got := conns[0].ClientCode; got != -1 {
		t.Fatalf("closed with status %d, want no close handshake (-1)", got)
	}
	if last := h.rec.lastDelivery(); last.After(conns[0].EndedAt) {
		t.Fatalf("delivered at %v, after the socket closed at %v", last, conns[0].EndedAt)
	}
	// A dead worker writes nothing as owner again.
	if _, err := h.keeper.Acquire(context.Background(), "s1", nil); !errors.Is(err, lease.ErrWorkerDead) {
		t.Fatalf("acquire by a dead worker: %v", err)
	}
}

// The table stops answering: every heartbeat fails transiently, so the
// worker's trust runs out at (send time of its last good heartbeat) +
// TTL - SafetyMargin. No message is delivered at or after that deadline,
// and the session ends within a tick of it and closes its socket at once.
func TestUntrustedWorkerNeverDeliversPastItsDeadline(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 500})
	h := newHarness(t, testConfig())
	h.put("s1", f.URL("s1"), nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "messages", func() bool { return h.rec.count() >= 5 })
	h.down.Store(true)
	down := time.Now() // every heartbeat that succeeded was sent before now
	lc := leaseConfig("w1")
	// The last good heartbeat was sent before the table went down.
	bound := lc.TTL - lc.SafetyMargin + lc.Tick + 500*time.Millisecond
	if err := wait(t, done, 5*time.Second); !errors.Is(err, lease.ErrUntrusted) {
		t.Fatalf("Run = %v, want ErrUntrusted", err)
	}
	ended := time.Now()
	deadline := h.keeper.TrustedUntil()
	if deadline.After(down.Add(lc.TTL - lc.SafetyMargin)) {
		t.Fatalf("trusted until %v, more than TTL - SafetyMargin after the table went down at %v", deadline, down)
	}
	if ended.Sub(down) > bound {
		t.Fatalf("session ended %v after the table went down, bound %s", ended.Sub(down), bound)
	}
	if s.Held().Valid() {
		t.Fatal("tenure still valid after the session ended untrusted")
	}
	// The Keeper's next tick ends the tenure too (if the delivery's check
	// did not see the deadline first, it already has).
	testwait.Eventually(t, lc.Tick+500*time.Millisecond, "the tenure ended with ErrUntrusted", func() bool {
		return errors.Is(s.Held().Err(), lease.ErrUntrusted)
	})
	// The recorder stamps a delivery when the handler runs, after the
	// session's trust check passed: one in flight at the deadline lands
	// microseconds after it (CI: 8 µs; 1 run in 20 here), far inside
	// SafetyMargin, before which nobody may take over. A session that
	// delivered without the check would go on (500 messages a second
	// here) until its Keeper's tick (20 ms) ended it.
	const inFlight = 2 * time.Millisecond
	if last := h.rec.lastDelivery(); !last.Before(deadline.Add(inFlight)) {
		t.Fatalf("delivered at %v, trust deadline %v (+%s in flight)", last, deadline, inFlight)
	}
	testwait.Eventually(t, 2*time.Second, "feed sees the close", func() bool { return f.Session("s1").Open == 0 })
	if got := f.Records("s1")[0].ClientCode; got != -1 {
		t.Fatalf("closed with status %d, want no close handshake (-1)", got)
	}
}

func TestNewGenerationReconnectsToNewURL(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 200})
	h := newHarness(t, testConfig())
	h.put("s1", f.URL("s1")+"?v=1", nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "messages", func() bool { return h.rec.count() >= 5 })
	// A new start (ingest): the new generation, and the owner's mailbox.
	h.store.Update("s1", func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.WSURL = f.URL("s1") + "?v=2" })
		it.Generation = 2
	})
	h.notify("s1")
	testwait.Eventually(t, 5*time.Second, "a connection to the new URL", func() bool {
		c := f.Records("s1")
		return len(c) == 2 && strings.Contains(c[1].RequestURI, "v=2") && c[1].Sent > 0
	})
	before := s.LastSeq()
	testwait.Eventually(t, 5*time.Second, "messages from the new URL", func() bool { return s.LastSeq() > before+5 })
	testwait.Eventually(t, 2*time.Second, "the mailbox entry acked by a heartbeat", func() bool {
		it, err := h.store.GetWorker(context.Background(), "w1")
		return err == nil && len(it.Mailbox) == 0
	})
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)
	testwait.Eventually(t, 2*time.Second, "feed sees the close", func() bool { return f.Ended("s1") })
	conns := f.Records("s1")
	if conns[0].ClientCode != int(websocket.StatusNormalClosure) {
		t.Fatalf("old connection closed with %d, want 1000", conns[0].ClientCode)
	}
	if err := feed.NoOverlap(conns); err != nil {
		t.Fatal(err)
	}
	contiguous(t, h.rec.seqs())
}

func TestStoredHeadersAreSent(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 50, RequireHeaders: map[string]string{"Authorization": "Bearer t0ken"}})
	h := newHarness(t, testConfig())
	h.put("s1", f.URL("s1"), func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.Headers = map[string]string{"Authorization": "Bearer t0ken"} })
	})
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "a message", func() bool { return h.rec.count() >= 1 })
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)

	delivered := h.rec.count()    // s1's, now final
	h.put("s2", f.URL("s2"), nil) // no header: refused, retried with backoff
	s2, done2 := h.start("s2")
	testwait.Holds(t, 300*time.Millisecond, "no handshake without the header gets through", func() bool {
		return h.rec.count() == delivered && f.Session("s2").Connections == 0
	})
	s2.Interrupt(ErrShutdown)
	_ = wait(t, done2, 5*time.Second)
}

func TestSinkErrorsReconnectAndResume(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 200})
	h := newHarness(t, testConfig())
	var failures atomic.Int64
	h.rec.fail = func(m sink.Message) error {
		if m.Seq%10 == 0 && failures.Add(1) <= 4 {
			return errors.New("sink down")
		}
		return nil
	}
	h.put("s1", f.URL("s1"), nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "40 messages", func() bool { return h.rec.count() >= 40 })
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)
	contiguous(t, h.rec.seqs())
	if h.env.Counters.SinkErrors.Load() < 3 || len(f.Records("s1")) < 2 {
		t.Fatalf("sink errors %d, connections %d: want a reconnect after 3 failed attempts", h.env.Counters.SinkErrors.Load(), len(f.Records("s1")))
	}
	if err := feed.NoOverlap(f.Records("s1")); err != nil {
		t.Fatal(err)
	}
}

func TestUnansweredPingReconnects(t *testing.T) {
	var conns atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// A source that accepts and then never reads, so it never answers pings.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		conns.Add(1)
		<-stop
		c.CloseNow()
	}))
	t.Cleanup(func() { close(stop); srv.CloseClientConnections(); srv.Close(); wg.Wait() })
	cfg := testConfig()
	cfg.PingEvery, cfg.PingTimeout = 100*time.Millisecond, 50*time.Millisecond
	h := newHarness(t, cfg)
	h.put("s1", "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "a reconnect after an unanswered ping", func() bool { return conns.Load() >= 2 })
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)
}

func TestPingsAnsweredKeepTheConnection(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 5})
	cfg := testConfig()
	cfg.PingEvery, cfg.PingTimeout = 50*time.Millisecond, 40*time.Millisecond
	h := newHarness(t, cfg)
	h.put("s1", f.URL("s1"), nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "connected", func() bool { return len(f.Records("s1")) == 1 })
	testwait.Holds(t, 700*time.Millisecond, "one connection: answered pings must not reconnect", func() bool {
		return len(f.Records("s1")) == 1
	})
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)
}

func TestResumeURL(t *testing.T) {
	cases := []struct {
		raw, param string
		last       int64
		inclusive  bool
		want       string
	}{
		{"wss://h/p?cursor=1", "cursor", 41, true, "wss://h/p?cursor=41"},
		{"wss://h/p?token=a&from=3&x=1", "from", 41, false, "wss://h/p?token=a&x=1&from=42"},
		{"wss://h/p", "from", 0, false, "wss://h/p?from=1"},
		{"wss://h/p?a=1", "", 5, false, "wss://h/p?a=1"},
		{"wss://h/p?a=1", "from", lease.NoSeq, false, "wss://h/p?a=1"},
		{"wss://h/p?a=1", "from", lease.NoSeq, true, "wss://h/p?a=1"},
		{"wss://h/p?a=1", "resume at", 9, false, "wss://h/p?a=1&resume+at=10"},
	}
	for _, c := range cases {
		got, err := ResumeURL(c.raw, c.param, c.last, c.inclusive)
		if err != nil || got != c.want {
			t.Errorf("ResumeURL(%q, %q, %d, %v) = %q, %v; want %q", c.raw, c.param, c.last, c.inclusive, got, err, c.want)
		}
	}
}

func TestDialErrorsDoNotLeakTheQuery(t *testing.T) {
	h := newHarness(t, testConfig())
	h.put("s1", "ws://127.0.0.1:1/feed/s1?token=supersecret", nil)
	held, err := h.keeper.Acquire(context.Background(), "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(h.env, held, 0)
	p, err := compile(held.Item())
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.dial(context.Background(), held.Item(), p)
	if err == nil || strings.Contains(err.Error(), "supersecret") {
		t.Fatalf("dial error %v", err)
	}
}

// TestSubprotocolsAreOffered: a source that speaks one subprotocol and
// echoes it, as RFC 6455 requires, gets it offered through the WebSocket
// option (a Sec-WebSocket-Protocol header would make coder/websocket refuse
// the echo) and streams.
func TestSubprotocolsAreOffered(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"v1.json"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		if c.Subprotocol() != "v1.json" {
			c.Close(4001, "subprotocol v1.json required")
			return
		}
		for seq := 1; seq <= 3; seq++ {
			if c.Write(r.Context(), websocket.MessageText, []byte(fmt.Sprintf(`{"seq":%d}`, seq))) != nil {
				return
			}
		}
		_, _, _ = c.Read(r.Context()) // until the client closes
	}))
	defer srv.Close()
	h := newHarness(t, testConfig())
	h.put("s1", "ws"+strings.TrimPrefix(srv.URL, "http")+"/feed", func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.Subprotocols = []string{"v2.json", "v1.json"} })
	})
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "3 messages over v1.json", func() bool { return h.rec.count() >= 3 })
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)
}

// A connection that keeps bringing messages is not pinged (its traffic
// proves it alive): a source that never answers pings but streams keeps
// its connection; once it falls silent, the unanswered ping drops it.
func TestTrafficStandsInForPings(t *testing.T) {
	var quiet atomic.Bool
	src, url := newScripted(t, func(l *link) {
		// Never reads: pings are never answered (the pong is written by
		// the reader). Silent, it cannot tell when the client has gone:
		// it holds the connection for 3 s at most.
		silentFor := 0
		for i := 1; silentFor < 300; i++ {
			if quiet.Load() {
				silentFor++
			} else if l.send(websocket.MessageText, fmt.Sprintf(`{"seq":%d}`, i)) != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	cfg := testConfig()
	cfg.PingEvery, cfg.PingTimeout = 100*time.Millisecond, 50*time.Millisecond
	h := newHarness(t, cfg)
	h.put("s1", url, nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "streaming", func() bool { return h.rec.count() >= 10 })
	testwait.Holds(t, time.Second, "one connection while messages flow (no ping to go unanswered)", func() bool { return src.conns() == 1 })
	quiet.Store(true)
	testwait.Eventually(t, 5*time.Second, "a reconnect after the unanswered ping of a silent connection", func() bool { return src.conns() >= 2 })
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)
}

// A held session's struct stays in the 448-byte size class (it was 592 B,
// 640 allocated, with a flag padded to a word of its own in six places;
// then 560 B, 576 allocated, with its failed connects' record, 88 B most
// sessions never use, and a time.Time for its start in it): every session
// holds one for its life (docs/worker.md, "Where a session's memory
// goes").
func TestSessionSize(t *testing.T) {
	if n := unsafe.Sizeof(Session{}); n > 448 {
		t.Fatalf("Session is %d B, want ≤ 448 (the size class it is allocated in); group its flags, or keep what few sessions need out of it", n)
	}
}

// A connection's compiled spec stays in its size class (320 B): every
// session holds one for its life (docs/worker.md, "Where a session's
// memory goes"), and a new setting (spec.Settings, held whole) grows it.
func TestProtoSize(t *testing.T) {
	if n := unsafe.Sizeof(proto{}); n > 320 {
		t.Fatalf("proto is %d B, want ≤ 320 (the size class it is allocated in): group its flags, or drop a compiled copy of what p.settings or p.open already hold", n)
	}
}

// Finished's channel is made when first waited on: New allocates the
// session and two channels (wake, ended), not a third that most sessions
// never need; Finished closes at MarkFinished all the same, whether it was
// asked for before or after.
func TestFinishedMadeWhenWaitedOn(t *testing.T) {
	h := newHarness(t, testConfig())
	h.put("fa", "ws://127.0.0.1:1/feed/fa", nil)
	held, err := h.keeper.Acquire(context.Background(), "fa", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = New(h.env, held, 0) }); n > 2 {
		t.Fatalf("New: %.0f allocations, want 2 (the session, ended)", n)
	}
	finished := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	a := New(h.env, held, 0)
	c := a.Finished()
	if finished(c) || a.Finished() != c {
		t.Fatal("waited on: finished before MarkFinished, or a second channel")
	}
	a.MarkFinished()
	a.MarkFinished() // idempotent
	if !finished(c) || !finished(a.Finished()) {
		t.Fatal("waited on, then marked: not finished")
	}
	b := New(h.env, held, 0)
	b.MarkFinished()
	if !finished(b.Finished()) {
		t.Fatal("marked, then waited on: not finished")
	}
}

// A session's end wakes its back-off's sleep through ended, the one signal
// of that event (there was a wake-up channel beside it, 112 B of every
// session), and its failed connects go to a record the first one makes
// (88 B most sessions never use).
func TestBackoffEndsOnInterruptAndFailuresRecordMadeByTheFirst(t *testing.T) {
	cfg := testConfig()
	cfg.Backoff.Base, cfg.Backoff.Max = time.Hour, time.Hour
	h := newHarness(t, cfg)
	h.put("bo", "ws://127.0.0.1:1/feed/bo", nil)
	held, err := h.keeper.Acquire(context.Background(), "bo", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(h.env, held, 0)
	if s.fails != nil || s.LastError() != (DialFailure{}) {
		t.Fatal("a record of failed connects before the first")
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background()) }()
	testwait.Eventually(t, 5*time.Second, "a failed connect recorded (the source refuses every dial)", func() bool { return s.LastError().Text != "" })
	// Now in (or about to enter) its hour of back-off.
	s.Interrupt(ErrStopRequested)
	if err := wait(t, done, 5*time.Second); !errors.Is(err, ErrStopRequested) {
		t.Fatalf("Run: %v, want the stop", err)
	}
}

// A new generation that comes while the session backs off after a failed
// dial is dialed at once: the back-off waits on Held.Changed, which its
// first wait makes (a tenure that never waits has none).
func TestNewGenerationEndsTheBackoff(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 50})
	cfg := testConfig()
	cfg.Backoff.Base, cfg.Backoff.Max = time.Hour, time.Hour
	h := newHarness(t, cfg)
	h.put("s1", "ws://127.0.0.1:1/feed/s1", nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "a failed dial (the first URL refuses)", func() bool { return s.LastError().Text != "" })
	h.store.Update("s1", func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.WSURL = f.URL("s1") })
		it.Generation = 2
	})
	it, err := h.store.Get(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	s.Held().SetItem(it)
	testwait.Eventually(t, 5*time.Second, "messages from the new generation's URL, not an hour of back-off later", func() bool { return h.rec.count() >= 1 })
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)
}
