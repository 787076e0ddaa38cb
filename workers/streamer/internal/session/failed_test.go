package session

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/netguard"
)

func TestPermanentDialErrors(t *testing.T) {
	wrapped := func(err error) error { return &dialError{target: "wss://feed.example/x", cause: err} }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"address refused by policy", wrapped(&net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("%w: 10.0.0.1:443 is a private address (policy none)", netguard.ErrRefused)}), true},
		{"redirect not followed", wrapped(fmt.Errorf("%w (HTTP 302)", ErrRedirected)), true},
		{"redirect beyond follow_redirects", wrapped(fmt.Errorf("%w: more than 2 redirects", ErrRedirectRefused)), true},
		{"redirect outside the allowlist", wrapped(fmt.Errorf("%w: a redirect to a host outside WSFLEET_ALLOWED_HOSTS", ErrRedirectRefused)), true},
		{"401", wrapped(&HandshakeStatusError{Code: http.StatusUnauthorized}), true},
		{"403", wrapped(&HandshakeStatusError{Code: http.StatusForbidden}), true},
		{"404", wrapped(&HandshakeStatusError{Code: http.StatusNotFound}), true},
		{"410", wrapped(&HandshakeStatusError{Code: http.StatusGone}), true},
		{"400", wrapped(&HandshakeStatusError{Code: http.StatusBadRequest}), false},
		{"429", wrapped(&HandshakeStatusError{Code: http.StatusTooManyRequests}), false},
		{"500", wrapped(&HandshakeStatusError{Code: http.StatusInternalServerError}), false},
		{"503", wrapped(&HandshakeStatusError{Code: http.StatusServiceUnavailable}), false},
		{"timeout", wrapped(context.DeadlineExceeded), false},
		{"i/o timeout", wrapped(&net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}), false},
		{"connection refused", wrapped(&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}), false},
		{"TLS", wrapped(&tls.CertificateVerificationError{Err: errors.New("x509: certificate signed by unknown authority")}), false},
		{"DNS", wrapped(&net.DNSError{Err: "no such host", Name: "feed.example", IsNotFound: true}), false},
	} {
		if got := Permanent(tc.err); got != tc.want {
			t.Errorf("%s: Permanent(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestShouldNoteOnlyNewTextAtMostOncePerInterval(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		text, noted  string
		notedAt, now time.Time
		want         bool
	}{
		{"first error", "HTTP 503", "", time.Time{}, t0, true},
		{"same text, much later", "HTTP 503", "HTTP 503", t0, t0.Add(time.Hour), false},
		{"new text, too soon", "i/o timeout", "HTTP 503", t0, t0.Add(NoteErrorEvery - time.Millisecond), false},
		{"new text, an interval later", "i/o timeout", "HTTP 503", t0, t0.Add(NoteErrorEvery), true},
	} {
		if got := ShouldNote(tc.text, tc.noted, tc.notedAt, tc.now); got != tc.want {
			t.Errorf("%s: ShouldNote = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestErrorTextHasNoURLAndIsBounded(t *testing.T) {
	err := &dialError{target: "wss://feed.example/x", cause: &HandshakeStatusError{Code: 401}}
	if got := ErrorText(err); got != "handshake refused: HTTP 401" {
		t.Fatalf("ErrorText = %q", got)
	}
	if got := ErrorText(errors.New(strings.Repeat("é", MaxErrorText))); len(got) > MaxErrorText || !strings.HasPrefix(got, "éé") {
		t.Fatalf("long error text: %d bytes", len(got))
	}
}

// statusServer answers every handshake with code and counts the requests.
func statusServer(t *testing.T, code int) (string, func() int) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return strings.Replace(srv.URL, "http://", "ws://", 1) + "/feed", func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// A permanent error ends Run at the first attempt with ErrSourceFailed; the
// last error is the session's status, with no URL in it.
func TestPermanentDialErrorEndsTheSession(t *testing.T) {
	h := newHarness(t, testConfig())
	url, requests := statusServer(t, http.StatusUnauthorized)
	h.put("s1", url+"?token=supersecret", nil)
	s, done := h.start("s1")
	err := wait(t, done, 10*time.Second)
	if !errors.Is(err, ErrSourceFailed) {
		t.Fatalf("Run = %v, want ErrSourceFailed", err)
	}
	if requests() != 1 {
		t.Fatalf("%d handshakes for a permanent error, want 1", requests())
	}
	st := s.Status()
	if st.LastError != "handshake refused: HTTP 401" || st.LastErrorAt == nil || strings.Contains(err.Error(), "supersecret") {
		t.Fatalf("status last_error %q at %v; Run error %v", st.LastError, st.LastErrorAt, err)
	}
}

// Transient errors are retried up to MaxDialFailures in a row, and recorded
// once (same text) through NoteError.
func TestTransientDialErrorsEndAfterMaxDialFailures(t *testing.T) {
	cfg := testConfig()
	cfg.MaxDialFailures = 4
	cfg.Backoff.Base, cfg.Backoff.Max = time.Millisecond, 5*time.Millisecond
	h := newHarness(t, cfg)
	noted := notes(h)
	url, requests := statusServer(t, http.StatusServiceUnavailable)
	h.put("s1", url, nil)
	_, done := h.start("s1")
	err := wait(t, done, 10*time.Second)
	if !errors.Is(err, ErrSourceFailed) || requests() != 4 {
		t.Fatalf("Run = %v after %d handshakes, want ErrSourceFailed after 4", err, requests())
	}
	if got := noted(); len(got) != 1 || got[0] != "handshake refused: HTTP 503" {
		t.Fatalf("NoteError calls %q, want one", got)
	}
	it, gerr := h.store.Get(context.Background(), "s1")
	if gerr != nil || it.LastError != "handshake refused: HTTP 503" {
		t.Fatalf("stored last_error %q (%v)", it.LastError, gerr)
	}
}

// TestPlainDialToTLSPortSaysWSS: a ws:// dial to a port that speaks TLS
// (a real TLS server on 127.0.0.1 answers the plain request 400) records
// an error that says the source speaks TLS and to use wss://.
func TestPlainDialToTLSPortSaysWSS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "https")+"/feed/hello",
		&websocket.DialOptions{HTTPClient: NewClient(netguard.Loopback, nil, nil)})
	if err == nil {
		c.CloseNow()
		t.Fatal("a plain dial to a TLS port succeeded")
	}
	got := ErrorText(&dialError{target: "ws://x", cause: dialCause(err, resp)})
	if !strings.Contains(got, "HTTP 400") || !strings.Contains(got, "speaks TLS") || !strings.Contains(got, "wss://") {
		t.Fatalf("ErrorText = %q, want HTTP 400 naming TLS and wss://", got)
	}
	// Any other 400 keeps the plain text.
	plain, _ := statusServer(t, http.StatusBadRequest)
	c, resp, err = websocket.Dial(ctx, plain, &websocket.DialOptions{HTTPClient: NewClient(netguard.Loopback, nil, nil)})
	if err == nil {
		c.CloseNow()
		t.Fatal("dial to a 400 server succeeded")
	}
	if got := ErrorText(dialCause(err, resp)); got != "handshake refused: HTTP 400" {
		t.Fatalf("plain 400: ErrorText = %q", got)
	}
}
