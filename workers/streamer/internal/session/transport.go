package session

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/secretref"
)

// rawSlot receives the TCP connection a dial opened, so that the session can
// close a socket at once even while coder/websocket's Close is waiting for a
// close handshake (its CloseNow then only waits).
type rawSlot struct {
	mu sync.Mutex
	c  net.Conn
}

type rawSlotKey struct{}

func (s *rawSlot) set(c net.Conn) {
	s.mu.Lock()
	s.c = c
	s.mu.Unlock()
}

func (s *rawSlot) get() net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

func (s *rawSlot) close() {
	if c := s.get(); c != nil {
		_ = c.Close()
	}
}

// Redirects are checked here, per hop (see checkRedirect).
type redirectLimitKey struct{}

// withRedirectLimit lets the handshake of ctx follow up to n redirects.
func withRedirectLimit(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, redirectLimitKey{}, n)
}

// ErrRedirectRefused marks a redirect the session may not follow: beyond
// its follow_redirects, or to a host outside the allowlist.
var ErrRedirectRefused = errors.New("handshake redirect refused")

// handshakeHeaders are set by the WebSocket client itself, not by the
// session; they are the only ones that follow a redirect to another origin.
var handshakeHeaders = map[string]bool{
	"Connection": true, "Upgrade": true, "Sec-Websocket-Key": true, "Sec-Websocket-Version": true,
	"Sec-Websocket-Protocol": true, "Sec-Websocket-Extensions": true,
}

// checkRedirect decides one redirect of a handshake: none unless the
// session allows them (withRedirectLimit; the 3xx is then handed back and
// the dial fails with ErrRedirected), at most that many, each to an allowed
// host (the address policy checks each hop's connection anyway, after DNS).
// A hop to another origin (scheme, host or port) carries none of the
// session's headers, and no hop carries a Referer (the query of the
// previous URL may hold a token).
func checkRedirect(allowed []string) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		limit, _ := req.Context().Value(redirectLimitKey{}).(int)
		if limit == 0 {
			return http.ErrUseLastResponse
		}
		if len(via) > limit {
			return fmt.Errorf("%w: more than %d redirects", ErrRedirectRefused, limit)
		}
		if !netguard.HostAllowed(allowed, req.URL.Hostname()) {
			return fmt.Errorf("%w: a redirect to a host outside WSFLEET_ALLOWED_HOSTS", ErrRedirectRefused)
		}
		req.Header.Del("Referer")
		if origin(req.URL) != origin(via[0].URL) {
			for k := range req.Header {
				if !handshakeHeaders[k] {
					req.Header.Del(k)
				}
			}
		}
		return nil
	}
}

// origin is scheme://host:port, the port made explicit and ws, wss named
// as the handshake's request does (http, https).
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = secretref.DefaultPort(u.Scheme)
	}
	scheme := map[string]string{"ws": "http", "wss": "https"}[u.Scheme]
	if scheme == "" {
		scheme = u.Scheme
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// NewClient returns the HTTP client every session dials with: HTTP/1.1
// only, no connection reuse (each handshake's connection becomes the
// WebSocket), a small handshake read buffer (the transport's reader stays
// referenced for the connection's life), and a dialer that hands the TCP
// connection to the session that asked for it. Every connection is checked
// against policy at connect time, after DNS resolution (with a proxy from
// the environment, that is the proxy's address). Redirects are followed
// only as far as the session allows (checkRedirect): by default a 3xx
// answer to the handshake ends the dial (ErrRedirected), so a source cannot
// loop a session, move it past the host allowlist (allowed, the host
// patterns of WSFLEET_ALLOWED_HOSTS; none: any host), or make it send its
// headers to another origin. tlsConf is the wss:// handshakes' (nil: Go's
// defaults, the system's roots); verification is never turned off here.
// The client holds no dial timeout: each dial's context bounds it
// (dialTimeout); its own timeouts are ceilings above that (clientCeiling).
func NewClient(policy netguard.Policy, allowed []string, tlsConf *tls.Config) *http.Client {
	d := &net.Dialer{Timeout: clientCeiling, KeepAlive: 30 * time.Second, Control: policy.Control}
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err == nil {
				if slot, ok := ctx.Value(rawSlotKey{}).(*rawSlot); ok {
					slot.set(c)
				}
			}
			return c, err
		},
		TLSClientConfig:        tlsConf,
		DisableKeepAlives:      true,
		DisableCompression:     true,
		TLSHandshakeTimeout:    clientCeiling,
		ResponseHeaderTimeout:  clientCeiling,
		MaxResponseHeaderBytes: 64 << 10,
		ReadBufferSize:         1024,
		WriteBufferSize:        1024,
	}
	return &http.Client{Transport: tr, CheckRedirect: checkRedirect(allowed)}
}

// ErrRedirected marks a handshake the source answered with a redirect.
var ErrRedirected = errors.New("handshake redirected; redirects are not followed")
