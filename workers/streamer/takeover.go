package streamer

// A dead worker's sessions spread over the alive ones by the watcher that
// declared it dead.

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/notify"
	"golang.org/x/sync/errgroup"
)

// takeover moves the sessions of a worker this one declared dead the way a
// graceful shutdown does (directMoves): each alive worker with room below
// its fair share is told its part at once (POST /handoff with the dead
// tenure, which it checks) and this worker claims its own, so the fleet does
// not race for the same sessions (each lost race is a failed conditional
// write and a read, queued at the table with the winners' writes) and no
// worker claims more than its share. The sessions nobody could be told of
// are announced on the work queue, and the queue's consumers claim them.
func (w *Worker) takeover(ctx context.Context, dead string) {
	log := w.log.With().Str("dead_worker_id", dead).Logger()
	// The standbys of dead's sessions take theirs at once, before any
	// listing (no claimer needs to find each one alive and tell it): this
	// worker's own, and every other worker's it knows, told of the death.
	w.promote(w.standbysFor(dead), w.deps.Clock.Now())
	announced := map[string]bool{}
	w.announceDeath(dead, announced)
	cands, attempts, err := w.takeoverOf(ctx, dead)
	if err != nil {
		log.Warn().Err(err).Int("attempts", attempts).Msg("takeover: list sessions (reconciliation will)")
		w.keeper.EndGoneGrace(dead)
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
		// rebalance.Drain never plans more than it was given; a plan
		// that did must not take the worker down.
		part := cands[next : next+min(m.Count, len(cands)-next)]
		next += len(part)
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
	own.Go(func() {
		if _, unplaced := w.recon.ClaimAll(ctx, claimer{w, pathOwn}, mine); unplaced > 0 && ctx.Err() == nil {
			// Claims of its own part that failed (a throttled table):
			// this worker's reconcile passes list them at once, paced
			// like any claim, instead of after the grace.
			w.keeper.EndGoneGrace(dead)
			w.recon.Kick()
		}
	})
	var (
		mu       sync.Mutex
		announce = slices.Clone(cands[next:])
		refused  int
		firstErr error
		told     errgroup.Group
	)
	told.SetLimit(16)
	for to, part := range parts {
		for _, c := range part {
			told.Go(func() error {
				if err := w.tellReceiver(ctx, to, c.ConnectionID, c.Prev, 0); err != nil {
					mu.Lock()
					announce = append(announce, c)
					if refused++; firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
				return nil
			})
		}
	}
	_ = told.Wait()
	if refused > 0 {
		// One line per takeover: at a lost AZ, receivers past their
		// HandoffMaxInFlight refuse hundreds of each takeover's tells.
		log.Warn().Err(firstErr).Int("refused", refused).Msg("takeover: tells not taken by their receivers (start notifications instead)")
	}
	if w.announceAll(ctx, log, announce) > 0 {
		// Sessions no receiver took and no notification announced: this
		// worker's reconcile passes claim them at once (the others' once
		// the grace ends).
		w.keeper.EndGoneGrace(dead)
		w.recon.Kick()
	}
	// The announced ones are the queue's consumers' to claim: this
	// worker claiming them too (as many as its claim rate took in
	// claim.ListSpan, from the end of the list) lost 1,765 of 2,469 such
	// claims to those consumers in the fleet simulator's AZ loss at 100 ×
	// 100,000, each a refused conditional write in the claim pace.
	own.Wait()
}

// takeoverListAttempts bounds the takeover's listings of a dead worker's
// sessions (Keeper.TakeoverOf), and takeoverListPause is the pause between
// two. A listing that failed once (a request that outlived its deadline, a
// throttled query the SDK gave up on) mostly succeeds when sent again,
// while the fallback of a failed listing is slow: the declarer's reconcile
// passes alone list the dead worker's sessions (every other worker leaves
// them to the takeover for its grace) and claim them at this worker's
// share of the claim budget. In the fleet simulator's AZ loss at 1,000 ×
// 100,000, one declarer's listing timed out 8 s after the death and its
// reconcile pass claimed the dead worker's ~100 sessions alone at 5.2 a
// second: the recovery's slowest, 38 s after the kill (and the ones that
// pass left, 42 s), where the others were back within 25 s.
const (
	takeoverListAttempts = 3
	takeoverListPause    = 200 * time.Millisecond
)

// takeoverOf lists dead's sessions for its takeover (Keeper.TakeoverOf),
// trying up to takeoverListAttempts times; it returns the attempts made.
func (w *Worker) takeoverOf(ctx context.Context, dead string) ([]lease.Candidate, int, error) {
	for attempt := 1; ; attempt++ {
		cands, err := w.keeper.TakeoverOf(ctx, dead)
		if err == nil || attempt == takeoverListAttempts || ctx.Err() != nil {
			return cands, attempt, err
		}
		w.log.Debug().Err(err).Str("dead_worker_id", dead).Int("attempt", attempt).Msg("takeover: list sessions (again)")
		if clock.Sleep(ctx, w.deps.Clock, takeoverListPause) != nil {
			return nil, attempt, err
		}
	}
}

// takeoverAnnouncers bounds the start notifications of a takeover in
// flight: enough to fill every batch its coalescer sends at once
// (notify.MaxBatch × handoffSenders).
const takeoverAnnouncers = notify.MaxBatch * handoffSenders

// announceAll publishes a start notification for each of cands, at once
// (the coalescer batches them), without waiting for this worker's own
// claims: one after another, each waited for its own batch's round trip,
// and the last of a takeover's sessions that no receiver took (those
// beyond a receiver's HandoffMaxInFlight: hundreds of each dead worker's
// at 1,000 workers × 1,000,000 sessions) reached the work queue seconds
// late.
// It returns how many were not announced.
func (w *Worker) announceAll(ctx context.Context, log zerolog.Logger, cands []lease.Candidate) int {
	var (
		g      errgroup.Group
		failed atomic.Int64
	)
	g.SetLimit(takeoverAnnouncers)
	for _, c := range cands {
		g.Go(func() error {
			if err := w.announceStart(ctx, c.ConnectionID, 0, c.Prev); err != nil {
				failed.Add(1)
				log.Warn().Err(err).Str("connection_id", c.ConnectionID).Msg("takeover notification")
			}
			return nil
		})
	}
	_ = g.Wait()
	return int(failed.Load())
}
