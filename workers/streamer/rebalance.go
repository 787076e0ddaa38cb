package streamer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
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

// rebalancer is the worker's view of the fleet's balance.
type rebalancer struct {
	mu        sync.Mutex
	share     float64 // this worker's fair share at the last round
	imbalance float64 // max load ÷ share at the last round
	roundAt   time.Time
	addrs     map[string]string // admin address by worker id, from the last round
	moves     []time.Time       // this worker's moves, kept for a minute
	client    *http.Client
}

// movesPerMin is how many sessions this worker moved over the last minute.
func (r *rebalancer) movesPerMin(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.moves = slices.DeleteFunc(r.moves, func(t time.Time) bool { return now.Sub(t) > time.Minute })
	return len(r.moves)
}

func (r *rebalancer) moved(now time.Time) {
	r.mu.Lock()
	r.moves = append(r.moves, now)
	r.mu.Unlock()
}

func (r *rebalancer) addr(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addrs[id]
}

// RebalanceStatus is the /status view of the last rebalancing round.
type RebalanceStatus struct {
	Share       float64   `json:"fair_share"`
	Imbalance   float64   `json:"imbalance"`
	MovesPerMin int       `json:"moves_per_min"`
	RoundAt     time.Time `json:"round_at,omitzero"`
}

func (w *Worker) rebalanceStatus() RebalanceStatus {
	n := w.rebal.movesPerMin(time.Now())
	w.rebal.mu.Lock()
	defer w.rebal.mu.Unlock()
	return RebalanceStatus{Share: w.rebal.share, Imbalance: w.rebal.imbalance, MovesPerMin: n, RoundAt: w.rebal.roundAt}
}

