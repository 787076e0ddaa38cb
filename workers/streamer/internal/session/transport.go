package session

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/netguard"
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

// NewClient returns the HTTP client every session dials with: HTTP/1.1
// only, no connection reuse (each handshake's connection becomes the
// WebSocket), a small handshake read buffer (the transport's reader stays
// referenced for the connection's life), and a dialer that hands the TCP
// connection to the session that asked for it. Every connection is checked
// against policy at connect time, after DNS resolution (with a proxy from
// the environment, that is the proxy's address). Redirects are never
// followed: a 3xx answer to the handshake ends the dial (ErrRedirected), so
// a source cannot loop a session, move it past the host allowlist, or make
// it send its headers to another origin.
func NewClient(dialTimeout time.Duration, policy netguard.Policy) *http.Client {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second, Control: policy.Control}
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
		DisableKeepAlives:      true,
		DisableCompression:     true,
		TLSHandshakeTimeout:    dialTimeout,
		ResponseHeaderTimeout:  dialTimeout,
		MaxResponseHeaderBytes: 64 << 10,
		ReadBufferSize:         1024,
		WriteBufferSize:        1024,
	}
	return &http.Client{Transport: tr, CheckRedirect: refuseRedirect}
}

// ErrRedirected marks a handshake the source answered with a redirect.
var ErrRedirected = errors.New("handshake redirected; redirects are not followed")

// refuseRedirect hands the 3xx response back to the dialer instead of
// following it (the Location is not logged: it may carry a token).
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
