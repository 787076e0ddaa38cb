// Hand-offs: the graceful shutdown's drain and its pacing, the takeover of a
// dead worker's sessions, and (with rebalance.go's rounds) the directed
// hand-off of one session to a receiver and the /handoff endpoint.

package streamer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/rebalance"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
	"golang.org/x/sync/errgroup"
)

// drain is the graceful shutdown: stop claiming, close and release every
// session (each one announcing its hand-off), all within the deadline.
func (w *Worker) drain(reconCancel, consumerCancel context.CancelFunc, recon, consumer *sync.WaitGroup) error {
	deadline := w.deps.Clock.NewTimer(w.cfg.ShutdownDeadline)
	defer deadline.Stop()
	w.setState(stateDraining) // claims from now on are refused (a start is handed back)
	reconCancel()
	close(w.consumerStop)
	// The standbys this worker holds are dropped (their owners place them
	// elsewhere); the sessions it owns that have a standby go to it: no
	// dial, and the window goes on after the last delivered message.
	w.closeStandbys(errStandbyShutdown)
	ss := w.snapshot()
	toStandby := w.standbyFirst(ss)
	moves, ferr := w.directMoves(w.cfg.WorkerID, len(ss)-toStandby)
	if ferr != nil {
		w.log.Warn().Err(ferr).Msg("shutdown: sessions released for anyone instead of handed to a receiver")
	}
	reasons := make([]error, len(ss))
	directed := 0
	for ; directed < toStandby; directed++ {
		to, _ := w.standbyOf(ss[directed].ID())
		reasons[directed] = session.MoveTo{To: to, Shutdown: true}
	}
	for _, m := range moves {
		for k := 0; k < m.Count && directed < len(ss); k++ {
			reasons[directed] = session.MoveTo{To: m.To, Shutdown: true}
			directed++
		}
	}
	for i := directed; i < len(ss); i++ {
		reasons[i] = session.ErrShutdown
	}
	w.log.Info().Int("sessions", len(ss)).Int("directed", directed).Int("to_standby", toStandby).Int("receivers", len(moves)).
		Int("in_flight", w.cfg.ShutdownInFlight).Dur("deadline", w.cfg.ShutdownDeadline).Msg("shutting down: handing sessions off")
	var paced sync.WaitGroup
	paced.Go(func() { w.paceHandoffs(ss, reasons, w.deps.Clock.Now().Add(w.cfg.ShutdownDeadline/2)) })
	defer paced.Wait() // it ends once every session was interrupted
	recon.Wait()
	var err error
	// Sessions started by claims already in flight see stateDraining and
	// are handed off too; wait until no session and no claim is left.
	if !w.waitIdle(deadline.C()) {
		left := w.snapshot()
		err = fmt.Errorf("shutdown deadline %s passed with %d sessions not released", w.cfg.ShutdownDeadline, len(left))
		w.log.Error().Int("sessions", len(left)).Msg("shutdown deadline passed: abandoning the remaining sessions")
		w.abandoned.Store(true)
		for _, s := range left {
			s.Interrupt(session.ErrCrashed)
		}
		w.hardCancel()
		consumerCancel()
	}
	// The consumer ends after its poll in flight (bounded by QueueWait).
	done := make(chan struct{})
	go func() { consumer.Wait(); close(done) }()
	select {
	case <-done:
	case <-deadline.C():
		consumerCancel()
		<-done
	}
	return err
}

