// Calls between the fleet's workers: one way to send an admin request to a
// peer (its address, the shared admin token, a deadline), and one way to
// read the connection id and the positive integers such a request names.

package streamer

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/wsfleet/wsfleet/shared/notify"
)

// peerAddr is worker id's admin address: the fleet view's (the last
// rebalancing round, a takeover's read), else its record's, read once (a
// consistent read of one worker record) and kept in the fleet view.
func (w *Worker) peerAddr(ctx context.Context, id string) string {
	if a := w.rebal.addr(id); a != "" {
		return a
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	defer cancel()
	rec, err := w.keeper.Store().GetWorker(ctx, id)
	if err != nil || !rec.Alive() || rec.AdminAddr == "" {
		return ""
	}
	w.rebal.mu.Lock()
	if w.rebal.addrs == nil {
		w.rebal.addrs = map[string]string{}
	}
	w.rebal.addrs[id] = rec.AdminAddr
	w.rebal.mu.Unlock()
	return rec.AdminAddr
}

// peerCall sends method path?q to the admin server at addr with the fleet's
// token, bounded by ctx; the caller closes the answer's body.
func (w *Worker) peerCall(ctx context.Context, method, addr, path string, q url.Values, body io.Reader) (*http.Response, error) {
	target := "http://" + addr + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if w.cfg.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+w.cfg.AdminToken)
	}
	return w.rebal.client.Do(req)
}

// peerNotify is peerCall for a call whose answer nobody reads: it reports
// only whether one came.
func (w *Worker) peerNotify(ctx context.Context, method, addr, path string, q url.Values) error {
	res, err := w.peerCall(ctx, method, addr, path, q, nil)
	if err != nil {
		return err
	}
	return res.Body.Close()
}

// connectionParam is the request's connection_id, or a 400 naming it.
func connectionParam(rw http.ResponseWriter, q url.Values) (string, bool) {
	id := q.Get("connection_id")
	if !notify.ValidConnectionID(id) {
		writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "connection_id: not a valid connection id"})
		return "", false
	}
	return id, true
}

// positiveParam is the request's integer name (> 0), or a 400 naming it.
func positiveParam(rw http.ResponseWriter, q url.Values, name string) (int64, bool) {
	n, err := strconv.ParseInt(q.Get(name), 10, 64)
	if err != nil || n < 1 {
		writeJSON(rw, http.StatusBadRequest, map[string]string{"error": name + ": not a positive integer"})
		return 0, false
	}
	return n, true
}
