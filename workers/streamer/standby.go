// Hot standby, the holder's side: the standbys this worker holds for
// sessions other workers own. An owner asks for one (POST /standby); this
// worker writes the assignment (lease.Keeper.AssignStandby, conditional on
// the session's generation and its standby epoch), dials the session's
// source with a connection that never delivers (session.Standby), re-reads
// the session item every StandbyCheckEvery (the backstop under the
// owner's calls: a stop, a new generation, another standby assigned, the
// checkpoint its window trims to) and drops it (DropStandby) when the
// owner asks (DELETE /standby), the session stops, the source refuses a
// second connection (standby_refused) or the worker shuts down. A claim of
// a session this worker stands by for adopts the standby's connection and
// window (start): the promotion, with no dial.

package streamer

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// standbyPath is the admin endpoint an owner calls on the worker it wants
// as a session's standby (POST: connection_id, generation, owner_zone,
// any_zone, and prev_worker/prev_epoch naming a standby it replaces) and to
// drop it (DELETE: connection_id, standby_epoch).
const standbyPath = "/standby"

// Why a standby ends.
var (
	errStandbyDropped  = errors.New("standby dropped: its owner asked")
	errStandbyFenced   = errors.New("standby superseded: the session item names another standby")
	errStandbyStopped  = errors.New("standby dropped: the session is stopped, failed or gone")
	errStandbyShutdown = errors.New("standby dropped: the worker is shutting down")
	errStandbyReplaced = errors.New("standby replaced by a newer assignment of this worker")
)

// standbyHeld is one standby this worker holds.
type standbyHeld struct {
	sb  *session.Standby
	tok lease.StandbyToken
	gen int64
	// owner and ownerEpoch are the tenure it stands by for, as the item
	// said at the assignment or the last check, or the owner's last
	// positions post (under the Worker's mu): what a promotion names as
	// the dead tenure.
	owner      string
	ownerEpoch int64
	// ownerAddr is the owner's admin address as it said when it asked
	// ("": the fleet view's).
	ownerAddr string
	// checkAt is when the backstop re-reads the session item next (under
	// the Worker's mu).
	checkAt time.Time
}

