package session

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/testkit/tlsca"
)

// wssServer is a TLS WebSocket server with a certificate from a fresh CA
// (ECDSA P-256, as most public endpoints): it accepts and closes.
func wssServer(tb testing.TB) (url string, ca *tlsca.CA) {
	tb.Helper()
	ca, err := tlsca.New(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c.CloseNow()
	}))
	srv.TLS = ca.ServerTLS()
	srv.StartTLS()
	tb.Cleanup(srv.Close)
	return "wss" + strings.TrimPrefix(srv.URL, "https"), ca
}

// BenchmarkWssHandshake is one session's wss:// dial (TCP, TLS 1.3 with
// P-256, the WebSocket upgrade) through the worker's client: a full
// handshake, and one resumed from a session ticket of an earlier
// connection to the same host (tls.Config.ClientSessionCache). Client and
// server share the process: ns/op is both sides' CPU.
func BenchmarkWssHandshake(b *testing.B) {
	url, ca := wssServer(b)
	for _, c := range []struct {
		name  string
		cache tls.ClientSessionCache
	}{{"full", nil}, {"resumed", tls.NewLRUClientSessionCache(64)}} {
		b.Run(c.name, func(b *testing.B) {
			conf := ca.ClientTLS()
			conf.ClientSessionCache = c.cache
			client := NewClient(netguard.Loopback, nil, conf)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the dials' deadline: the client has none
			defer cancel()
			var resumed int
			for b.Loop() {
				conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: client})
				if err != nil {
					b.Fatal(err)
				}
				if resp.TLS != nil && resp.TLS.DidResume {
					resumed++
				}
				conn.CloseNow()
			}
			b.ReportMetric(float64(resumed)/float64(b.N), "resumed/op")
		})
	}
}

// The worker's client resumes TLS sessions on reconnects to a host it
// dialed before (its session cache), and does a full handshake otherwise.
func TestWssReconnectResumes(t *testing.T) {
	url, ca := wssServer(t)
	conf := ca.ClientTLS()
	conf.ClientSessionCache = tls.NewLRUClientSessionCache(8)
	client := NewClient(netguard.Loopback, nil, conf)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the dials' deadline: the client has none
	defer cancel()
	var got []bool
	for range 3 {
		conn, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.TLS != nil && resp.TLS.DidResume)
		conn.CloseNow()
	}
	if got[0] || !got[1] || !got[2] {
		t.Fatalf("resumed %v: want a full first handshake, then resumed ones", got)
	}
}
