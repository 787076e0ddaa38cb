package bench

import (
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/feed"
)

// A stop is timed to the close of the connection open when it was sent;
// a stop whose connection never closed is left out.
func TestStopLatencies(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	conns := []feed.ConnRecord{
		{Session: "a", OpenedAt: at(-5000), ClosedAt: at(-4000), Reason: feed.ReasonClient}, // an older connection
		{Session: "a", OpenedAt: at(-3000), ClosedAt: at(800), Reason: feed.ReasonClient},
		{Session: "b", OpenedAt: at(-3000), ClosedAt: at(1200), Reason: feed.ReasonClient},
		{Session: "c", OpenedAt: at(-3000), Reason: feed.ReasonClient}, // still open
	}
	got := stopLatencies([]stopSample{{id: "a", path: StopToOwner, at: t0}, {id: "b", path: StopToNonOwner, at: t0}, {id: "c", path: StopNoConsumer, at: t0}}, conns)
	if len(got[StopToOwner]) != 1 || got[StopToOwner][0] != 800*time.Millisecond || got[StopToNonOwner][0] != 1200*time.Millisecond || len(got[StopNoConsumer]) != 0 {
		t.Fatalf("%v", got)
	}
}
