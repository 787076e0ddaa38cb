package session

// Failed connects: a connect fails unless its connection gets the source's
// first message, and MaxDialFailures of them in a row fail the session,
// whether the handshake failed or the connection ended after it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// connectConfig is testConfig with a limit of limit failed connects and a
// backoff short enough for many of them.
func connectConfig(limit int) *Config {
	cfg := testConfig()
	cfg.MaxDialFailures = limit
	cfg.Backoff.Base, cfg.Backoff.Max = time.Millisecond, 5*time.Millisecond
	return cfg
}

// notes makes h's NoteError record its texts (and write them to the store).
func notes(h *harness) func() []string {
	var mu sync.Mutex
	var got []string
	h.env.NoteError = func(ctx context.Context, held *lease.Held, gen int64, reason string, at time.Time) error {
		mu.Lock()
		got = append(got, reason)
		mu.Unlock()
		h.mu.Lock()
		h.noteGens = append(h.noteGens, gen)
		h.mu.Unlock()
		return h.keeper.NoteError(ctx, held, gen, reason, at)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// failedAfter waits for Run to end and checks that it failed the session
// after want connections of src, with a last_error holding cause (in the
// status, in Run's error and, recorded once through NoteError, in the
// table) that never quotes secret.
func failedAfter(t *testing.T, h *harness, s *Session, done <-chan error, conns func() int, want int, cause, secret string, noted func() []string) {
	t.Helper()
	err := wait(t, done, 10*time.Second)
	if !errors.Is(err, ErrSourceFailed) || conns() != want {
		t.Fatalf("Run = %v after %d connections, want ErrSourceFailed after %d", err, conns(), want)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%d connects failed in a row", want)) || !strings.Contains(err.Error(), cause) {
		t.Fatalf("Run = %v: want the count and %q", err, cause)
	}
	st := s.Status()
	if !strings.Contains(st.LastError, cause) || st.LastErrorAt == nil {
		t.Fatalf("status last_error %q at %v, want %q", st.LastError, st.LastErrorAt, cause)
	}
	if n := noted(); len(n) != 1 || !strings.Contains(n[0], cause) {
		t.Fatalf("NoteError calls %q, want one with %q", n, cause)
	}
	it, gerr := h.store.Get(context.Background(), "s1")
	if gerr != nil || !strings.Contains(it.LastError, cause) {
		t.Fatalf("stored last_error %q (%v), want %q", it.LastError, gerr, cause)
	}
	h.mu.Lock()
	gens := slices.Clone(h.noteGens)
	h.mu.Unlock()
	if len(gens) != 1 || gens[0] != it.Generation {
		t.Fatalf("NoteError called with generations %v, want the dialed one, %d", gens, it.Generation)
	}
	if it.LastErrorGen != it.Generation || it.LastErrorEpoch != it.Epoch || it.LastErrorEpoch == 0 {
		t.Fatalf("stored last_error at generation %d epoch %d, want the dialed generation %d and the tenure %d",
			it.LastErrorGen, it.LastErrorEpoch, it.Generation, it.Epoch)
	}
	for _, text := range []string{err.Error(), st.LastError, it.LastError} {
		if secret != "" && strings.Contains(text, secret) {
			t.Fatalf("error text %q quotes %q", text, secret)
		}
	}
	if n := h.rec.count(); n != 0 {
		t.Fatalf("%d messages delivered", n)
	}
}

// A source that accepts the handshake and ends the connection before any
// message (at once, or with a close frame whose reason the session must
// not repeat) fails the session after MaxDialFailures connects.
func TestCloseBeforeFirstMessageFailsAfterMaxDialFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(l *link)
		cause  string
	}{
		{"TCP closed", func(*link) {}, "connection ended before the first message: "},
		{"close frame", func(l *link) { _ = l.c.Close(4001, "token s3cret expired") }, "connection ended before the first message: source closed with status 4001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, url := newScripted(t, tc.script)
			h := newHarness(t, connectConfig(3))
			noted := notes(h)
			h.put("s1", url, nil)
			s, done := h.start("s1")
			failedAfter(t, h, s, done, src.conns, 3, tc.cause, "s3cret", noted)
		})
	}
}