// serveStandbyAssign is POST /standby: become the standby of a session.
// 200 with the standby epoch once the assignment is written (the dial goes
// on in the background); 409 when the session cannot have this worker as
// its standby (another holds it, the owner is here, the zone is the
// owner's, the source refused one at this generation, a newer generation,
// stopped); 503 when this worker cannot take one now (draining, full, the
// table unavailable).
func (w *Worker) serveStandbyAssign(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, ok := connectionParam(rw, q)
	if !ok {
		return
	}
	gen, ok := positiveParam(rw, q, "generation")
	if !ok {
		return
	}
	var prev *lease.StandbyToken
	if pw := q.Get("prev_worker"); pw != "" || q.Has("prev_epoch") {
		if pw == "" {
			writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "prev_worker: required with prev_epoch"})
			return
		}
		pe, ok := positiveParam(rw, q, "prev_epoch")
		if !ok {
			return
		}
		prev = &lease.StandbyToken{ConnectionID: id, Worker: pw, Epoch: pe}
	}
	if oz := q.Get("owner_zone"); oz != "" && oz == w.cfg.Zone && q.Get("any_zone") != "1" {
		writeJSON(rw, http.StatusConflict, map[string]string{"error": "same zone as the owner", "code": "same_zone"})
		return
	}
	w.mu.Lock()
	st := w.state
	owner := w.sessions[id] != nil || w.claiming[id]
	cur := w.standbys[id]
	full := len(w.sessions)+len(w.claiming)+len(w.standbys) >= w.cfg.MaxSessions
	w.mu.Unlock()
	switch {
	case st != stateRunning:
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": "not taking standbys (draining)"})
		return
	case owner:
		writeJSON(rw, http.StatusConflict, map[string]string{"error": "this worker owns the session", "code": "owner"})
		return
	case cur != nil && cur.gen == gen:
		writeJSON(rw, http.StatusOK, map[string]any{"connection_id": id, "standby_epoch": cur.tok.Epoch, "zone": w.cfg.Zone})
		return
	case cur == nil && full:
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": "not taking standbys (full)"})
		return
	}
	tok, it, err := w.keeper.AssignStandby(r.Context(), id, gen, prev)
	if err != nil {
		var held *lease.StandbyHeldError
		switch {
		case errors.As(err, &held):
			writeJSON(rw, http.StatusConflict, map[string]any{"error": err.Error(), "code": "standby_held",
				"standby_worker": held.Standby.Worker, "standby_epoch": held.Standby.Epoch})
		case errors.Is(err, lease.ErrStandbyRefused):
			writeJSON(rw, http.StatusConflict, map[string]string{"error": err.Error(), "code": "standby_refused"})
		case errors.Is(err, lease.ErrNewGeneration), errors.Is(err, lease.ErrStopped), errors.Is(err, lease.ErrNotFound),
			errors.Is(err, lease.ErrFailed), errors.Is(err, lease.ErrNoOwner):
			writeJSON(rw, http.StatusConflict, map[string]string{"error": err.Error(), "code": "not_standing_by"})
		default:
			w.log.Warn().Err(err).Str("connection_id", id).Msg("standby: assign")
			writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": "the table did not take the assignment"})
		}
		return
	}
	// The assignment's write returns the session item, not its spec or its
	// checkpoint: one consistent read of both (what a dial needs).
	gctx, cancel := context.WithTimeout(r.Context(), w.cfg.StoreTimeout)
	it, err = w.keeper.Store().Get(gctx, id)
	cancel()
	if err == nil && (it.Standby != tok.Worker || it.StandbyEpoch != tok.Epoch) {
		err = lease.ErrStandbyLost
	}
	if err != nil {
		w.dropStandbyToken(tok, 0, "")
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": "read the session after the assignment: " + err.Error()})
		return
	}
	sp, err := spec.Decode(it.Spec)
	if err != nil {
		w.dropStandbyToken(tok, 0, "the stored spec does not decode")
		writeJSON(rw, http.StatusConflict, map[string]string{"error": "the stored spec does not decode", "code": "not_standing_by"})
		return
	}
	// Its promotion need not read the configuration again.
	w.keeper.StandbySpec(tok, it.Spec)
	age, bytes := sp.StandbyWindow()
	e := &standbyHeld{
		sb:  session.NewStandby(w.env, it, w.cfg.WorkerID, tok.Epoch, session.Window{MaxAge: age, MaxBytes: bytes}),
		tok: tok, gen: it.Generation, owner: it.Owner, ownerEpoch: it.Epoch, ownerAddr: q.Get("owner_addr"), checkAt: w.deps.Clock.Now().Add(w.standbyCheckDelay()),
	}
	w.mu.Lock()
	if w.state != stateRunning {
		w.mu.Unlock()
		w.dropStandbyToken(tok, 0, errStandbyShutdown.Error())
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": "not taking standbys (draining)"})
		return
	}
	old := w.standbys[id]
	w.standbys[id] = e
	w.mu.Unlock()
	if old != nil {
		old.sb.Close(errStandbyReplaced)
	}
	if !w.ph.tasks.Go(func() { w.runStandby(e) }) {
		w.mu.Lock()
		if w.standbys[id] == e {
			delete(w.standbys, id)
		}
		w.mu.Unlock()
		w.dropStandbyToken(tok, 0, errStandbyShutdown.Error())
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": "not taking standbys (stopping)"})
		return
	}
	w.standbyLog(tok).Info().Str("owner", it.Owner).Int64("generation", it.Generation).Msg("standby assigned")
	writeJSON(rw, http.StatusOK, map[string]any{"connection_id": id, "standby_epoch": tok.Epoch, "zone": w.cfg.Zone})
}

