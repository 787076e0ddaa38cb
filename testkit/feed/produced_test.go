package feed_test

import (
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

// ProducedAt is t0 + seq/rate: a session first seen resuming at 5 has
// produced 4 when it opened, so seq 4's instant is the connection's
// opening and each next seq 1/rate later; nothing before a connection.
func TestProducedAt(t *testing.T) {
	srv, c := start(t, feed.Config{Mode: feed.ModeAllow, Rate: 200})
	if at, ok := srv.ProducedAt("s1", 1); ok {
		t.Fatalf("ProducedAt before any connection: %s, true", at)
	}
	ws := mustDial(t, c.URL("s1")+"?from=5")
	if got := read(t, ws, 1)[0].Seq; got != 5 {
		t.Fatalf("first seq %d, want 5", got)
	}
	opened := srv.Records("s1")[0].OpenedAt
	at4, ok4 := srv.ProducedAt("s1", 4)
	at5, ok5 := srv.ProducedAt("s1", 5)
	if !ok4 || !ok5 || !at4.Equal(opened) || at5.Sub(at4) != 5*time.Millisecond {
		t.Fatalf("seq 4 produced at %s (%v), seq 5 at %s (%v): want the opening %s and 5 ms later", at4, ok4, at5, ok5, opened)
	}
}
