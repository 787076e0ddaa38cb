package session

// A dial's one timeout authority (issue 41): the per-dial context's
// deadline decides how long a handshake may take; the worker's HTTP client
// (built once, from the worker's settings) only holds ceilings above it.

import (
	"context"
	"errors"
	"io"
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
)

// slowSource is a source on 127.0.0.1 that answers every handshake only
// after hold (or never, when its client gives up first), then sends
// {"seq":1} and reads until the connection ends. It returns its ws:// URL.
func slowSource(t *testing.T, hold time.Duration) string {
	t.Helper()
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		wait := time.NewTimer(hold)
		defer wait.Stop()
		select {
		case <-wait.C:
		case <-r.Context().Done(): // the client hung up
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		if c.Write(r.Context(), websocket.MessageText, []byte(`{"seq":1}`)) != nil {
			return
		}
		_, _, _ = c.Read(r.Context())
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); wg.Wait() })
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/feed"
}

// dialOnce runs one dial of session s1 on url (its item changed by mod,
// when not nil) under h and returns its result and how long it took.
func dialOnce(t *testing.T, h *harness, url string, mod func(*lease.Item)) (Conn, time.Duration, error) {
	t.Helper()
	h.put("s1", url, mod)
	held, err := h.keeper.Acquire(context.Background(), "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(h.env, held, 0)
	p, err := compile(held.Item())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	conn, _, err := s.dial(context.Background(), held.Item(), p)
	return conn, time.Since(start), err
}

// TestDialDeadlineAboveTheClientsSettingsSucceeds: the worker's client is
// built once, from the worker's settings (here a 200 ms dial timeout), and
// a dial whose own deadline allows longer (here raised to 5 s after the
// client was built, as a session's own connect timeout above the worker's
// would) succeeds against a source that answers the handshake after
// 600 ms. Before issue 41 the client's response-header timeout (the
// worker's 200 ms) cut it.
func TestDialDeadlineAboveTheClientsSettingsSucceeds(t *testing.T) {
	const hold = 600 * time.Millisecond
	cfg := testConfig()
	cfg.DialTimeout = 200 * time.Millisecond
	h := newHarness(t, cfg)
	cfg.DialTimeout = 5 * time.Second
	conn, took, err := dialOnce(t, h, slowSource(t, hold), nil)
	if err != nil {
		t.Fatalf("dial with a 5 s deadline to a source that answers after %s: %v (after %s)", hold, err, took)
	}
	defer conn.CloseNow()
	if took < hold {
		t.Fatalf("dial took %s, less than the source's %s: the source was not slow", took, hold)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, r, err := conn.Reader(ctx)
	var data []byte
	if err == nil {
		data, err = io.ReadAll(r)
	}
	if err != nil || string(data) != `{"seq":1}` {
		t.Fatalf("first message %q, %v", data, err)
	}
}

// TestDialDeadlineCutsASlowHandshake: a per-dial deadline shorter than the
// source's answer ends the dial at that deadline, well before the client's
// ceilings, with a dial error the session classifies: transient (retried),
// recorded as the deadline, without the URL.
func TestDialDeadlineCutsASlowHandshake(t *testing.T) {
	cfg := testConfig()
	cfg.DialTimeout = 200 * time.Millisecond
	h := newHarness(t, cfg)
	url := slowSource(t, time.Hour)
	conn, took, err := dialOnce(t, h, url+"?token=supersecret", nil)
	if err == nil {
		conn.CloseNow()
		t.Fatal("a dial to a source that never answers succeeded")
	}
	var de *dialError
	if !errors.As(err, &de) || !errors.Is(err, context.DeadlineExceeded) || Permanent(err) {
		t.Fatalf("dial error %v (%T): want a transient *dialError for the deadline", err, err)
	}
	if text := ErrorText(err); text != context.DeadlineExceeded.Error() {
		t.Fatalf("ErrorText = %q, want %q", text, context.DeadlineExceeded.Error())
	}
	if strings.Contains(err.Error(), "supersecret") {
		t.Fatalf("dial error %v quotes the query", err)
	}
	if took < cfg.DialTimeout || took > cfg.DialTimeout+2*time.Second {
		t.Fatalf("dial ended after %s, want about its %s deadline", took, cfg.DialTimeout)
	}
}

// connectTimeout sets the session's connect_timeout_ms.
func connectTimeout(t *testing.T, ms int64) func(*lease.Item) {
	return func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.ConnectTimeoutMS = ms })
	}
}

// TestSessionConnectTimeoutAboveTheWorkersSucceeds: a session's
// connect_timeout_ms (5 s) above the worker's DialTimeout (200 ms, which
// the worker's client was built from) is its dial's deadline: the dial to
// a source that answers the handshake after 600 ms succeeds.
func TestSessionConnectTimeoutAboveTheWorkersSucceeds(t *testing.T) {
	const hold = 600 * time.Millisecond
	cfg := testConfig()
	cfg.DialTimeout = 200 * time.Millisecond
	h := newHarness(t, cfg)
	conn, took, err := dialOnce(t, h, slowSource(t, hold), connectTimeout(t, 5000))
	if err != nil {
		t.Fatalf("dial with connect_timeout_ms 5000 to a source that answers after %s: %v (after %s)", hold, err, took)
	}
	defer conn.CloseNow()
	if took < hold {
		t.Fatalf("dial took %s, less than the source's %s: the source was not slow", took, hold)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, r, err := conn.Reader(ctx)
	var data []byte
	if err == nil {
		data, err = io.ReadAll(r)
	}
	if err != nil || string(data) != `{"seq":1}` {
		t.Fatalf("first message %q, %v", data, err)
	}
}

// TestSessionConnectTimeoutBelowTheWorkersCuts: a session's
// connect_timeout_ms (200 ms) below the worker's DialTimeout (10 s) ends
// its dial at 200 ms, as a transient deadline error.
func TestSessionConnectTimeoutBelowTheWorkersCuts(t *testing.T) {
	const own = 200 * time.Millisecond
	cfg := testConfig()
	cfg.DialTimeout = 10 * time.Second
	h := newHarness(t, cfg)
	conn, took, err := dialOnce(t, h, slowSource(t, time.Hour), connectTimeout(t, own.Milliseconds()))
	if err == nil {
		conn.CloseNow()
		t.Fatal("a dial to a source that never answers succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) || Permanent(err) {
		t.Fatalf("dial error %v: want a transient deadline", err)
	}
	if took < own || took > own+2*time.Second {
		t.Fatalf("dial ended after %s, want about the session's %s (the worker's is %s)", took, own, cfg.DialTimeout)
	}
}