// paceHandoffs ends the sessions ss, each with its reason, a few at a time:
// the others keep streaming until their turn, so each session is dark only
// for its own hand-off (close, flush, release, the receiver's claim)
// instead of for the queue of all of them at the table. How many at once
// is shutdownWidth: at least ShutdownInFlight, more when the hand-offs seen
// so far say the rest would not be done by a third of the deadline. At
// rushAt (half the deadline) whatever is left is ended at once.
func (w *Worker) paceHandoffs(ss []*session.Session, reasons []error, rushAt time.Time) {
	clk := w.deps.Clock
	rush := clk.NewTimer(clock.Until(clk, rushAt))
	defer rush.Stop()
	target := clk.Now().Add(w.cfg.ShutdownDeadline / 3)
	done := make(chan time.Duration, len(ss)) // each hand-off's duration; never blocks
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	running := 0
	var avg time.Duration // moving average of the hand-offs' durations
	for i := 0; i < len(ss); {
		if running < shutdownWidth(len(ss)-i, avg, clock.Until(clk, target), w.cfg.ShutdownInFlight) {
			s, reason := ss[i], reasons[i]
			i++
			running++
			start := clk.Now()
			s.Interrupt(reason)
			inFlight.Go(func() {
				select {
				case <-s.Finished():
				case <-w.hardCtx.Done():
				}
				done <- clock.Since(clk, start)
			})
			continue
		}
		select {
		case d := <-done:
			running--
			if avg == 0 {
				avg = d
			} else {
				avg = (3*avg + d) / 4
			}
		case <-rush.C():
			for j := i; j < len(ss); j++ {
				ss[j].Interrupt(reasons[j])
			}
			return
		}
	}
}

// shutdownWidth is how many hand-offs a shutdown keeps in flight with
// remaining sessions still to start, each taking about avg (0: none seen
// yet), and left until it should be done: enough to finish in time, never
// fewer than floor, everything once the time is up.
func shutdownWidth(remaining int, avg, left time.Duration, floor int) int {
	switch {
	case left <= 0:
		return remaining
	case avg <= 0:
		return max(1, floor)
	}
	need := int(math.Ceil(float64(remaining) * float64(avg) / float64(left)))
	return min(max(need, floor, 1), max(remaining, 1))
}

// waitIdle waits until the worker has no session and no claim in flight,
// or until deadline fires (false).
func (w *Worker) waitIdle(deadline <-chan time.Time) bool {
	for {
		w.mu.Lock()
		idle := len(w.sessions) == 0 && len(w.claiming) == 0
		w.mu.Unlock()
		if idle {
			return true
		}
		select {
		case <-w.idle:
		case <-deadline:
			return false
		}
	}
}

// takeover moves the sessions of a worker this one declared dead the way a
// graceful shutdown does (directMoves): each alive worker with room below
// its fair share is told its part at once (POST /handoff with the dead
// tenure, which it checks) and this worker claims its own, so the fleet does
// not race for the same sessions (each lost race is a failed conditional
// write and a read, queued at the table with the winners' writes) and no
// worker claims more than its share. The sessions nobody could be told of
// are announced on the work queue, and this worker claims them too, from
// the other end of the list than the queue hands them out.
func (w *Worker) takeover(ctx context.Context, dead string) {
	log := w.log.With().Str("dead_worker_id", dead).Logger()
	// The standbys of dead's sessions take theirs at once, before any
	// listing (no claimer needs to find each one alive and tell it): this
	// worker's own, and every other worker's it knows, told of the death.
	w.promote(w.standbysFor(dead), w.deps.Clock.Now())
	announced := map[string]bool{}
	w.announceDeath(dead, announced)
	cands, err := w.keeper.TakeoverOf(ctx, dead)
	if err != nil {
		log.Warn().Err(err).Msg("takeover: list sessions (reconciliation will)")
		w.recon.Kick()
		return
	}
	moves, err := w.directMoves(dead, len(cands))
	if err != nil {
		log.Warn().Err(err).Msg("takeover: sessions announced on the work queue instead of handed to receivers")
	}
	// The workers its takeover just read (directMoves) that the first
	// announcement missed.
	w.announceDeath(dead, announced)
	var mine []lease.Candidate
	parts := map[string][]lease.Candidate{}
	next := 0
	for _, m := range moves {
		part := cands[next : next+m.Count]
		next += m.Count
		if m.To == w.cfg.WorkerID {
			mine = append(mine, part...)
		} else {
			parts[m.To] = append(parts[m.To], part...)
		}
	}
	log.Info().Int("sessions", len(cands)).Int("own", len(mine)).Int("receivers", len(parts)).Int("unplaced", len(cands)-next).
		Msg("taking over: handing sessions to receivers")
	// Its own part is claimed while the others are told theirs.
	var own sync.WaitGroup
	own.Go(func() { w.recon.ClaimAll(ctx, mine) })
	var (
		mu       sync.Mutex
		announce = slices.Clone(cands[next:])
		told     errgroup.Group
	)
	told.SetLimit(16)
	for to, part := range parts {
		for _, c := range part {
			told.Go(func() error {
				if err := w.tellReceiver(ctx, to, c.ConnectionID, c.Prev, 0); err != nil {
					log.Warn().Err(err).Str("connection_id", c.ConnectionID).Str("to", to).Msg("takeover: tell the receiver (a start notification instead)")
					mu.Lock()
					announce = append(announce, c)
					mu.Unlock()
				}
				return nil
			})
		}
	}
	_ = told.Wait()
	own.Wait()
	if len(announce) == 0 {
		return
	}
	if w.handoffs != nil {
		now := w.deps.Clock.Now().UnixMilli()
		for _, c := range announce {
			n := notify.Notification{Type: schema.NotifyStart, ConnectionID: c.ConnectionID, SentAtMs: now}
			if err := w.handoffs.Publish(ctx, n); err != nil {
				log.Warn().Err(err).Str("connection_id", c.ConnectionID).Msg("takeover notification")
			}
		}
	}
	slices.Reverse(announce)
	w.recon.ClaimAll(ctx, announce)
}

