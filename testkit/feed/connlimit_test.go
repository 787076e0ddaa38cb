package feed_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

// A client IP's attempts beyond Config.ConnLimit within its window are
// refused with HTTP 429 (as Binance answers), counted in Stats.RateLimited
// and in the session's Refused; another host of the same feed counts apart.
func TestConnLimitRefusesAnIPOverItsRate(t *testing.T) {
	srv, c := start(t, feed.Config{ConnLimit: feed.ConnLimit{Max: 2, Per: time.Hour}})
	for range 2 {
		ws := mustDial(t, c.URL("a"))
		read(t, ws, 1)
		ws.Close(websocket.StatusNormalClosure, "")
		waitEnded(t, srv, "a")
	}
	_, resp, err := dial(t, c.URL("a"), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third attempt from one IP within the window: %v, want HTTP 429", err)
	}
	// The same server under another host name: a limit of its own.
	ws, _, err := dial(t, strings.Replace(c.URL("a"), "127.0.0.1", "localhost", 1), nil)
	if err != nil {
		t.Fatalf("attempt to another host: %v", err)
	}
	read(t, ws, 1)
	ws.Close(websocket.StatusNormalClosure, "")
	waitEnded(t, srv, "a")
	st, err := c.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.RateLimited != 1 || st.Sessions["a"].Refused != 1 {
		t.Fatalf("rate limited %d, refused %d: want 1 and 1", st.RateLimited, st.Sessions["a"].Refused)
	}
	if err := (feed.Config{ConnLimit: feed.ConnLimit{Max: 3}}).Validate(); err == nil {
		t.Fatal("a connection limit without its window validated")
	}
}
