// Hand-offs, the giver's side: the directed hand-off of one session to a
// receiver (a rebalancing move's, rebalance.go, or the shutdown's drain,
// drain.go): the tenure given, or released for the receiver and told. The
// receiver's side is handoffserve.go; a dead worker's sessions, takeover.go.

package streamer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/rebalance"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// handoffPath is the admin endpoint a rebalancing worker calls on the
// receiver of a move, so that it claims the session at once (POST, query
// connection_id). Any worker may be told to claim anything: the claim is
// the ordinary conditional acquire, which only the receiver (or anyone
// after the hand-off bound) can win.
const handoffPath = "/handoff"

// errNoAdminAddr: the receiver's record names no admin address.
var errNoAdminAddr = errors.New("no admin address")

// handoffTimes are a hand-off's steps: released, when the tenure was
// ended here (given: no write; else the release's write returned); at, when
// the receiver (or, failing that, the work queue) had been told (given: it
// had acquired); refused, when it was not given, how long the call that
// offered it took (before the release's write).
type handoffTimes struct {
	released, at time.Time
	refused      time.Duration
	given        bool
	// to is the receiver offered the session last (the move's, or its
	// Else when that one would not take it).
	to string
	// kept, when set, is the tenure of a rebalancing move whose receiver
	// would not take it, which this worker takes back (takeBack) once the
	// session is gone; why is the receiver's answer.
	kept *lease.Given
	why  error
}

