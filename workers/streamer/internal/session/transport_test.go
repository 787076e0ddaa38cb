package session

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/netguard"
)

// TestClientEnforcesTheAddressPolicy dials a real loopback WebSocket server
// by name ("localhost"): the name passes any literal check, so only the
// connect-time guard can refuse it.
func TestClientEnforcesTheAddressPolicy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c.Close(websocket.StatusNormalClosure, "")
	}))
	defer srv.Close()
	url := strings.Replace(srv.URL, "http://127.0.0.1", "ws://localhost", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	_, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: NewClient(2*time.Second, netguard.None)})
	if !errors.Is(err, netguard.ErrRefused) {
		t.Fatalf("policy none dialed a loopback source: %v", err)
	}
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: NewClient(2*time.Second, netguard.Loopback)})
	if err != nil {
		t.Fatalf("policy loopback: %v", err)
	}
	c.CloseNow()
}

// TestClientRefusesRedirects: a source that redirects the handshake, to
// itself (a loop) or to another origin with the session's credentials, gets
// one request and no more, and the dial names the redirect.
func TestClientRefusesRedirects(t *testing.T) {
	var other atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(1)
	}))
	defer elsewhere.Close()
	for _, tc := range []struct {
		name   string
		target func(self string) string
	}{
		{"loop to itself", func(self string) string { return self + "/again" }},
		{"other origin", func(string) string { return elsewhere.URL + "/steal" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				http.Redirect(w, r, tc.target(srv.URL), http.StatusFound)
			}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			hdr := http.Header{"Authorization": {"Bearer secret"}, "X-Api-Key": {"k"}}
			_, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/feed?token=t",
				&websocket.DialOptions{HTTPClient: NewClient(2*time.Second, netguard.Loopback), HTTPHeader: hdr})
			if err == nil {
				t.Fatal("a redirected handshake connected")
			}
			if resp == nil || resp.StatusCode != http.StatusFound {
				t.Fatalf("want the 302 handed back, got %v", resp)
			}
			if got := dialCause(err, resp); !errors.Is(got, ErrRedirected) {
				t.Fatalf("dial cause %v is not ErrRedirected", got)
			}
			if n := hits.Load(); n != 1 {
				t.Fatalf("source got %d requests, want 1", n)
			}
			if n := other.Load(); n != 0 {
				t.Fatalf("the other origin got %d requests", n)
			}
		})
	}
}
