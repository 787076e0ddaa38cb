package streamer

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/draw"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// rebalancer is the worker's view of the fleet's balance.
type rebalancer struct {
	mu        sync.Mutex
	share     float64 // this worker's fair share at the last round
	imbalance float64 // max load ÷ share at the last round
	roundAt   time.Time
	addrs     map[string]string // admin address by worker id, from the last round
	moves     []time.Time       // this worker's moves, kept for a minute
	client    *http.Client
	rnd       *draw.Stream // the rounds' jitter (Deps.Rand's "rebalance")
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
	// FleetReads: rounds that read every alive worker's record (no fleet
	// summary head: a new table, or a store that keeps none).
	FleetReads int64 `json:"fleet_reads"`
}

func (w *Worker) rebalanceStatus() RebalanceStatus {
	n := w.rebal.movesPerMin(w.deps.Clock.Now())
	w.rebal.mu.Lock()
	defer w.rebal.mu.Unlock()
	return RebalanceStatus{Share: w.rebal.share, Imbalance: w.rebal.imbalance, MovesPerMin: n, RoundAt: w.rebal.roundAt, FleetReads: w.fleetReads.Load()}
}

// rebalanceLoop runs a round every RebalanceEvery (±20 %) until ctx ends.
func (w *Worker) rebalanceLoop(ctx context.Context) {
	if w.cfg.RebalanceEvery <= 0 {
		return
	}
	for {
		d := time.Duration(float64(w.cfg.RebalanceEvery) * (0.8 + 0.4*w.rebal.rnd.Float64()))
		if clock.Sleep(ctx, w.deps.Clock, d) != nil {
			return
		}
		if err := w.rebalanceRound(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn().Err(err).Msg("rebalance round")
		}
	}
}