// handoffPath is the admin endpoint a rebalancing worker calls on the
// receiver of a move, so that it claims the session at once (POST, query
// connection_id). Any worker may be told to claim anything: the claim is
// the ordinary conditional acquire, which only the receiver (or anyone
// after the hand-off bound) can win.
const handoffPath = "/handoff"

// handoffTimes are a hand-off's steps: released, when the tenure was
// ended here (given: no write; else the release's write returned); at, when
// the receiver (or, failing that, the work queue) had been told (given: it
// had acquired); refused, when it was not given, how long the call that
// offered it took (before the release's write).
type handoffTimes struct {
	released, at time.Time
	refused      time.Duration
	given        bool
}

// handOff finishes a directed hand-off (a rebalancing move, or the
// shutdown's): the session (closed, flushed) is given to its receiver
// (Keeper.Give: the tenure ends here without a write), which acquires it
// from that tenure and answers once it has (giveToReceiver): one write on
// the hand-off's path, the receiver's, where a release and an acquire were
// two. When the receiver does not take it (it cannot be reached, it is full
// or draining, a worker without given hand-offs), the tenure is released
// reserved for the receiver, which is told to claim it at once (a transient
// failure to tell it is retried: tellReceiverRetrying); if it cannot be
// told, a start notification lets it (or anyone, once the receiver is seen
// draining or not alive, or after the bound) find it, and reconciliation
// still would.
func (w *Worker) handOff(ctx context.Context, s *session.Session, move session.MoveTo) (handoffTimes, error) {
	h := s.Held()
	g, err := w.keeper.Give(h)
	if err != nil {
		return handoffTimes{}, err
	}
	out := handoffTimes{released: w.deps.Clock.Now()}
	fp := s.LastFingerprint()
	gerr := w.giveToReceiver(ctx, move.To, g, fp)
	offered := w.deps.Clock.Now()
	if gerr == nil {
		out.given = true
	} else if err := w.keeper.HandoffGiven(ctx, g, move.To); errors.Is(err, lease.ErrLeaseLost) {
		// Taken after all: the receiver's acquire landed and its answer
		// was lost (or came after the call's deadline).
		out.given = true
	} else if err != nil {
		return handoffTimes{}, errors.Join(gerr, err)
	} else {
		out.released, out.refused = w.deps.Clock.Now(), offered.Sub(out.released)
		s.Logger().Debug().Err(gerr).Str("to", move.To).Msg("hand-off: the receiver did not take the given tenure (released for it instead)")
	}
	if !move.Shutdown {
		w.rebal.moved(out.released)
		w.reg.Add(schema.MetricRebalanceMoves, 1)
	}
	w.reg.Add(schema.MetricReleased, 1)
	if out.given {
		out.at = w.deps.Clock.Now()
		return out, nil
	}
	if attempts, err := w.tellReceiverRetrying(ctx, move.To, h.ID(), fp); err != nil {
		s.Logger().Warn().Err(err).Str("to", move.To).Int("attempts", attempts).Msg("hand-off: tell the receiver (a start notification instead)")
		if w.handoffs != nil {
			n := notify.Notification{Type: schema.NotifyStart, ConnectionID: h.ID(), Generation: h.Item().Generation, SentAtMs: w.deps.Clock.Now().UnixMilli()}
			if perr := w.handoffs.Publish(ctx, n); perr != nil {
				return handoffTimes{}, errors.Join(err, perr)
			}
		}
	}
	out.at = w.deps.Clock.Now()
	return out, nil
}

