package streamer

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// AdminHandler serves the admin endpoints:
//
//	GET /healthz  200 while the worker runs or drains (the process is alive), 503 after it stopped
//	GET /readyz   200 when running and the engines answer (the table: the worker's own last call; the work queue: its last receive), else 503; no request per probe
//	GET /status   JSON: the worker and every owned session (epoch, since, last_seq, messages, reconnects, …)
//	GET /stats    JSON: cumulative counts (messages, heartbeats, store requests by kind; see Stats)
//	POST /handoff?connection_id=…[&prev_owner=…&prev_epoch=…] a move or a takeover's part: claim the session now (202; 400 naming the field; 503 when draining or full)
//	/debug/pprof/ net/http/pprof, loopback clients only, when Config.AdminPprof is set
//
// Every endpoint but /healthz and /readyz (the container's and the load
// balancer's probes) requires Config.AdminToken when one is set
// (Authorization: Bearer …; 401 otherwise).
func (w *Worker) AdminHandler() http.Handler {
	return requireToken(w.cfg.AdminToken, w.adminMux())
}

// unauthorizedReason is the 401's JSON reason: the worker knows its token,
// not where it was read from, so it names the stack's token and make dev's
// file.
const unauthorizedReason = "Authorization: Bearer <WSFLEET_ADMIN_TOKEN> required: the stack's admin token " +
	"(under make dev: .dev/admin-token, curl -H \"Authorization: Bearer $(cat .dev/admin-token)\" ...)"

// requireToken lets through the probes, and every other request only with
// the bearer token (compared in constant time); token "" lets all through.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			rw.Header().Set("WWW-Authenticate", `Bearer realm="wsfleet-admin"`)
			writeJSON(rw, http.StatusUnauthorized, map[string]string{"error": unauthorizedReason})
			return
		}
		next.ServeHTTP(rw, r)
	})
}

func (w *Worker) adminMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /stats", func(rw http.ResponseWriter, r *http.Request) {
		writeJSON(rw, http.StatusOK, w.Stats())
	})
	if w.cfg.AdminPprof {
		mountPprof(mux)
	}
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		st := w.state
		w.mu.Unlock()
		code := http.StatusOK
		if st != stateRunning && st != stateDraining {
			code = http.StatusServiceUnavailable
		}
		writeJSON(rw, code, map[string]string{"status": st.String(), "worker_id": w.cfg.WorkerID})
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		checks, ok := w.ready(ctx, w.deps.Clock.Now())
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		writeJSON(rw, code, map[string]any{"ready": ok, "checks": checks})
	})
	mux.HandleFunc("GET /status", func(rw http.ResponseWriter, r *http.Request) {
		writeJSON(rw, http.StatusOK, w.Status())
	})
	mux.HandleFunc("POST "+handoffPath, w.serveHandoff)
	mux.HandleFunc("GET "+handoffReadyPath, w.serveHandoffReady)
	mux.HandleFunc("POST "+standbyPath, w.serveStandbyAssign)
	mux.HandleFunc("DELETE "+standbyPath, w.serveStandbyDrop)
	mux.HandleFunc("POST "+standbyDroppedPath, w.serveStandbyDropped)
	mux.HandleFunc("POST "+standbyPositionsPath, w.serveStandbyPositions)
	mux.HandleFunc("POST "+ownerDeadPath, w.serveOwnerDead)
	return mux
}

// ready runs the readiness checks; each maps to "ok" or its error.
func (w *Worker) ready(ctx context.Context, now time.Time) (map[string]string, bool) {
	checks := map[string]string{}
	ok := true
	put := func(name string, err error) {
		if err != nil {
			checks[name] = err.Error()
			ok = false
			return
		}
		checks[name] = "ok"
	}
	w.mu.Lock()
	st := w.state
	w.mu.Unlock()
	if st != stateRunning {
		put("worker", errors.New(st.String()))
	} else {
		put("worker", nil)
	}
	// Stale after three reconcile passes without any table call.
	put("table", w.table.check(now, 3*w.cfg.ReconcileEvery+w.cfg.StoreTimeout))
	if w.consumer != nil {
		put("work_queue", w.consumer.Healthy())
	}
	if w.deps.Ready != nil {
		put("extra", w.deps.Ready(ctx))
	}
	return checks, ok
}

func writeJSON(rw http.ResponseWriter, code int, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	enc := json.NewEncoder(rw)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
