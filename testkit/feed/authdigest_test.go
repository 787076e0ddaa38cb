package feed_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

// Each connection's messages and record carry the digest of its
// Authorization header, never the value; a new credential, a new digest;
// no header, no auth key.
func TestMessagesCarryTheAuthDigest(t *testing.T) {
	srv, c := start(t, feed.Config{Rate: 50})
	var digests []string
	for _, token := range []string{"Bearer demo-token", "Bearer rotated-token"} {
		ws, _, err := dial(t, c.URL("a"), http.Header{"Authorization": {token}})
		if err != nil {
			t.Fatal(err)
		}
		m := read(t, ws, 1)[0]
		if !strings.HasPrefix(m.Auth, feed.AuthDigestPrefix) || len(m.Auth) != len(feed.AuthDigestPrefix)+12 || strings.Contains(m.Auth, "token") {
			t.Fatalf("auth %q, want %s and 12 hex digits", m.Auth, feed.AuthDigestPrefix)
		}
		digests = append(digests, m.Auth)
		ws.Close(websocket.StatusNormalClosure, "")
	}
	if digests[0] == digests[1] {
		t.Fatalf("two credentials, one digest %s", digests[0])
	}
	ws := mustDial(t, c.URL("b"))
	if m := read(t, ws, 1)[0]; m.Auth != "" {
		t.Fatalf("no Authorization header, auth %q", m.Auth)
	}
	recs := srv.Records("a")
	if len(recs) != 2 || recs[0].AuthDigest != digests[0] || recs[1].AuthDigest != digests[1] {
		t.Fatalf("records %+v, want digests %v", recs, digests)
	}
}
