package session

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
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
