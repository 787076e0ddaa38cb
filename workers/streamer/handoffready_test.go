package streamer

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// readyAnswer asks w's GET /handoff/ready about id (standby: with its
// standby) and returns the status code and the reason given.
func readyAnswer(t *testing.T, w *testWorker, id string, standby bool) (int, string) {
	t.Helper()
	u := "http://" + w.AdminAddr() + handoffReadyPath + "?connection_id=" + id
	if standby {
		u += "&standby=1"
	}
	res := adminDo(t, http.MethodGet, u)
	defer res.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return res.StatusCode, body.Error
}

// A rebalancing move of a session whose standby's worker is cut off from
// the table (its heartbeat overdue, its record still ALIVE) is not made:
// the owner asks the receiver first and keeps the session, which goes on
// delivering on its own connection. Moved, it would be closed here, and a
// source that cannot replay would lose what it sent until a dial (a short
// chaos run moved one to a worker cut off for 3 s: 18 messages lost).
func TestMoveWaitsForAStandbysWorkerThatReachesTheTable(t *testing.T) {
	e := newEnv(t)
	f := standbyFeed(t, true)
	// The rounds place standbys (their view of the fleet) but move
	// nothing: the test moves the session itself.
	a := e.standbyWorker(func(c *Config) { c.MinHold = time.Hour })
	id := e.standbySession(f)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "a owning the session", func() bool { return a.owns(id) })
	// b's record outlives the cut below (TTL 10 s): a sees it ALIVE while
	// its heartbeat is overdue.
	b := e.standbyWorker(func(c *Config) { c.MinHold, c.LeaseTTL = time.Hour, 10*time.Second })
	testwait.Eventually(t, 10*time.Second, "b holding the standby", func() bool { return holdsStandby(b, id) })
	if code, why := readyAnswer(t, b, id, true); code != http.StatusOK {
		t.Fatalf("b not ready for %s with its standby (%d %s), want 200", id, code, why)
	}
	if code, why := readyAnswer(t, b, "s-none", true); code != http.StatusServiceUnavailable || !strings.Contains(why, "standby") {
		t.Fatalf("b asked about a session it stands by for not: %d %q, want 503 naming the standby", code, why)
	}

	b.store.sever()
	testwait.Eventually(t, 5*time.Second, "b's heartbeat overdue", func() bool { return !b.keeper.HeartbeatCurrent() })
	if !b.keeper.Trusted() {
		t.Fatal("b lost its trust already: the test wants it trusted, its heartbeat overdue")
	}
	if code, why := readyAnswer(t, b, id, false); code != http.StatusServiceUnavailable || !strings.Contains(why, "heartbeat") {
		t.Fatalf("b cut off from the table answered %d %q, want 503 naming its heartbeat", code, why)
	}
	conns := len(f.Records(id))
	before := e.sink.count(id)
	a.mu.Lock()
	s := a.sessions[id]
	a.mu.Unlock()
	if a.moveSession(context.Background(), s, b.ID()) {
		t.Fatal("the session was moved to b, whose heartbeat is overdue")
	}
	if it := e.item(id); it.Owner != a.ID() || !a.owns(id) {
		t.Fatalf("owned by %q after the move was asked, want a (%s) still", it.Owner, a.ID())
	}
	if n := len(f.Records(id)); n != conns {
		t.Fatalf("the feed saw %d connections after the move was asked, %d before: the session was closed and dialed again", n, conns)
	}
	testwait.Eventually(t, 5*time.Second, "a delivering the session after the move was asked", func() bool {
		return e.sink.count(id) >= before+int(feedRate)
	})
}