// serveStandbyDrop is DELETE /standby: the owner no longer wants this
// standby (its session stopped or failed).
func (w *Worker) serveStandbyDrop(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, ok := connectionParam(rw, q)
	if !ok {
		return
	}
	epoch, ok := positiveParam(rw, q, "standby_epoch")
	if !ok {
		return
	}
	w.mu.Lock()
	e := w.standbys[id]
	w.mu.Unlock()
	if e == nil || e.tok.Epoch != epoch {
		writeJSON(rw, http.StatusNotFound, map[string]string{"error": "no such standby here"})
		return
	}
	e.sb.Close(errStandbyDropped)
	writeJSON(rw, http.StatusAccepted, map[string]string{"connection_id": id})
}

// runStandby runs e's connection until it ends, then writes what its end
// says: nothing after a promotion (the acquire removed it) or when another
// assignment superseded it; a drop otherwise, with standby_refused when the
// source refused a second connection.
func (w *Worker) runStandby(e *standbyHeld) {
	err := e.sb.Run(w.hardCtx)
	w.mu.Lock()
	tok, gen := e.tok, e.gen // a new generation's check may have moved them
	if w.standbys[tok.ConnectionID] == e {
		delete(w.standbys, tok.ConnectionID)
	}
	w.mu.Unlock()
	log := w.standbyLog(tok)
	switch {
	case errors.Is(err, session.ErrPromoted):
		return
	case errors.Is(err, errStandbyFenced), errors.Is(err, errStandbyReplaced):
		log.Info().Err(err).Msg("standby ended")
	case errors.Is(err, session.ErrStandbyRefused):
		w.reg.Add(schema.MetricStandbyRefused, 1)
		w.stats.standbyRefused.Add(1)
		log.Warn().Err(err).Msg("standby refused by the source: the session goes on without one")
		w.dropStandbyToken(tok, gen, "the source refused a second connection")
		w.tellOwnerDropped(e.owner, e.ownerAddr, tok, gen)
	case w.abandoned.Load():
		// A worker that crashed writes nothing more.
	default:
		log.Info().Err(err).Msg("standby dropped")
		w.dropStandbyToken(tok, 0, session.ErrorText(err))
		if !errors.Is(err, errStandbyDropped) && !errors.Is(err, errStandbyStopped) {
			w.tellOwnerDropped(e.owner, e.ownerAddr, tok, 0)
		}
	}
}

// dropStandbyToken writes the end of standby t (refusedGen > 0: the source
// refused it at that generation). A standby already gone is done.
func (w *Worker) dropStandbyToken(t lease.StandbyToken, refusedGen int64, reason string) {
	ctx, cancel := context.WithTimeout(w.hardCtx, w.cfg.StoreTimeout)
	defer cancel()
	if err := w.keeper.DropStandby(ctx, t, refusedGen, reason); err != nil && !errors.Is(err, lease.ErrStandbyLost) {
		w.standbyLog(t).Warn().Err(err).Msg("standby: drop (the owner replaces it when it sees this worker gone; the item keeps naming it meanwhile)")
	}
}

// standbyLog is t's logger.
func (w *Worker) standbyLog(t lease.StandbyToken) *zerolog.Logger {
	l := w.log.With().Str("connection_id", t.ConnectionID).Int64("standby_epoch", t.Epoch).Logger()
	return &l
}

// closeStandbys drops every standby this worker holds (its shutdown: the
// owners place them elsewhere).
func (w *Worker) closeStandbys(reason error) {
	w.mu.Lock()
	held := make([]*standbyHeld, 0, len(w.standbys))
	for _, e := range w.standbys {
		held = append(held, e)
	}
	w.mu.Unlock()
	for _, e := range held {
		e.sb.Close(reason)
	}
}

