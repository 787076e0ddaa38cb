package session

// A session's reconnect_backoff_max_ms: its redials wait at most that long,
// below or above the worker's own cap.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
)

// refusingSource is a source on 127.0.0.1 that refuses every handshake
// with a 503 (a transient failure: the session backs off and dials again)
// and records when each came. It returns its ws:// URL and the times.
func refusingSource(t *testing.T) (string, func() []time.Time) {
	t.Helper()
	var mu sync.Mutex
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/feed", func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), at...)
	}
}

// backoffMax sets the session's reconnect_backoff_max_ms.
func backoffMax(t *testing.T, ms int64) func(*lease.Item) {
	return func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.ReconnectBackoffMaxMS = ms })
	}
}

// TestSessionBackoffBelowTheWorkersRedialsSooner: under a worker back-off
// whose first wait is at least 5 s, a session capped at 100 ms dials a
// refusing source six times within 5 s.
func TestSessionBackoffBelowTheWorkersRedialsSooner(t *testing.T) {
	cfg := testConfig()
	cfg.Backoff = backoff.Policy{Base: 10 * time.Second, Max: 30 * time.Second}
	h := newHarness(t, cfg)
	url, dials := refusingSource(t)
	h.put("s1", url, backoffMax(t, 100))
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "six dials with the session's 100 ms cap", func() bool { return len(dials()) >= 6 })
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)
}

// TestSessionBackoffAboveTheWorkersWaitsLonger: under a worker back-off
// capped at 20 ms, a session capped at 800 ms lets its step double past
// it: the sixth wait (a step of 640 ms) is at least 320 ms, where the
// worker's cap would redial within 20 ms.
func TestSessionBackoffAboveTheWorkersWaitsLonger(t *testing.T) {
	cfg := testConfig()
	cfg.Backoff = backoff.Policy{Base: 20 * time.Millisecond, Max: 20 * time.Millisecond}
	h := newHarness(t, cfg)
	url, dials := refusingSource(t)
	h.put("s1", url, backoffMax(t, 800))
	s, done := h.start("s1")
	testwait.Eventually(t, 10*time.Second, "seven dials", func() bool { return len(dials()) >= 7 })
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)
	at := dials()
	if gap := at[6].Sub(at[5]); gap < 320*time.Millisecond {
		t.Fatalf("the sixth wait took %s, want at least 320 ms (a 640 ms step under the session's 800 ms cap)", gap)
	}
}

// TestSessionBackoffAfterADropRedialsSooner: the wait after a connection
// that delivered and was dropped by the source follows the session's cap
// too: a source that ends every connection after one message is dialed
// four times within 5 s under a worker back-off of 10 s and more.
func TestSessionBackoffAfterADropRedialsSooner(t *testing.T) {
	cfg := testConfig()
	cfg.Backoff = backoff.Policy{Base: 10 * time.Second, Max: 30 * time.Second}
	h := newHarness(t, cfg)
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		mu.Lock()
		conns++
		mu.Unlock()
		from := r.URL.Query().Get("from")
		if from == "" {
			from = "1"
		}
		if c.Write(r.Context(), websocket.MessageText, []byte(fmt.Sprintf(`{"seq":%s}`, from))) != nil {
			return
		}
		c.Close(websocket.StatusGoingAway, "drop")
	}))
	t.Cleanup(srv.Close)
	h.put("s1", "ws"+strings.TrimPrefix(srv.URL, "http")+"/feed", backoffMax(t, 100))
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "four connections, each delivering one message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return conns >= 4 && h.rec.count() >= 4
	})
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)
}

// A reconnect_backoff_max_ms stored under a looser limit runs capped at
// spec.MaxReconnectBackoff, not refused; a session without one, and a
// dial with no compiled spec yet, back off as the worker does.
func TestStoredBackoffAboveTheBoundRunsCapped(t *testing.T) {
	cfg := testConfig()
	s := &Session{env: &Env{Config: cfg}}
	for stored, want := range map[string]time.Duration{
		`{"ws_url":"ws://127.0.0.1:1/feed","reconnect_backoff_max_ms":9000000000000}`: spec.MaxReconnectBackoff,
		`{"ws_url":"ws://127.0.0.1:1/feed","reconnect_backoff_max_ms":2500}`:          2500 * time.Millisecond,
		`{"ws_url":"ws://127.0.0.1:1/feed"}`:                                          cfg.Backoff.Max,
	} {
		p, err := compile(lease.Item{ConnectionID: "s1", Generation: 1, Spec: stored})
		if err != nil {
			t.Fatalf("%s: %v", stored, err)
		}
		if got := s.reconnectBackoff(p); got.Max != want || got.Base != cfg.Backoff.Base {
			t.Errorf("%s: back-off %+v, want the worker's first step and a cap of %s", stored, got, want)
		}
	}
	if got := s.reconnectBackoff(nil); got != cfg.Backoff {
		t.Errorf("no compiled spec: %+v, want the worker's %+v", got, cfg.Backoff)
	}
}
