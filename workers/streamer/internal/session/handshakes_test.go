package session

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/testkit/stacks"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

func TestHandshakesBound(t *testing.T) {
	if NewHandshakes(0, 0) != nil {
		t.Fatal("0 must mean no bound")
	}
	var none *Handshakes
	if err := none.Acquire(context.Background(), "a"); err != nil {
		t.Fatalf("no bound: %v", err)
	}
	none.Release("a")
	h := NewHandshakes(2, 0)
	for i := 0; i < 2; i++ {
		if err := h.Acquire(context.Background(), string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Acquire(cancelled, "c"); !errors.Is(err, context.Canceled) {
		t.Fatalf("third acquire with both slots taken: %v, want it to wait", err)
	}
	h.Release("a")
	if err := h.Acquire(cancelled, "c"); err != nil {
		t.Fatalf("a free slot must admit at once, even on an ended context: %v", err)
	}
	if n := len(h.slots); n != 2 {
		t.Fatalf("in flight %d, want 2", n)
	}
}

// One host holds at most its cap of the worker's slots: a dial waiting for
// its host's slot holds none of the worker's, and a free slot of either kind
// given back lets the next dial in.
func TestHandshakesBoundPerHost(t *testing.T) {
	h := NewHandshakes(3, 2)
	for i := 0; i < 2; i++ {
		if err := h.Acquire(context.Background(), "slow"); err != nil {
			t.Fatal(err)
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Acquire(cancelled, "slow"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a third dial to one host with its cap of 2 taken: %v, want it to wait", err)
	}
	if err := h.Acquire(cancelled, "other"); err != nil {
		t.Fatalf("another host's dial with a worker slot free: %v, want it admitted", err)
	}
	if err := h.Acquire(cancelled, "third"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a dial with every worker slot taken: %v, want it to wait", err)
	}
	h.Release("other")
	if err := h.Acquire(cancelled, "third"); err != nil {
		t.Fatalf("a dial with a worker slot given back: %v, want it admitted", err)
	}
	h.Release("third")
	h.Release("slow")
	h.Release("slow")
	if n := len(h.slots); n != 0 {
		t.Fatalf("worker slots in flight %d, want 0", n)
	}
	if n := len(h.hosts); n != 0 {
		t.Fatalf("hosts kept %d after every dial ended, want 0", n)
	}
}

// tarpit is a TCP listener on addr that accepts connections and never
// answers: a handshake to it lasts until its dial's timeout.
func tarpit(t *testing.T, addr string) (url string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "ws://" + ln.Addr().String() + "/", func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
}

// A source host that accepts and never answers holds at most its cap of
// the worker's handshake slots: other hosts' sessions dial and connect
// while its handshakes hang.
func TestTarpitHostHoldsOnlyItsCap(t *testing.T) {
	slow, accepted := tarpit(t, "127.0.0.2:0")
	_, fast := newScripted(t, func(l *link) { l.drain() })
	cfg := testConfig()
	cfg.DialTimeout = 30 * time.Second // the tarpit's handshakes must hang for the whole test
	h := newHarness(t, cfg)
	h.env.Handshakes = NewHandshakes(4, 2)
	stuck := h.startMany(6, slow)
	testwait.Eventually(t, 10*time.Second, "the tarpit holding handshakes", func() bool { return accepted() >= 2 })
	var others running
	for _, id := range []string{"f1", "f2", "f3"} {
		h.put(id, fast, nil)
		s, done := h.start(id)
		others.sessions, others.dones = append(others.sessions, s), append(others.dones, done)
	}
	others.waitConnected(t, 10*time.Second, "the other host's sessions connected past the tarpit")
	if n := accepted(); n != 2 {
		t.Fatalf("the tarpit accepted %d handshakes, want its cap, 2", n)
	}
	others.stop(t)
	stuck.stop(t)
}

// handshakeGate is a WebSocket source whose handshakes each wait for a
// release before the upgrade: it counts the handshakes under way and the
// most at once.
type handshakeGate struct {
	mu       sync.Mutex
	inFlight int
	most     int
	served   int
	release  chan struct{}
}

func newHandshakeGate(t *testing.T) (*handshakeGate, string) {
	t.Helper()
	g := &handshakeGate{release: make(chan struct{})}
	done := make(chan struct{})
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		g.mu.Lock()
		g.inFlight++
		g.served++
		g.most = max(g.most, g.inFlight)
		g.mu.Unlock()
		select {
		case <-g.release:
		case <-done:
		}
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			if _, _, err := c.Read(context.Background()); err != nil {
				return
			}
		}
	}))
	t.Cleanup(func() { close(done); srv.CloseClientConnections(); srv.Close(); wg.Wait() })
	return g, "ws" + strings.TrimPrefix(srv.URL, "http")
}

