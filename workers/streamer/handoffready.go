package streamer

// A receiver's readiness for a hand-off: whether this worker would take a
// session now (the giver asks before it lets a session with a standby go,
// GET /handoff/ready; a given tenure is refused the same way).

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// handoffReadyPath is the admin endpoint a rebalancing worker asks, before
// it closes a session whose standby the receiver holds, whether the
// receiver would take it now (GET, query connection_id, standby=1 to ask
// for a connected standby too): 200 when it would, 503 with the reason
// when it would not. The move's close is what loses a source that cannot
// replay its stream if the receiver then fails to acquire: the question
// costs a request, the wrong answer the messages sent until a dial.
const handoffReadyPath = "/handoff/ready"

// readyTimeout bounds the giver's question (on the worker's own network:
// an answer takes a millisecond; no answer within this is a no).
const readyTimeout = 500 * time.Millisecond

// refusesHandoff says why this worker would not take session id now ("":
// it would): draining or full; its last heartbeat not current (cut off
// from the table, or nearly out of trust: it could not acquire the
// session, lease.Keeper.HeartbeatCurrent); and with standby, no connected
// standby of id here (a promotion would have to dial, and lose what a
// source that cannot replay sent meanwhile).
func (w *Worker) refusesHandoff(id string, standby bool) string {
	if w.free() <= 0 {
		return "not claiming (draining or full)"
	}
	if !w.keeper.HeartbeatCurrent() {
		return "heartbeat overdue (the table may not answer this worker)"
	}
	if !standby {
		return ""
	}
	w.mu.Lock()
	e := w.standbys[id]
	w.mu.Unlock()
	if e == nil || !e.sb.Status().Connected {
		return "no connected standby of connection_id here"
	}
	return ""
}

// serveHandoffReady is GET /handoff/ready.
func (w *Worker) serveHandoffReady(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, ok := connectionParam(rw, q)
	if !ok {
		return
	}
	if why := w.refusesHandoff(id, q.Get("standby") == "1"); why != "" {
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"connection_id": id, "error": why})
		return
	}
	writeJSON(rw, http.StatusOK, map[string]any{"connection_id": id, "ready": true})
}

// receiverReady asks worker to whether it would take session id now, with
// its standby (nil: it would; any failure to answer is a no).
func (w *Worker) receiverReady(ctx context.Context, to, id string) error {
	q := url.Values{"connection_id": {id}, "standby": {"1"}}
	return w.askReceiver(ctx, to, http.MethodGet, handoffReadyPath, q, nil, http.StatusOK, readyTimeout)
}