// Open messages the source refuses (it answers something else, never
// answers, or closes on them) fail the session after MaxDialFailures
// connects; the credentials in the open message are sent once per connect
// and never appear in an error.
func TestRefusedOpenMessagesFailAfterMaxDialFailures(t *testing.T) {
	waitOK := &source.Match{Path: "ok", Equals: json.RawMessage(`true`), Timeout: "300ms"}
	refuse := func(l *link) {
		if _, err := l.read(); err == nil {
			_ = l.c.Close(websocket.StatusPolicyViolation, "bad key s3cret")
		}
	}
	for _, tc := range []struct {
		name    string
		waitFor *source.Match
		script  func(l *link)
		cause   string
	}{
		{"wait_for mismatch", waitOK, func(l *link) {
			if _, err := l.read(); err == nil && l.send(websocket.MessageText, `{"ok":false,"error":"bad key"}`) == nil {
				l.drain()
			}
		}, "open messages: open_messages[0]: the reply does not match wait_for ok"},
		{"wait_for timeout", waitOK, func(l *link) { l.drain() }, "open messages: open_messages[0]: no reply within 300ms"},
		{"closed awaiting wait_for", waitOK, refuse, "open messages: open_messages[0]: connection ended awaiting the reply: source closed with status 1008"},
		{"closed after the open message", nil, refuse, "connection ended before the first message: source closed with status 1008"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, url := newScripted(t, tc.script)
			h := newHarness(t, connectConfig(3))
			noted := notes(h)
			cfg := sourceJSON(t, source.Config{OpenMessages: []source.OpenMessage{{Text: text(`{"op":"auth","key":"s3cret"}`), WaitFor: tc.waitFor}}})
			h.put("s1", url, func(it *lease.Item) { spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.Config = cfg }) })
			s, done := h.start("s1")
			failedAfter(t, h, s, done, src.conns, 3, tc.cause, "s3cret", noted)
			for i := range 3 {
				if got := src.got(i); len(got) != 1 || got[0] != `{"op":"auth","key":"s3cret"}` {
					t.Fatalf("connection %d got %q, want the open message once", i+1, got)
				}
			}
		})
	}
}

// plannedSource answers connect n (from 1) as plan(n) says: "refuse" the
// handshake (HTTP 503), "close" the connection right after the handshake,
// or "deliver" the message {"seq":n} and then close. It counts the connects.
func plannedSource(t *testing.T, plan func(n int) string) (string, func() int) {
	t.Helper()
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		what := plan(k)
		if what == "refuse" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		if what == "deliver" {
			_ = c.Write(r.Context(), websocket.MessageText, fmt.Appendf(nil, `{"seq":%d}`, k))
			_ = c.Close(websocket.StatusGoingAway, "")
		}
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); wg.Wait() })
	return "ws" + strings.TrimPrefix(srv.URL, "http"), func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// A handshake that succeeds does not reset the count: refused handshakes
// and connections closed before their first message add up to the limit.
func TestSuccessfulHandshakesDoNotResetTheFailureCount(t *testing.T) {
	url, conns := plannedSource(t, func(n int) string {
		if n%2 == 1 {
			return "refuse"
		}
		return "close"
	})
	h := newHarness(t, connectConfig(4))
	noted := notes(h)
	h.put("s1", url, nil)
	s, done := h.start("s1")
	// The last failure (the 4th connect) is a close; the note was the first
	// failure's, a refused handshake (the next differs, but comes too soon).
	err := wait(t, done, 10*time.Second)
	if !errors.Is(err, ErrSourceFailed) || conns() != 4 || !strings.Contains(err.Error(), "4 connects failed in a row") {
		t.Fatalf("Run = %v after %d connects, want ErrSourceFailed after 4", err, conns())
	}
	if st := s.Status(); !strings.Contains(st.LastError, "connection ended before the first message") {
		t.Fatalf("status last_error %q, want the last failure's", st.LastError)
	}
	if n := noted(); len(n) != 1 || n[0] != "handshake refused: HTTP 503" {
		t.Fatalf("NoteError calls %q, want the first failure's only (at most one a minute)", n)
	}
}

// A source that delivers between its failures is never failed: each
// delivered message resets the count, however many connects fail in all.
func TestDeliveriesBetweenFailuresResetTheCount(t *testing.T) {
	url, conns := plannedSource(t, func(n int) string {
		return [...]string{"deliver", "refuse", "close"}[n%3] // refuse, close, deliver, refuse, …
	})
	h := newHarness(t, connectConfig(3))
	h.put("s1", url, nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 10*time.Second, "5 deliveries over 15 connects, 10 of them failed", func() bool {
		return h.rec.count() >= 5 && conns() >= 15
	})
	select {
	case err := <-done:
		t.Fatalf("Run ended with %v: two failed connects in a row, under the limit of 3", err)
	default:
	}
	s.Interrupt(ErrStopRequested)
	if err := wait(t, done, 5*time.Second); !errors.Is(err, ErrStopRequested) {
		t.Fatalf("Run = %v", err)
	}
	if st := s.Status(); st.LastError == "" {
		t.Fatal("no last_error after failed connects")
	}
}