// takeStandby removes and returns the standby this worker holds for id
// (nil: none), for its promotion.
func (w *Worker) takeStandbyLocked(id string) *standbyHeld {
	e := w.standbys[id]
	if e != nil {
		delete(w.standbys, id)
	}
	return e
}

// StandbyView is the /status view of a standby this worker holds.
type StandbyView struct {
	ConnectionID string `json:"connection_id"`
	Owner        string `json:"owner"`
	Epoch        int64  `json:"standby_epoch"`
	Generation   int64  `json:"generation"`
	session.StandbyStatus
}

// standbyViews are the standbys this worker holds, by connection id.
func (w *Worker) standbyViews() []StandbyView {
	w.mu.Lock()
	held := make([]*standbyHeld, 0, len(w.standbys))
	for _, e := range w.standbys {
		held = append(held, e)
	}
	out := make([]StandbyView, 0, len(held))
	for _, e := range held {
		out = append(out, StandbyView{ConnectionID: e.tok.ConnectionID, Owner: e.owner, Epoch: e.tok.Epoch, Generation: e.gen})
	}
	w.mu.Unlock()
	for i, e := range held {
		out[i].StandbyStatus = e.sb.Status()
	}
	slices.SortFunc(out, func(a, b StandbyView) int { return strings.Compare(a.ConnectionID, b.ConnectionID) })
	return out
}

// standbyTotals are how many standbys this worker holds and what their
// windows hold (the metrics).
func (w *Worker) standbyTotals() (n int, bytes int64) {
	w.mu.Lock()
	held := make([]*session.Standby, 0, len(w.standbys))
	for _, e := range w.standbys {
		held = append(held, e.sb)
	}
	w.mu.Unlock()
	for _, sb := range held {
		bytes += sb.Status().Bytes
	}
	return len(held), bytes
}

// standbyDroppedPath is the admin endpoint a standby's worker calls on the
// session's owner once it dropped the standby (POST: connection_id,
// standby_epoch, refused_gen when the source refused it), so that the
// owner places another (or, refused, none) without waiting to see the
// standby's worker gone.
const standbyDroppedPath = "/standby/dropped"

// tellOwnerDropped tells owner that standby t was dropped (refusedGen > 0:
// refused by the source at that generation); best effort.
func (w *Worker) tellOwnerDropped(owner, addr string, t lease.StandbyToken, refusedGen int64) {
	if addr == "" {
		addr = w.peerAddr(w.hardCtx, owner)
	}
	if addr == "" {
		return
	}
	ctx, cancel := context.WithTimeout(w.hardCtx, time.Second)
	defer cancel()
	q := url.Values{"connection_id": {t.ConnectionID}, "standby_epoch": {strconv.FormatInt(t.Epoch, 10)}}
	if refusedGen > 0 {
		q.Set("refused_gen", strconv.FormatInt(refusedGen, 10))
	}
	if err := w.peerNotify(ctx, http.MethodPost, addr, standbyDroppedPath, q); err != nil {
		w.standbyLog(t).Debug().Err(err).Str("owner", owner).Msg("standby: tell the owner it was dropped (it sees this worker's drop when it next places one)")
	}
}

// serveStandbyDropped is POST /standby/dropped: the standby of a session
// this worker owns was dropped by its worker.
func (w *Worker) serveStandbyDropped(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, ok := connectionParam(rw, q)
	if !ok {
		return
	}
	epoch, ok := positiveParam(rw, q, "standby_epoch")
	if !ok {
		return
	}
	var refused int64
	if q.Has("refused_gen") {
		if refused, ok = positiveParam(rw, q, "refused_gen"); !ok {
			return
		}
	}
	w.sbMu.Lock()
	if st := w.ownStandbys[id]; st != nil && st.epoch == epoch {
		st.worker, st.epoch = "", 0
		st.refused = max(st.refused, refused)
	}
	w.sbMu.Unlock()
	writeJSON(rw, http.StatusAccepted, map[string]string{"connection_id": id})
}