// directMoves plans directed moves of n sessions off worker from (this
// worker at its shutdown, or a worker it declared dead) with
// rebalance.Drain: spread over the alive workers that are not draining and
// can be told to claim (an admin address; this worker too when it is not
// from: it claims its part itself), in proportion to their room below their
// fair share, so that each receiver claims its part at once instead of the
// fleet racing for start notifications. The sessions the moves leave out
// (nobody has room) and all of them when the fleet cannot be read get a
// start notification instead.
func (w *Worker) directMoves(from string, n int) ([]rebalance.Move, error) {
	if n == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(w.hardCtx, w.cfg.StoreTimeout)
	defer cancel()
	recs, err := w.keeper.Fleet(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the fleet: %w", err)
	}
	ws, addrs := w.fleetView(recs, from)
	if from == w.cfg.WorkerID {
		ws[0].Load = n // Drain counts from as draining
	} else {
		ws = append(ws, rebalance.Worker{ID: from, Load: n, Capacity: max(n, w.cfg.MaxSessions), Draining: true})
	}
	w.rebal.mu.Lock()
	if w.rebal.addrs == nil {
		w.rebal.addrs = map[string]string{}
	}
	maps.Copy(w.rebal.addrs, addrs)
	w.rebal.mu.Unlock()
	return rebalance.Drain(ws, from), nil
}

// fleetView is the fleet as shared/rebalance sees it: this worker (its own
// count, not its last heartbeat's) and every other worker that can be told
// to claim, with their admin addresses (receivers).
func (w *Worker) fleetView(recs []lease.WorkerRecord, exclude string) ([]rebalance.Worker, map[string]string) {
	w.mu.Lock()
	draining := w.state != stateRunning
	w.mu.Unlock()
	me := rebalance.Worker{ID: w.cfg.WorkerID, Load: w.owned(), Capacity: w.cfg.MaxSessions, Draining: draining}
	return receivers(me, recs, exclude, w.keeper.KnownGone)
}

// receivers is me and every other worker of recs that can be told to claim:
// ALIVE in its record, with an admin address (a worker without one neither
// receives nor counts for a share), neither exclude (the worker whose
// sessions are being moved) nor one this worker knows is gone. The fleet is
// read from an index and eventually consistent reads, which lag on
// DynamoDB: a worker just declared dead (by this worker, for a takeover)
// still reads ALIVE there, and a session handed to it would stay dark
// until its reservation lapsed. Found on the DynamoDB model (chaos).
func receivers(me rebalance.Worker, recs []lease.WorkerRecord, exclude string, gone func(string) bool) ([]rebalance.Worker, map[string]string) {
	ws := []rebalance.Worker{me}
	addrs := map[string]string{}
	for _, r := range recs {
		if r.ID == me.ID || r.ID == exclude || !r.Alive() || r.AdminAddr == "" || gone(r.ID) {
			continue
		}
		addrs[r.ID] = r.AdminAddr
		ws = append(ws, rebalance.Worker{ID: r.ID, Load: r.Load, Capacity: r.Capacity, Draining: r.Draining})
	}
	return ws, addrs
}