func (g *handshakeGate) counts() (inFlight, most, served int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.most, g.served
}

// Sessions dial at most the bound's number at once: the others wait for a
// slot and dial as handshakes finish, and a stop ends a waiting session
// without a dial.
func TestSessionsHandshakeWithinTheBound(t *testing.T) {
	g, url := newHandshakeGate(t)
	cfg := testConfig()
	cfg.DialTimeout = 30 * time.Second // the held handshakes must not time out under a loaded -race run
	h := newHarness(t, cfg)
	h.env.Handshakes = NewHandshakes(2, 0)
	const n = 5
	runs := h.startMany(n, url)
	testwait.Eventually(t, 10*time.Second, "two handshakes under way", func() bool {
		in, _, _ := g.counts()
		return in == 2
	})
	// Both slots are held: one more session waits for a slot, and a stop
	// ends it there.
	h.put("sz", url, nil)
	sz, szDone := h.start("sz")
	sz.Interrupt(ErrStopRequested)
	if err := wait(t, szDone, 5*time.Second); !errors.Is(err, ErrStopRequested) {
		t.Fatalf("stopped while waiting for a handshake slot: %v", err)
	}
	// Release the handshakes one at a time: each frees a slot for a waiting
	// session, never more than two under way.
	for left := n; left > 0; left-- {
		want := min(2, left)
		testwait.Eventually(t, 10*time.Second, "handshakes under way", func() bool {
			in, _, _ := g.counts()
			return in == want
		})
		g.release <- struct{}{}
	}
	runs.waitConnected(t, 10*time.Second, "every session connected")
	if _, most, served := g.counts(); most != 2 || served != n {
		t.Fatalf("most handshakes at once %d (want the bound, 2), handshakes served %d (want %d: none for the stopped session)", most, served, n)
	}
	if sz.Status().Connected || sz.Status().Reconnects != 0 {
		t.Fatalf("a session stopped before its slot connected: %+v", sz.Status())
	}
	runs.stop(t)
}

// A session queued for its host's admission (a handshake slot, the dial
// rate) holds one goroutine, its own: the dial's fresh stack starts only
// once the host admitted it (the runtime keeps every goroutine's descriptor
// that ever existed at once, so a claim burst's queue would otherwise leave
// one more per session in the heap).
func TestAWaitingSessionHoldsOneGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name, waitIn string
		set          func(*Env)
	}{
		{"a handshake slot", "(*Handshakes).Acquire", func(e *Env) { e.Handshakes = NewHandshakes(1, 0) }},
		// One token, then one every 100 s: the first dial takes it.
		{"the dial rate", "(*DialGate).Wait", func(e *Env) { e.Dials = NewDialGate(0.01) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, url := newHandshakeGate(t)
			cfg := testConfig()
			cfg.DialTimeout = 30 * time.Second // the held handshake must not time out under a loaded -race run
			h := newHarness(t, cfg)
			tc.set(h.env)
			first := h.startMany(1, url)
			testwait.Eventually(t, 10*time.Second, "the first session's handshake under way", func() bool {
				in, _, _ := g.counts()
				return in == 1
			})
			base := runtime.NumGoroutine()
			const n = 20
			var queued running
			for i := range n {
				id := fmt.Sprintf("q%02d", i)
				h.put(id, url, nil)
				s, done := h.start(id)
				queued.sessions, queued.dones = append(queued.sessions, s), append(queued.dones, done)
			}
			testwait.Eventually(t, 10*time.Second, "every queued session waiting for its host", func() bool {
				return stacks.With(tc.waitIn) == n
			})
			// Each queued session: its Run (h.start's goroutine); a few of
			// the harness's own may come and go.
			if got := runtime.NumGoroutine() - base; got > n+4 {
				t.Fatalf("%d sessions waiting for their host hold %d goroutines (fresh stacks: %d), want about one each", n, got, stacks.With("onFreshStack"))
			}
			queued.stop(t)
			g.release <- struct{}{}
			first.waitConnected(t, 10*time.Second, "the first session connected")
			first.stop(t)
		})
	}
}