// rebalanceRound takes the fleet's plan (shared/rebalance) from the newest
// fleet summary head, which the summarizer computed from every alive
// worker's records (summaryplan.go; without a head it reads them itself),
// and starts this worker's moves: the sessions held longest (at
// least MinHold) close with 1001 and are released reserved for their
// receiver.
func (w *Worker) rebalanceRound(ctx context.Context) error {
	// A round on a table that throttles this worker's claims would add
	// writes (a release and a claim per move) to the throttling: it waits
	// until claims succeed again. One while a death's sessions are still
	// being placed (recovering) would spend the table's write headroom on
	// sessions that deliver, while others are dark: it waits until they
	// are placed.
	if !w.running() || w.pacer.Throttling() || w.recovering() {
		return nil
	}
	v, err := w.roundPlan(ctx)
	if err != nil {
		return err
	}
	now := w.deps.Clock.Now()
	w.rebal.mu.Lock()
	w.rebal.share, w.rebal.imbalance, w.rebal.roundAt, w.rebal.addrs = v.share, v.imbalance, now, v.addrs
	w.rebal.mu.Unlock()
	w.reg.Set(schema.MetricImbalance, v.imbalance)
	moves := v.moves
	if len(moves) == 0 {
		return nil
	}
	picker := w.newMovePicker(w.movable(w.deps.Clock.Now()))
	n := 0
	// A few moves at a time: each one's dark time is its own close, flush,
	// release and the receiver's acquire and dial, not a queue of all the
	// round's writes at the table.
	sem := make(chan struct{}, movesInFlight)
	var wg sync.WaitGroup
	var notReady atomic.Int32
	for _, m := range moves {
		for k := 0; k < m.Count; k++ {
			s, ok := picker.pick(m.To)
			if !ok {
				break
			}
			n++
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return nil
			}
			wg.Go(func() {
				defer func() { <-sem }()
				if !w.moveSession(ctx, s, m.To) {
					notReady.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if n > 0 {
		w.log.Info().Int("moves", n-int(notReady.Load())).Int32("not_ready", notReady.Load()).Float64("fair_share", v.share).Int("load", v.load).
			Float64("imbalance", v.imbalance).Msg("rebalancing: handing sessions off")
	}
	return nil
}

// recovering reports whether the work queue brings this worker announced
// tenures (claim.Consumer.Announcing within claim.FlowingWithin): a
// takeover's or a leaver's announcements, the sessions of a worker that
// died or left, are still being taken. A round then would spend the
// table's write headroom (a release and an acquire a move) on sessions
// that deliver while others are dark. (A move's acquire is not paced by
// the receiver's claim pace: its sender paces it; so the moves take
// nothing from the fleet's claim budget. In the fleet simulator's AZ loss
// at 100 × 100,000 the rounds moved about as many sessions onto the lost
// tasks' replacements as the AZ had held, 27,818, and with no rebalancing
// at all the recovery was no faster: p99 128.7 s against 122.4 s, one run
// each, docs/scale/100x100000-warm-az-norebalance.)
func (w *Worker) recovering() bool {
	return w.consumer != nil && w.consumer.Announcing(claim.FlowingWithin(w.cfg.ReconcileEvery))
}

// moveSession moves s to worker to (its close, flush and hand-off) and
// waits for its end; false when it was not moved. A session whose standby
// to holds moves only once to answers that it would promote it now
// (receiverReady): closed here, what a source that cannot replay sends
// until someone dials again is lost if to cannot acquire it (a short chaos
// run moved one to a worker cut off from DynamoDB for 3 s, whose record was
// still ALIVE: 18 messages lost).
func (w *Worker) moveSession(ctx context.Context, s *session.Session, to string) bool {
	move := session.MoveTo{To: to}
	if w.standbyWorkerOf(s.ID()) == to {
		if err := w.receiverReady(ctx, to, s.ID()); err != nil {
			s.Logger().Debug().Err(err).Str("to", to).Msg("rebalancing move: the standby's worker is not ready (the session stays)")
			return false
		}
		move.ReadyAt = w.deps.Clock.Now()
	}
	s.Interrupt(move)
	select {
	case <-w.sessionDone(s):
	case <-ctx.Done():
	}
	return true
}

// standbyWorkerOf is the worker holding the standby of session id, as
// this worker (its owner) placed or found it ("": none).
func (w *Worker) standbyWorkerOf(id string) string {
	w.sbMu.Lock()
	defer w.sbMu.Unlock()
	if st := w.ownStandbys[id]; st != nil {
		return st.worker
	}
	return ""
}

// movesInFlight bounds the hand-offs of a round under way at once.
const movesInFlight = 8

// sessionDone is closed once s has ended and its end (release, hand-off)
// is written.
func (w *Worker) sessionDone(s *session.Session) <-chan struct{} { return s.Finished() }

// movable lists the sessions that may move now (held at least MinHold,
// still valid), the longest held first (of two held as long, the smaller
// id). Whether the sink owes one acknowledgements is asked only of those a
// round picks (movePicker.pick).
func (w *Worker) movable(now time.Time) []*session.Session {
	var out []*session.Session
	for _, s := range w.snapshot() {
		h := s.Held()
		if h.Err() == nil && now.Sub(h.AcquiredAt()) >= w.cfg.MinHold {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *session.Session) int {
		return cmp.Or(a.Held().AcquiredAt().Compare(b.Held().AcquiredAt()), cmp.Compare(a.ID(), b.ID()))
	})
	return out
}

// movePicker picks the sessions of a round's moves: for a move to a
// worker, first the sessions whose standby that worker holds (their move
// is that standby's promotion: no dial, and nothing lost from a source that
// cannot replay), then the others without a standby, longest held first;
// never one whose sink has owed it an acknowledgement for the store
// timeout or longer.
//
// A session with a standby moves only to the standby's worker: moved
// anywhere else it would be dialed afresh after its release, and what a
// source that cannot replay sent in between is lost (TestShortChaos caught
// one message lost so: a rebalancing move to another worker just before a
// freeze of the old owner). If that worker takes no sessions this round,
// the session stays; the round moves others.
//
// Why not those: a hand-off flushes the sink before its release (finish:
// at most 2 × the store timeout), and with the destination holding
// requests the flush times out and the session is left for a takeover
// from its checkpoint, repeating what was delivered after it (make chaos
// SEED=4901 moved one during a sink freeze: 1 repeat, an owner change no
// fault explained). A sink that answers owes for a batch's wait (40 ms by
// default, at most batch.MaxPackWait = 1 s) and a round trip.
type movePicker[S interface{ ID() string }] struct {
	movable []S
	taken   []bool
	next    int              // the first index not yet looked at in order
	byTo    map[string][]int // the indexes whose standby is on that worker, in order
	standby []bool           // movable[i] has a standby (on a worker of byTo): it moves only there
	owing   sink.Owing       // nil: the sink holds nothing once Handle returned
	owedMax time.Duration
}

func (w *Worker) newMovePicker(movable []*session.Session) *movePicker[*session.Session] {
	byTo := map[string][]int{}
	w.sbMu.Lock()
	for i, s := range movable {
		if st := w.ownStandbys[s.ID()]; st != nil && st.worker != "" {
			byTo[st.worker] = append(byTo[st.worker], i)
		}
	}
	w.sbMu.Unlock()
	owing, _ := w.deps.Handler.(sink.Owing)
	return newPicker(movable, byTo, owing, w.cfg.StoreTimeout)
}

// newPicker is the picker of movable, byTo listing in order the indexes
// of the sessions whose standby is on each worker.
func newPicker[S interface{ ID() string }](movable []S, byTo map[string][]int, owing sink.Owing, owedMax time.Duration) *movePicker[S] {
	p := &movePicker[S]{movable: movable, taken: make([]bool, len(movable)), byTo: byTo, standby: make([]bool, len(movable)), owing: owing, owedMax: owedMax}
	for _, idx := range byTo {
		for _, i := range idx {
			p.standby[i] = true
		}
	}
	return p
}

// pick is the next session a move to worker to takes (false: none left).
func (p *movePicker[S]) pick(to string) (S, bool) {
	for idx := p.byTo[to]; len(idx) > 0; idx = p.byTo[to] {
		i := idx[0]
		p.byTo[to] = idx[1:]
		if p.take(i) {
			return p.movable[i], true
		}
	}
	for ; p.next < len(p.movable); p.next++ {
		if p.standby[p.next] {
			continue // moves only to its standby's worker
		}
		if p.take(p.next) {
			return p.movable[p.next], true
		}
	}
	var none S
	return none, false
}

// take marks movable[i] taken and reports whether a move may take it: not
// taken before, and its sink owing it nothing for owedMax or longer (a
// session refused so is not asked again this round).
func (p *movePicker[S]) take(i int) bool {
	if p.taken[i] {
		return false
	}
	p.taken[i] = true
	return p.owing == nil || p.owing.Owed(p.movable[i].ID()) < p.owedMax
}