// handOff finishes a directed hand-off (a rebalancing move, or the
// shutdown's): the session (closed, flushed) is given to its receiver
// (Keeper.Give: the tenure ends here without a write), which acquires it
// from that tenure and answers once it has (giveToReceiver): one write on
// the hand-off's path, the receiver's, where a release and an acquire were
// two. When the receiver answers that it will not take it (full or
// draining, or nobody listens at its address: receiverWontTake), a
// rebalancing move's session stays with this worker (handoffTimes.kept:
// takeBack acquires the given tenure again once the session is gone, one
// write, tens of milliseconds dark), since released for anyone it waited
// for a start notification's taker (2.2–2.7 s in chaos runs during a
// rolling restart, above the move's 1 s bound); the shutdown's is
// released for anyone with a start notification at once: a reservation
// for a worker that refused would only turn away every other worker that
// takes the notification (refused as reserved, the notification dropped as
// held elsewhere) until the bound lapsed, leaving the session to a
// reconcile pass. When it does not take it otherwise (a transient failure,
// a worker without given hand-offs), the tenure is released reserved for
// the receiver, which is told to claim it at once (a transient failure to
// tell it is retried: tellReceiverRetrying); if it cannot be told, a start
// notification lets it (or anyone, once the receiver is seen draining or
// not alive, or after the bound) find it, and reconciliation still would.
func (w *Worker) handOff(ctx context.Context, s *session.Session, move session.MoveTo) (handoffTimes, error) {
	h := s.Held()
	g, err := w.keeper.Give(h)
	if err != nil {
		return handoffTimes{}, err
	}
	out := handoffTimes{released: w.deps.Clock.Now(), to: move.To}
	fp := s.LastFingerprint()
	gerr := w.giveToReceiver(ctx, move.To, g, fp)
	if gerr != nil && receiverWontTake(gerr) && move.Shutdown && move.Else != "" && move.Else != move.To {
		// Another receiver of the shutdown's plan before the work queue:
		// a receiver refuses while its heartbeat is a little overdue,
		// which a loaded machine sees (the project's CI once, in
		// TestShutdownHandsSessionsToReceivers: the session then waited
		// for a reconcile pass). A 503 or a refused connection means it
		// sent no acquire; either way only one acquire of the given
		// tenure can land.
		if err := w.giveToReceiver(ctx, move.Else, g, fp); err == nil || !receiverWontTake(err) {
			s.Logger().Debug().Err(gerr).Str("to", move.To).Str("else", move.Else).Msg("hand-off: the receiver will not take it (offered to another)")
			move.To, out.to, gerr = move.Else, move.Else, err
		}
	}
	offered := w.deps.Clock.Now()
	reserveFor := move.To
	if gerr != nil && receiverWontTake(gerr) {
		if !move.Shutdown {
			// A rebalancing move: this worker keeps the session.
			w.rebal.moved(out.released)
			return handoffTimes{released: out.released, at: offered, kept: &g, why: gerr}, nil
		}
		reserveFor = ""
	}
	if gerr == nil {
		out.given = true
		w.keeper.GivenTaken(g)
	} else if err := w.keeper.HandoffGiven(ctx, g, reserveFor); errors.Is(err, lease.ErrLeaseLost) {
		// Taken after all: the receiver's acquire landed and its answer
		// was lost (or came after the call's deadline).
		out.given = true
		w.keeper.GivenTaken(g)
	} else if err != nil {
		return handoffTimes{}, errors.Join(gerr, err)
	} else {
		out.released, out.refused = w.deps.Clock.Now(), offered.Sub(out.released)
		s.Logger().Debug().Err(gerr).Str("to", move.To).Bool("reserved", reserveFor != "").Msg("hand-off: the receiver did not take the given tenure (released instead)")
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
	attempts, err := 0, gerr
	if reserveFor != "" {
		attempts, err = w.tellReceiverRetrying(ctx, move.To, h.ID(), fp)
	}
	if err != nil {
		if reserveFor != "" {
			s.Logger().Warn().Err(err).Str("to", move.To).Int("attempts", attempts).Msg("hand-off: tell the receiver (a start notification instead)")
		} else {
			s.Logger().Debug().Err(err).Str("to", move.To).Msg("hand-off: the receiver will not take it (released for anyone, a start notification)")
		}
		if perr := w.announceStart(ctx, h.ID(), h.Item().Generation, nil); perr != nil {
			return handoffTimes{}, errors.Join(err, perr)
		}
	}
	out.at = w.deps.Clock.Now()
	return out, nil
}

// announceStart publishes a start notification of session id at
// generation gen (0: any) for whichever worker takes it first (nothing
// without a work queue: reconciliation finds the session); prev, when set,
// is the dead or departed owner's tenure the session was found in, which
// the taker names in its acquire once it reads that owner not alive.
func (w *Worker) announceStart(ctx context.Context, id string, gen int64, prev *lease.Token) error {
	if w.handoffs == nil {
		return nil
	}
	n := notify.Notification{Type: schema.NotifyStart, ConnectionID: id, Generation: gen, SentAtMs: w.deps.Clock.Now().UnixMilli()}
	if prev != nil {
		n.PrevOwner, n.PrevEpoch = prev.Owner, prev.Epoch
	}
	return w.handoffs.Publish(ctx, n)
}

// takeBack acquires again the tenure g of a rebalancing move whose
// receiver would not take it (full, draining, gone: handOff), once its
// session is gone (runSession): the worker keeps the session, dark for the
// one write of the acquire, instead of leaving it to whichever worker takes
// a start notification (seconds later when the workers the notification
// ranks first are restarting). The acquire names the given tenure, as the
// receiver's would (its final checkpoint, no standby check); the move's
// rules are the rebalancer's, which tries again in a later round. When it
// cannot be taken back (this worker draining or full, a failed acquire),
// the tenure is released for anyone with a start notification, as a
// refused hand-off at shutdown is; when another worker has it, or the
// session was stopped or deleted, there is nothing left to do here (a
// stopped session's tenure is released).
func (w *Worker) takeBack(g lease.Given, gen int64) {
	id := g.Token.ConnectionID
	out, err := w.claim(w.hardCtx, pathGiven, id, nil, &g, 0, false)
	switch out {
	case claim.Acquired, claim.OwnedHere, claim.HeldElsewhere:
		return
	}
	ctx, cancel := context.WithTimeout(w.hardCtx, w.cfg.StoreTimeout*2)
	defer cancel()
	rerr := w.keeper.HandoffGiven(ctx, g, "")
	switch {
	case errors.Is(rerr, lease.ErrLeaseLost), errors.Is(rerr, lease.ErrNotFound):
		return
	case rerr != nil:
		w.log.Warn().Err(errors.Join(err, rerr)).Str("connection_id", id).Int64("lease_epoch", g.Token.Epoch).Stringer("outcome", out).
			Msg("rebalancing move: neither taken back nor released (the tenure lapses)")
		return
	}
	if out == claim.NotStarted {
		return
	}
	if perr := w.announceStart(ctx, id, gen, nil); perr != nil {
		w.log.Warn().Err(perr).Str("connection_id", id).Msg("rebalancing move: released for anyone, its start notification (reconciliation finds it)")
		return
	}
	w.log.Info().Err(err).Str("connection_id", id).Int64("lease_epoch", g.Token.Epoch).Stringer("outcome", out).
		Msg("rebalancing move: not taken back (released for anyone, a start notification)")
}

// directMoves plans directed moves of n sessions off worker from (this
// worker at its shutdown, or a worker it declared dead): spread over the
// alive workers that are not draining and can be told to claim (an admin
// address; this worker too when it is not from: it claims its part
// itself), a drain's in proportion to their room below their fair share
// (rebalance.Drain), a takeover's in proportion to their capacity
// (rebalance.Spread), so that each receiver claims its part at once
// instead of the fleet racing for start notifications. The alive workers are a bounded
// sample of the fleet's (all of them in a fleet of at most
// lease.FleetSampleSize others): a takeover's from the last refresh's
// membership (Keeper.FleetSample), a drain's from a listing made now
// (Keeper.FleetSampleListed: the replacements of a rolling deploy have
// just registered). The sessions the moves leave out
// (nobody has room) and all of them when the fleet cannot be read get a
// start notification instead.
func (w *Worker) directMoves(from string, n int) ([]rebalance.Move, error) {
	if n == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(w.hardCtx, w.cfg.StoreTimeout)
	defer cancel()
	sample := w.keeper.FleetSample
	if from == w.cfg.WorkerID {
		sample = w.keeper.FleetSampleListed
	}
	recs, err := sample(ctx, from, lease.FleetSampleSize)
	if err != nil {
		return nil, fmt.Errorf("read the fleet: %w", err)
	}
	var quiet map[string]bool
	if from != w.cfg.WorkerID {
		quiet = quietOnes(recs, w.deps.Clock.Now().UnixMilli())
	}
	ws, addrs := w.fleetView(recs, from, quiet)
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
	if from != w.cfg.WorkerID {
		// A takeover: one of many at an AZ's loss, planned at once from
		// the same records (rebalance.Spread).
		return rebalance.Spread(ws, from), nil
	}
	return rebalance.Drain(ws, from), nil
}

// fleetView is the fleet as shared/rebalance sees it: this worker (its own
// count, not its last heartbeat's) and every other worker that can be told
// to claim, with their admin addresses (receivers).
func (w *Worker) fleetView(recs []lease.WorkerRecord, exclude string, quiet map[string]bool) ([]rebalance.Worker, map[string]string) {
	w.mu.Lock()
	draining := w.state != stateRunning
	w.mu.Unlock()
	me := rebalance.Worker{ID: w.cfg.WorkerID, Load: w.owned(), Capacity: w.cfg.MaxSessions, Draining: draining}
	return receivers(me, recs, exclude, func(r lease.WorkerRecord) bool {
		return w.keeper.KnownGone(r.ID) || quiet[r.ID]
	})
}

// quietOnes are the workers of recs whose heartbeat went quiet
// (lease.HeartbeatQuiet), which a takeover leaves out of its receivers:
// at an AZ's loss a third of every takeover's sample had died with the
// declared worker, undeclared yet; the tells to them failed and their
// parts went to the work queue, claimed last (the fleet simulator at
// 1,000 × 100,000: 9,543 of 33,330 sessions, the recovery's slowest).
// None when more than half of them are: then this worker's own wall clock
// is the one off (a live worker's record is never older than a heartbeat
// period and a read), and leaving them out would leave it alone. Only a
// takeover reads it; a drain's and the fleet summary's plans keep every
// worker whose record says ALIVE, so a worker whose clock is off still
// receives moves and counts for a share.
func quietOnes(recs []lease.WorkerRecord, nowMs int64) map[string]bool {
	quiet := map[string]bool{}
	for _, r := range recs {
		if r.Alive() && lease.HeartbeatQuiet(r, nowMs) {
			quiet[r.ID] = true
		}
	}
	if 2*len(quiet) > len(recs) {
		return nil
	}
	return quiet
}

// receivers is me and every other worker of recs that can be told to claim:
// ALIVE in its record, with an admin address (a worker without one neither
// receives nor counts for a share), neither exclude (the worker whose
// sessions are being moved) nor one skip rules out: one this worker knows
// is gone, or a takeover's quiet one (quietOnes). The fleet is read from
// an index and eventually consistent reads, which lag on DynamoDB: a
// worker just declared dead (by this worker, for a takeover) still reads
// ALIVE there, and a session handed to it would stay dark until its
// reservation lapsed. Found on the DynamoDB model (chaos).
func receivers(me rebalance.Worker, recs []lease.WorkerRecord, exclude string, skip func(lease.WorkerRecord) bool) ([]rebalance.Worker, map[string]string) {
	ws := []rebalance.Worker{me}
	addrs := map[string]string{}
	for _, r := range recs {
		if r.ID == me.ID || r.ID == exclude || !r.Alive() || r.AdminAddr == "" || skip(r) {
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
	if fp != 0 {
		q.Set("fp", strconv.FormatUint(fp, 16))
	}
	return w.askReceiver(ctx, to, http.MethodPost, handoffPath, q, body, want, time.Second)
}

// askReceiver sends method path?q to worker to's admin server within
// timeout and wants the status want (a *tellStatusError otherwise).
func (w *Worker) askReceiver(ctx context.Context, to, method, path string, q url.Values, body io.Reader, want int, timeout time.Duration) error {
	addr := w.peerAddr(ctx, to)
	if addr == "" {
		return fmt.Errorf("%w for %s", errNoAdminAddr, to)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := w.peerCall(ctx, method, addr, path, q, body)
	if err != nil {
		return err
	}
	_ = res.Body.Close()
	if res.StatusCode != want {
		return &tellStatusError{to: to, status: res.Status, code: res.StatusCode}
	}
	return nil
}
