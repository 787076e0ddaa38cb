package session

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/testkit/testwait"
)

func TestHandshakesBound(t *testing.T) {
	if NewHandshakes(0) != nil {
		t.Fatal("0 must mean no bound")
	}
	var none *Handshakes
	if err := none.Acquire(context.Background()); err != nil {
		t.Fatalf("no bound: %v", err)
	}
	none.Release()
	h := NewHandshakes(2)
	for i := 0; i < 2; i++ {
		if err := h.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Acquire(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("third acquire with both slots taken: %v, want it to wait", err)
	}
	h.Release()
	if err := h.Acquire(cancelled); err != nil {
		t.Fatalf("a free slot must admit at once, even on an ended context: %v", err)
	}
	if n := len(h.slots); n != 2 {
		t.Fatalf("in flight %d, want 2", n)
	}
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
	h.env.Handshakes = NewHandshakes(2)
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
