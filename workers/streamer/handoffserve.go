package streamer

// The receiver's side of a hand-off: POST /handoff, a given tenure or a
// tell, checked before anything moves.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
)

// serveHandoff is the receiver's side: claim the session now, in the
// background (the caller does not wait for the dial).
func (w *Worker) serveHandoff(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, ok := connectionParam(rw, q)
	if !ok {
		return
	}
	var prev *lease.Token
	if owner := q.Get("prev_owner"); owner != "" || q.Has("prev_epoch") {
		if owner == "" {
			writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "prev_owner: required with prev_epoch"})
			return
		}
		epoch, ok := positiveParam(rw, q, "prev_epoch")
		if !ok {
			return
		}
		prev = &lease.Token{ConnectionID: id, Owner: owner, Epoch: epoch}
	}
	given, ok := givenParam(rw, r, id)
	if !ok {
		return
	}
	if given != nil && prev != nil {
		writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "given_owner: not with prev_owner"})
		return
	}
	var fp uint64
	if v := q.Get("fp"); v != "" {
		var err error
		if fp, err = strconv.ParseUint(v, 16, 64); err != nil || fp == 0 {
			writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "fp: not a hexadecimal fingerprint"})
			return
		}
	}
	// A given tenure is refused by this worker's readiness (full,
	// draining, its heartbeat overdue: the giver keeps the session or
	// releases it for anyone); a tell or a takeover's part only when it
	// cannot claim at all (its claim retries while the table does not
	// answer).
	why := ""
	if given != nil {
		why = w.refusesHandoff(id, false)
	} else if w.free() <= 0 {
		why = "not claiming (draining or full)"
	}
	if why != "" {
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": why})
		return
	}
	done, ok := w.handoffIn.admit()
	if !ok {
		rw.Header().Set("Retry-After", "1")
		writeJSON(rw, http.StatusTooManyRequests, map[string]string{"error": "too many hand-offs: over the rate or in flight"})
		return
	}
	told := w.deps.Clock.Now()
	if fp != 0 {
		w.mu.Lock()
		w.alignFP[id] = fp
		w.mu.Unlock()
	}
	if given != nil {
		// Answered once the acquire is done, for the giver to know
		// whether to release the tenure instead.
		out, err := w.claim(w.hardCtx, pathGiven, id, nil, given, told.UnixMilli(), false)
		if out == claim.Acquired {
			done()
			writeJSON(rw, http.StatusOK, map[string]string{"connection_id": id, "outcome": out.String()})
			return
		}
		if err != nil {
			w.log.Debug().Err(err).Str("connection_id", id).Stringer("outcome", out).Msg("hand-off: the given tenure not taken")
		}
		// A transient failure (a store timeout, a throttle): this worker
		// keeps claiming it, as the giver's tell would have it do, with the
		// given tenure, which also takes the session once the giver
		// released it reserved for this worker; until then the giver's
		// tell finds the claim in flight and adds none. Found by the fleet
		// simulation (a deploy on a throttled table: the receiver's acquire
		// outlived the giver's call, the tell that followed was dropped as
		// already claiming, and the session stayed dark until its
		// reservation lapsed, 7 s).
		if !transientClaim(out, w.running()) || !w.ph.tasks.Go(func() {
			defer done()
			w.claimHandedOff(id, nil, given, told, false)
		}) {
			done()
		}
		writeJSON(rw, http.StatusConflict, map[string]string{"connection_id": id, "outcome": out.String()})
		return
	}
	if prev != nil {
		w.partToldAt.Store(told.UnixNano())
	}
	started := w.ph.tasks.Go(func() {
		defer done()
		w.takeHandedOff(id, prev, told)
	})
	if !started {
		done()
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": "not claiming (stopping)"})
		return
	}
	writeJSON(rw, http.StatusAccepted, map[string]string{"connection_id": id})
}

// takeHandedOff claims a hand-off told without a given tenure: a
// takeover's part (prev, the dead tenure) or a move. A part this worker
// cannot take (it filled up or began to stop while the part waited for
// its claim pace, or its claims failed) is announced on the work queue, as
// its declarer announces those no receiver took: other workers' reconcile
// passes leave a dead worker's sessions to its takeover for
// lease.Config.GoneGrace.
func (w *Worker) takeHandedOff(id string, prev *lease.Token, told time.Time) {
	// A takeover's previous tenure is taken over only once this worker has
	// read its owner's record as not alive itself (once per dead worker:
	// the keeper remembers it); otherwise the claim is an ordinary one,
	// which checks the owner it finds.
	if prev != nil && !w.keeper.NotAlive(w.hardCtx, prev.Owner) {
		prev = nil
	}
	// A move (no previous tenure named) is paced by its sender; a
	// takeover's part arrives all at once and is admitted like any burst
	// of claims.
	out := w.claimHandedOff(id, prev, nil, told, prev != nil)
	if prev == nil || !untaken(out) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.hardCtx), w.cfg.StoreTimeout)
	defer cancel()
	if err := w.announceStart(ctx, id, 0, prev); err != nil {
		w.log.Warn().Err(err).Str("connection_id", id).Stringer("outcome", out).Msg("takeover part not taken: notification")
	}
}

// partsFlowing reports whether a declarer told this worker a takeover's
// part within the last d: a death's takeover is placing its sessions over
// the fleet's receivers, as the work queue's announced tenures say it for
// what no receiver took (lease.Config.Announcing). Once a takeover's
// sample leaves out the undeclared dead (lease.HeartbeatQuiet), an AZ's
// loss announces almost nothing on the queue, and a reconcile pass that
// saw no announcement listed the dead workers' sessions while their
// receivers claimed them: in the fleet simulator's AZ loss at 300 ×
// 30,000, 15,268 of the passes' claims went to sessions another worker
// held by then, more than the budget's whole second ten seconds.
func (w *Worker) partsFlowing(d time.Duration) bool {
	at := w.partToldAt.Load()
	return at != 0 && w.deps.Clock.Now().Sub(time.Unix(0, at)) < d
}

// givenParam reads the given tenure of a hand-off request (?given=1, the
// tenure in the body: givenBody); nil when it names none. It answers 400
// itself, naming the field.
func givenParam(rw http.ResponseWriter, r *http.Request, id string) (*lease.Given, bool) {
	if r.URL.Query().Get("given") != "1" {
		return nil, true
	}
	var b givenBody
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "body: not a given tenure (owner, epoch, seq, secret)"})
		return nil, false
	}
	field := ""
	switch {
	case b.Owner == "":
		field = "owner: required"
	case b.Epoch < 1:
		field = "epoch: not a positive integer"
	case b.Seq < lease.NoSeq:
		field = "seq: a seq, or -1 for none"
	case b.Secret == "":
		field = "secret: required"
	}
	if field != "" {
		writeJSON(rw, http.StatusBadRequest, map[string]string{"error": field})
		return nil, false
	}
	return &lease.Given{Token: lease.Token{ConnectionID: id, Owner: b.Owner, Epoch: b.Epoch}, Seq: b.Seq, Secret: b.Secret}, true
}
