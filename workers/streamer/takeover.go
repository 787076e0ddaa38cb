package streamer

// A dead worker's sessions spread over the alive ones by the watcher that
// declared it dead.

import (
	"context"
	"slices"
	"sync"

	"github.com/wsfleet/wsfleet/shared/lease"
	"golang.org/x/sync/errgroup"
)

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
	for _, c := range announce {
		if err := w.announceStart(ctx, c.ConnectionID, 0); err != nil {
			log.Warn().Err(err).Str("connection_id", c.ConnectionID).Msg("takeover notification")
		}
	}
	slices.Reverse(announce)
	w.recon.ClaimAll(ctx, announce)
}
