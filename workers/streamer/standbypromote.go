package streamer

// Hot standby, the promotion: when an owner is declared dead, the declarer
// promotes its own standbys and tells the workers holding the others (POST
// /standby/owner-dead), each acquiring with the dead tenure.

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// ownerDeadPath is the admin endpoint a worker that declared another dead
// calls on every alive worker (POST, query worker): the standbys they hold
// for the dead worker's sessions are promoted at once, without waiting
// for the takeover's claimers to find each standby alive and tell it.
const ownerDeadPath = "/standby/owner-dead"

// promotion is a standby this worker holds for a dead owner's session,
// and the dead tenure its claim names (nil when unknown: the Keeper then
// finds it).
type promotion struct {
	id   string
	prev *lease.Token
}

// standbysFor are the standbys this worker holds for owner's sessions.
func (w *Worker) standbysFor(owner string) []promotion {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ps []promotion
	for id, e := range w.standbys {
		if e.owner == owner {
			p := promotion{id: id}
			if e.ownerEpoch > 0 {
				p.prev = &lease.Token{ConnectionID: id, Owner: owner, Epoch: e.ownerEpoch}
			}
			ps = append(ps, p)
		}
	}
	return ps
}

// promote claims ps at once, unpaced (each is a promotion), in the
// background; told is when this worker learned of the death.
func (w *Worker) promote(ps []promotion, told time.Time) {
	for _, p := range ps {
		w.ph.tasks.Go(func() { w.claimHandedOff(p.id, p.prev, nil, told, false) })
	}
}

// serveOwnerDead is POST /standby/owner-dead?worker=…: this worker reads
// the named worker's record itself (once: the Keeper remembers a worker
// seen not alive) and, when it is not alive, claims every session it
// stands by for whose owner that worker was.
func (w *Worker) serveOwnerDead(rw http.ResponseWriter, r *http.Request) {
	dead := r.URL.Query().Get("worker")
	if dead == "" || dead == w.cfg.WorkerID {
		writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "worker: required, and not this worker"})
		return
	}
	ps := w.standbysFor(dead)
	if len(ps) == 0 {
		writeJSON(rw, http.StatusAccepted, map[string]int{"promotions": 0})
		return
	}
	told := w.deps.Clock.Now()
	started := w.ph.tasks.Go(func() {
		// The caller's word is not enough: the record is read here.
		if w.keeper.NotAliveNow(w.hardCtx, dead) {
			w.promote(ps, told)
		}
	})
	if !started {
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": "not claiming (stopping)"})
		return
	}
	writeJSON(rw, http.StatusAccepted, map[string]int{"promotions": len(ps)})
}

// announceDeath tells every worker this one can reach (its fleet view),
// except those in told, that dead is dead, so that each promotes the
// standbys it holds for dead's sessions at once; best effort, in the
// background (the takeover's claimers still tell each standby they find
// alive). It adds the workers it told to told.
func (w *Worker) announceDeath(dead string, told map[string]bool) {
	w.rebal.mu.Lock()
	addrs := make(map[string]string, len(w.rebal.addrs))
	for id, a := range w.rebal.addrs {
		if id != dead && id != w.cfg.WorkerID && !told[id] && !w.keeper.KnownGone(id) {
			addrs[id] = a
			told[id] = true
		}
	}
	w.rebal.mu.Unlock()
	for id, addr := range addrs {
		w.ph.tasks.Go(func() {
			ctx, cancel := context.WithTimeout(w.hardCtx, time.Second)
			defer cancel()
			if err := w.peerNotify(ctx, http.MethodPost, addr, ownerDeadPath, url.Values{"worker": {dead}}); err != nil {
				w.log.Debug().Err(err).Str("to", id).Str("dead_worker_id", dead).Msg("announce a death to the standbys")
			}
		})
	}
}