// rebalanceLoop runs a round every RebalanceEvery (±20 %) until ctx ends.
func (w *Worker) rebalanceLoop(ctx context.Context) {
	if w.cfg.RebalanceEvery <= 0 {
		return
	}
	for {
		d := time.Duration(float64(w.cfg.RebalanceEvery) * (0.8 + 0.4*rand.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		if err := w.rebalanceRound(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn().Err(err).Msg("rebalance round")
		}
	}
}

// rebalanceRound reads the alive workers' records, computes the fleet's
// plan (shared/rebalance: every worker computes the same one from the same
// records) and starts this worker's moves: the sessions held longest (at
// least MinHold) close with 1001 and are released reserved for their
// receiver.
func (w *Worker) rebalanceRound(ctx context.Context) error {
	w.mu.Lock()
	running := w.state == stateRunning
	w.mu.Unlock()
	if !running {
		return nil
	}
	recs, err := w.keeper.Fleet(ctx)
	if err != nil {
		return err
	}
	me := w.cfg.WorkerID
	ws, addrs := w.fleetView(recs)
	plan := rebalance.Compute(ws, rebalance.Settings{MaxMoves: w.cfg.RebalanceMaxMoves})
	now := time.Now()
	w.rebal.mu.Lock()
	w.rebal.share, w.rebal.imbalance, w.rebal.roundAt, w.rebal.addrs = plan.Share[me], plan.Imbalance, now, addrs
	w.rebal.mu.Unlock()
	w.reg.Set(schema.MetricImbalance, plan.Imbalance)
	moves := plan.MovesFrom(me)
	if len(moves) == 0 {
		return nil
	}
	movable := w.movable(w.deps.Clock.Now())
	n := 0
	// A few moves at a time: each one's dark time is its own close, flush,
	// release and the receiver's acquire and dial, not a queue of all the
	// round's writes at the table.
	sem := make(chan struct{}, movesInFlight)
	var wg sync.WaitGroup
	for _, m := range moves {
		for k := 0; k < m.Count && n < len(movable); k++ {
			s := movable[n]
			n++
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return nil
			}
			wg.Go(func() {
				defer func() { <-sem }()
				s.Interrupt(session.MoveTo{To: m.To})
				select {
				case <-w.sessionDone(s):
				case <-ctx.Done():
				}
			})
		}
	}
	wg.Wait()
	if n > 0 {
		w.log.Info().Int("moves", n).Float64("fair_share", plan.Share[me]).Int("load", ws[0].Load).
			Float64("imbalance", plan.Imbalance).Msg("rebalancing: handing sessions off")
	}
	return nil
}

// movesInFlight bounds the hand-offs of a round under way at once.
const movesInFlight = 8

// sessionDone is closed once s has ended and its end (release, hand-off)
// is written.
func (w *Worker) sessionDone(s *session.Session) <-chan struct{} { return s.Finished() }

// movable lists the sessions that may move now (held at least MinHold and
// still valid), the longest held first.
func (w *Worker) movable(now time.Time) []*session.Session {
	var out []*session.Session
	for _, s := range w.snapshot() {
		h := s.Held()
		if h.Err() == nil && now.Sub(h.AcquiredAt()) >= w.cfg.MinHold {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *session.Session) int { return a.Held().AcquiredAt().Compare(b.Held().AcquiredAt()) })
	return out
}

// handoffTimes are when a directed hand-off's release was written and when
// the receiver (or, failing that, the work queue) was told.
type handoffTimes struct{ released, at time.Time }

// handOff finishes a directed hand-off (a rebalancing move, or the
// shutdown's): the session (closed, flushed) is released reserved for its
// receiver, which is told to claim it at once; if it cannot be told, a
// start notification lets it (or anyone, once the receiver is seen
// draining or not alive, or after the bound) find it, and reconciliation
// still would.
func (w *Worker) handOff(ctx context.Context, s *session.Session, move session.MoveTo) (handoffTimes, error) {
	h := s.Held()
	if err := w.keeper.Handoff(ctx, h, move.To); err != nil {
		return handoffTimes{}, err
	}
	out := handoffTimes{released: time.Now()}
	if !move.Shutdown {
		w.rebal.moved(out.released)
		w.reg.Add(schema.MetricRebalanceMoves, 1)
	}
	w.reg.Add(schema.MetricReleased, 1)
	if err := w.tellReceiver(ctx, move.To, h.ID(), nil); err != nil {
		s.Logger().Warn().Err(err).Str("to", move.To).Msg("hand-off: tell the receiver (a start notification instead)")
		if w.handoffs != nil {
			n := notify.Notification{Type: schema.NotifyStart, ConnectionID: h.ID(), Generation: h.Item().Generation, SentAtMs: time.Now().UnixMilli()}
			if perr := w.handoffs.Publish(ctx, n); perr != nil {
				return handoffTimes{}, errors.Join(err, perr)
			}
		}
	}
	out.at = time.Now()
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
	ws, addrs := w.fleetView(recs)
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
// count, not its last heartbeat's) and every other alive worker that can be
// told to claim (a worker without an admin address neither receives nor
// counts for a share), with their admin addresses.
func (w *Worker) fleetView(recs []lease.WorkerRecord) ([]rebalance.Worker, map[string]string) {
	me := w.cfg.WorkerID
	w.mu.Lock()
	draining := w.state != stateRunning
	w.mu.Unlock()
	ws := []rebalance.Worker{{ID: me, Load: w.owned(), Capacity: w.cfg.MaxSessions, Draining: draining}}
	addrs := map[string]string{}
	for _, r := range recs {
		if r.ID != me && r.Alive() && r.AdminAddr != "" {
			addrs[r.ID] = r.AdminAddr
			ws = append(ws, rebalance.Worker{ID: r.ID, Load: r.Load, Capacity: r.Capacity, Draining: r.Draining})
		}
	}
	return ws, addrs
}

// tellReceiver asks worker to's admin server to claim id now. prev, when
// set, is the tenure of a worker this one declared dead (a takeover): the
// receiver checks that worker's record itself before taking it over.
func (w *Worker) tellReceiver(ctx context.Context, to, id string, prev *lease.Token) error {
	addr := w.rebal.addr(to)
	if addr == "" {
		return fmt.Errorf("no admin address for %s", to)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	q := url.Values{"connection_id": {id}}
	if prev != nil {
		q.Set("prev_owner", prev.Owner)
		q.Set("prev_epoch", strconv.FormatInt(prev.Epoch, 10))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+handoffPath+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	res, err := w.rebal.client.Do(req)
	if err != nil {
		return err
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		return fmt.Errorf("%s answered %s", to, res.Status)
	}
	return nil
}

// serveHandoff is the receiver's side: claim the session now, in the
// background (the caller does not wait for the dial).
func (w *Worker) serveHandoff(rw http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id := q.Get("connection_id")
	if !notify.ValidConnectionID(id) {
		writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "connection_id: not a valid connection id"})
		return
	}
	var prev *lease.Token
	if owner := q.Get("prev_owner"); owner != "" || q.Has("prev_epoch") {
		epoch, err := strconv.ParseInt(q.Get("prev_epoch"), 10, 64)
		switch {
		case owner == "":
			writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "prev_owner: required with prev_epoch"})
			return
		case err != nil || epoch < 1:
			writeJSON(rw, http.StatusBadRequest, map[string]string{"error": "prev_epoch: not a positive integer"})
			return
		}
		prev = &lease.Token{ConnectionID: id, Owner: owner, Epoch: epoch}
	}
	if w.Free() <= 0 {
		writeJSON(rw, http.StatusServiceUnavailable, map[string]string{"error": "not claiming (draining or full)"})
		return
	}
	sent := time.Now().UnixMilli()
	go func() {
		// A takeover's previous tenure is taken over only once this
		// worker has read its owner's record as not alive itself (once per
		// dead worker: the keeper remembers it); otherwise the claim is an
		// ordinary one, which checks the owner it finds.
		if prev != nil && !w.keeper.NotAlive(w.hardCtx, prev.Owner) {
			prev = nil
		}
		// A transient failure (a timeout, a condition that raced) is
		// retried a few times: until the reservation lapses nobody else
		// takes the session.
		for attempt := 0; ; attempt++ {
			// A move (no previous tenure named) is paced by its sender; a
			// takeover's part arrives all at once and is admitted like any
			// burst of claims.
			out, err := w.claim(w.hardCtx, id, prev, sent, prev != nil)
			if out != claim.Failed || attempt == 2 || w.hardCtx.Err() != nil {
				if err != nil {
					w.log.Warn().Err(err).Str("connection_id", id).Stringer("outcome", out).Msg("hand-off claim")
				}
				return
			}
			select {
			case <-w.hardCtx.Done():
				return
			case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
			}
		}
	}()
	writeJSON(rw, http.StatusAccepted, map[string]string{"connection_id": id})
}
