package session

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

	_, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: NewClient(netguard.None, nil, nil)})
	if !errors.Is(err, netguard.ErrRefused) {
		t.Fatalf("policy none dialed a loopback source: %v", err)
	}
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: NewClient(netguard.Loopback, nil, nil)})
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
				&websocket.DialOptions{HTTPClient: NewClient(netguard.Loopback, nil, nil), HTTPHeader: hdr})
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

// wsTarget is a WebSocket server that records the handshake headers it got.
func wsTarget(t *testing.T) (*httptest.Server, func() http.Header) {
	t.Helper()
	var mu sync.Mutex
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c.Close(websocket.StatusNormalClosure, "")
	}))
	t.Cleanup(srv.Close)
	return srv, func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// TestClientFollowsAllowedRedirects: a session that opts in
// (follow_redirects) follows at most that many redirects, each to an
// allowed host; credentials go only to the origin they were given for, and
// no hop carries a Referer.
func TestClientFollowsAllowedRedirects(t *testing.T) {
	hdr := http.Header{"Authorization": {"Bearer secret"}, "X-Api-Key": {"k"}}
	redirector := func(to func() string, hops *atomic.Int32) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hops.Add(1)
			http.Redirect(w, r, to(), http.StatusFound)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	dial := func(url string, limit int, allowed []string) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, resp, err := websocket.Dial(withRedirectLimit(ctx, limit), "ws"+strings.TrimPrefix(url, "http")+"/feed?token=t",
			&websocket.DialOptions{HTTPClient: NewClient(netguard.Loopback, allowed, nil), HTTPHeader: hdr})
		if err == nil {
			c.CloseNow()
		}
		return resp, dialCause(err, resp)
	}

	t.Run("another origin gets no credentials and no Referer", func(t *testing.T) {
		target, got := wsTarget(t)
		var hops atomic.Int32
		src := redirector(func() string { return target.URL + "/moved" }, &hops)
		if _, err := dial(src.URL, 1, nil); err != nil {
			t.Fatalf("follow 1 redirect: %v", err)
		}
		h := got()
		if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" || h.Get("Referer") != "" {
			t.Fatalf("the other origin got %v", h)
		}
		if h.Get("Sec-Websocket-Key") == "" {
			t.Fatal("the handshake headers were dropped too")
		}
	})
	t.Run("the same origin keeps them, still no Referer", func(t *testing.T) {
		var got func() http.Header
		var target *httptest.Server
		var hops atomic.Int32
		mux := http.NewServeMux()
		mux.HandleFunc("/feed", func(w http.ResponseWriter, r *http.Request) {
			hops.Add(1)
			http.Redirect(w, r, target.URL+"/moved", http.StatusFound)
		})
		inner, g := wsTarget(t)
		got = g
		mux.Handle("/moved", inner.Config.Handler)
		target = httptest.NewServer(mux)
		defer target.Close()
		if _, err := dial(target.URL, 1, nil); err != nil {
			t.Fatalf("same-origin redirect: %v", err)
		}
		h := got()
		if h.Get("Authorization") != "Bearer secret" || h.Get("X-Api-Key") != "k" || h.Get("Referer") != "" {
			t.Fatalf("same origin got %v", h)
		}
	})
	t.Run("a loop stops at the limit", func(t *testing.T) {
		var hops atomic.Int32
		var src *httptest.Server
		src = redirector(func() string { return src.URL + "/again" }, &hops)
		_, err := dial(src.URL, 3, nil)
		if !errors.Is(err, ErrRedirectRefused) {
			t.Fatalf("loop: %v", err)
		}
		if n := hops.Load(); n != 4 {
			t.Fatalf("%d requests for a limit of 3 redirects, want 4", n)
		}
	})
	t.Run("a host outside the allowlist is not asked", func(t *testing.T) {
		target, got := wsTarget(t)
		var hops atomic.Int32
		// The target by name: "localhost" is not on the list, 127.0.0.1 is.
		src := redirector(func() string { return strings.Replace(target.URL, "127.0.0.1", "localhost", 1) }, &hops)
		_, err := dial(src.URL, 2, []string{"127.0.0.1"})
		if !errors.Is(err, ErrRedirectRefused) || got() != nil {
			t.Fatalf("redirect off the allowlist: %v, target got %v", err, got())
		}
	})
	t.Run("the address policy holds on every hop", func(t *testing.T) {
		var hops atomic.Int32
		// A hop to a cloud agent: the dialer's Control refuses it before
		// connect(2), so nothing is sent there.
		src := redirector(func() string { return "http://169.254.169.254/latest/meta-data/" }, &hops)
		if _, err := dial(src.URL, 2, nil); !errors.Is(err, netguard.ErrRefused) {
			t.Fatalf("redirect to a cloud agent: %v", err)
		}
	})
}
