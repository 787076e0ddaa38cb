//go:build fleetsim

package fleetsim

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/testkit/pipenet"
	"github.com/wsfleet/wsfleet/workers/streamer"
)

// adminPort is the port of every worker's admin address on the fleet's
// mesh ("w-003:8081", the worker's WSFLEET_ADMIN_ADDR port).
const adminPort = "8081"

// serveAdmin gives w an admin listener of its own on the fleet's mesh, at
// the address its worker record advertises, and a hand-off client dialing
// through the mesh: the others' rebalancing moves, drains and takeovers
// reach it by POST /handoff (streamer.Worker.SimSetAdmin, -tags fleetsim).
// The client's timeout is the worker's own (1 s); no keep-alives, so no
// idle connection outlives a request in the bubble.
func (fl *Fleet) serveAdmin(id string, w *streamer.Worker) (*pipenet.Net, error) {
	addr := id + ":" + adminPort
	ln, err := fl.mesh.Listen(addr)
	if err != nil {
		return nil, err
	}
	mesh := &http.Transport{DialContext: fl.mesh.DialContext, DisableKeepAlives: true}
	client := &http.Client{Timeout: time.Second, Transport: countHandoffs{rt: mesh, n: &fl.handoffCalls}}
	w.SimSetAdmin(ln, addr, client)
	return ln, nil
}

// countHandoffs counts the POST /handoff requests a worker's client sends
// (its other calls, the standby protocol's, are not hand-offs).
type countHandoffs struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countHandoffs) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.URL.Path == "/handoff" {
		c.n.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// HandoffCalls are the POST /handoff requests the workers sent each other
// so far (a drain's, a rebalancing move's or a takeover's directed
// hand-off).
func (fl *Fleet) HandoffCalls() int64 { return fl.handoffCalls.Load() }
