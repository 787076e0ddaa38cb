//go:build fleetsim

package streamer

import (
	"net"
	"net/http"
	"sync"

	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// This file is the fleet simulator's seam (scripts/fleetsim), compiled only
// with -tags fleetsim: the shipped binary (built without the tag) has no way
// to swap the sessions' transport or the admin listener and hand-off client,
// or to crash a worker in-process; its sessions always dial through netguard
// (session.NewClient) and its admin server listens on Config.AdminAddr.

// SimSetSessionTransport makes every session of w dial through rt instead of
// the network (an in-memory source in a testing/synctest bubble). Call it
// before Run. fleetsim build only.
func (w *Worker) SimSetSessionTransport(rt http.RoundTripper) {
	w.env.Client = &http.Client{Transport: rt}
}

// SimConn is a session's connection and SimDialer what opens one
// (session.Conn, session.Dialer): a source that needs no socket implements
// them. fleetsim build only.
type (
	SimConn   = session.Conn
	SimDialer = session.Dialer
)

// SimSetSessionDialer makes every session of w open its connections through
// d (a source in a testing/synctest bubble that needs no socket, no HTTP
// and no WebSocket client: a light session) instead of the WebSocket
// handshake. Call it before Run. fleetsim build only.
func (w *Worker) SimSetSessionDialer(d SimDialer) {
	w.env.Dial = d
}

// SimCrash plays the data-plane half of a kill -9 of w: every session is left
// for the takeover (no close handshake, no flush, no release) at once. The
// caller cuts w off its store first and then cancels Run's context (whose
// shutdown then releases nothing: the worker is abandoned). fleetsim build
// only.
func (w *Worker) SimCrash() {
	w.abandoned.Store(true)
	for _, s := range w.snapshot() {
		s.Interrupt(session.ErrCrashed)
	}
}

// SimOwned is how many sessions w runs. fleetsim build only.
func (w *Worker) SimOwned() int { return w.owned() }

// SimSetAdmin serves w's admin endpoints (POST /handoff among them) on ln
// instead of a listener on Config.AdminAddr, advertises addr in w's worker
// record (where the others read where to hand sessions to it), and makes
// w's client of its peers (a rebalancing move, a drain's directed hand-off,
// a takeover handed to a receiver, the hot standby's calls) call the others
// through client: the fleet's in-memory network. Call it before Run.
// fleetsim build only.
func (w *Worker) SimSetAdmin(ln net.Listener, addr string, client *http.Client) {
	w.adminLn = ln
	w.cfg.AdvertiseAddr = addr
	w.rebal.client = client
}

// claimNotes are the claim observers of the workers that have one
// (SimOnClaim).
var claimNotes sync.Map // *Worker → func(path, id, outcome string)

// SimOnClaim calls f with every claim w makes, its path (claimpath.go:
// queue, reconcile, takeover, move, given, audit), its session and its
// outcome (acquired, held_elsewhere, …), as it ends; nil removes w's (a
// worker's observer ends with it). Call it before Run. fleetsim build
// only.
func (w *Worker) SimOnClaim(f func(path, id, outcome string)) {
	if f == nil {
		claimNotes.Delete(w)
		return
	}
	claimNotes.Store(w, f)
}

func (w *Worker) noteClaim(path claimPath, id string, out claim.Outcome) {
	if f, ok := claimNotes.Load(w); ok {
		f.(func(string, string, string))(string(path), id, out.String())
	}
}