// tellReceiver asks worker to's admin server to claim id now. prev, when
// set, is the tenure of a worker this one declared dead (a takeover): the
// receiver checks that worker's record itself before taking it over. fp,
// when not 0, is the fingerprint of the last message the session delivered
// (a directed hand-off of a seq_mode none session with a standby): the
// receiver's standby window goes on after it.
func (w *Worker) tellReceiver(ctx context.Context, to, id string, prev *lease.Token, fp uint64) error {
	q := url.Values{"connection_id": {id}}
	if prev != nil {
		q.Set("prev_owner", prev.Owner)
		q.Set("prev_epoch", strconv.FormatInt(prev.Epoch, 10))
	}
	return w.callReceiver(ctx, to, q, fp, nil, http.StatusAccepted)
}

// giveToReceiver asks worker to's admin server to take the tenure g, which
// this worker gave (Keeper.Give), and returns nil only once the receiver
// answered that it acquired the session (200): any other answer, or none,
// leaves the tenure to the caller's Keeper.HandoffGiven, which loses to the
// receiver's acquire if that landed after all. fp as for tellReceiver.
func (w *Worker) giveToReceiver(ctx context.Context, to string, g lease.Given, fp uint64) error {
	// The tenure rides in the body, not the URL: its secret must never
	// reach a log (an HTTP client's error names the URL).
	body, err := json.Marshal(givenBody{Owner: g.Token.Owner, Epoch: g.Token.Epoch, Seq: g.Seq, Secret: g.Secret})
	if err != nil {
		return fmt.Errorf("encode the given tenure: %w", err)
	}
	q := url.Values{"connection_id": {g.Token.ConnectionID}, "given": {"1"}}
	return w.callReceiver(ctx, to, q, fp, bytes.NewReader(body), http.StatusOK)
}

// givenBody is a given tenure in a hand-off request's body (lease.Given).
type givenBody struct {
	Owner  string `json:"owner"`
	Epoch  int64  `json:"epoch"`
	Seq    int64  `json:"seq"`
	Secret string `json:"secret"`
}

// callReceiver posts a hand-off to worker to's admin server (within a
// second) and wants the status want.
func (w *Worker) callReceiver(ctx context.Context, to string, q url.Values, fp uint64, body io.Reader, want int) error {
	addr := w.peerAddr(ctx, to)
	if addr == "" {
		return fmt.Errorf("no admin address for %s", to)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if fp != 0 {
		q.Set("fp", strconv.FormatUint(fp, 16))
	}
	res, err := w.peerCall(ctx, http.MethodPost, addr, handoffPath, q, body)
	if err != nil {
		return err
	}
	_ = res.Body.Close()
	if res.StatusCode != want {
		return &tellStatusError{to: to, status: res.Status, code: res.StatusCode}
	}
	return nil
}

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
	if w.Free() <= 0 {
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": "not claiming (draining or full)"})
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
		out, err := w.claim(w.hardCtx, id, nil, given, told.UnixMilli(), false)
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
		if !transientClaim(out, w.running()) || !w.routines.Go(func() {
			defer done()
			w.claimHandedOff(id, nil, given, told, false)
		}) {
			done()
		}
		writeJSON(rw, http.StatusConflict, map[string]string{"connection_id": id, "outcome": out.String()})
		return
	}
	started := w.routines.Go(func() {
		defer done()
		// A takeover's previous tenure is taken over only once this
		// worker has read its owner's record as not alive itself (once per
		// dead worker: the keeper remembers it); otherwise the claim is an
		// ordinary one, which checks the owner it finds.
		if prev != nil && !w.keeper.NotAlive(w.hardCtx, prev.Owner) {
			prev = nil
		}
		// A move (no previous tenure named) is paced by its sender; a
		// takeover's part arrives all at once and is admitted like any
		// burst of claims.
		w.claimHandedOff(id, prev, nil, told, prev != nil)
	})
	if !started {
		done()
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": "not claiming (stopping)"})
		return
	}
	writeJSON(rw, http.StatusAccepted, map[string]string{"connection_id": id})
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
