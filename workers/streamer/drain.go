package streamer

// The shutdown's drain: the held sessions handed to receivers, paced within
// the shutdown deadline.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/rebalance"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/waitfor"
)

// drain is the graceful shutdown's first phases: stop claiming (the claim
// and consume phases), hand every session off (the handoff phase: each
// one closed, released and announced), all within the deadline.
func (w *Worker) drain() error {
	ph := &w.ph
	deadline := w.deps.Clock.NewTimer(w.cfg.ShutdownDeadline)
	defer deadline.Stop()
	w.setState(stateDraining) // claims from now on are refused (a start is handed back)
	ph.claim.cancel()
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
	// A session whose receiver will not take it (full, draining, its
	// heartbeat overdue) is offered to another receiver of the plan
	// (otherReceiver) before the work queue.
	for ; directed < toStandby; directed++ {
		to, _ := w.standbyOf(ss[directed].ID())
		reasons[directed] = session.MoveTo{To: to, Shutdown: true, Else: otherReceiver(moves, to)}
	}
	plan := zerolog.Dict()
	for _, m := range moves {
		plan.Int(m.To, m.Count)
		for k := 0; k < m.Count && directed < len(ss); k++ {
			reasons[directed] = session.MoveTo{To: m.To, Shutdown: true, Else: otherReceiver(moves, m.To)}
			directed++
		}
	}
	for i := directed; i < len(ss); i++ {
		reasons[i] = session.ErrShutdown
	}
	w.log.Info().Int("sessions", len(ss)).Int("directed", directed).Int("to_standby", toStandby).Int("receivers", len(moves)).
		Dict("plan", plan).Int("in_flight", w.cfg.ShutdownInFlight).Dur("deadline", w.cfg.ShutdownDeadline).Msg("shutting down: handing sessions off")
	ph.handoff.begin("handoff", w.hardCtx)
	ph.handoff.Go(func() { w.paceHandoffs(ph.handoff.ctx, ss, reasons, w.deps.Clock.Now().Add(w.cfg.ShutdownDeadline/2)) })
	defer func() { // it ends once every session was interrupted
		ph.handoff.Close()
		ph.end(&ph.handoff)
	}()
	ph.claim.Close()
	ph.end(&ph.claim)
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
		ph.consume.cancel()
	}
	// The consumer ends after its poll in flight (bounded by QueueWait).
	if done, ok := waitfor.Until(ph.consume.Wait, deadline.C()); !ok {
		ph.consume.cancel()
		<-done
	}
	ph.consume.Close()
	ph.end(&ph.consume)
	return err
}

// otherReceiver is the receiver of moves after to (the first when to has
// no move: a standby's worker), "" when the plan has no other.
func otherReceiver(moves []rebalance.Move, to string) string {
	i := slices.IndexFunc(moves, func(m rebalance.Move) bool { return m.To == to })
	for k := 1; k <= len(moves); k++ {
		if o := moves[(i+k)%len(moves)].To; o != to {
			return o
		}
	}
	return ""
}

// paceHandoffs ends the sessions ss, each with its reason, a few at a time:
// the others keep streaming until their turn, so each session is dark only
// for its own hand-off (close, flush, release, the receiver's claim)
// instead of for the queue of all of them at the table. How many at once
// is shutdownWidth: at least ShutdownInFlight, more when the hand-offs seen
// so far say the rest would not be done by a third of the deadline. At
// rushAt (half the deadline) whatever is left is ended at once; ctx ends
// the waits for the hand-offs (the deadline's).
func (w *Worker) paceHandoffs(ctx context.Context, ss []*session.Session, reasons []error, rushAt time.Time) {
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
				case <-ctx.Done():
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

// announceLeftovers publishes a start notification for each STARTED session
// the table still says is this worker's once it has left (a flush or a
// release that failed at shutdown left it owned): no death is declared for
// a worker that left, so no takeover announces them, and the other
// workers' reconcile passes leave a gone worker's sessions to its takeover
// for lease.Config.GoneGrace. Their consumers take them over at once (the
// owner is LEFT: not alive).
func (w *Worker) announceLeftovers(ctx context.Context) {
	if w.handoffs == nil {
		return
	}
	owned, err := w.keeper.Audit(ctx, nil)
	if err != nil {
		w.log.Warn().Err(err).Msg("sessions left owned at shutdown: listing (reconciliation will find them)")
		return
	}
	var left []lease.Candidate
	for _, o := range owned {
		if o.DesiredState == schema.StateStarted {
			left = append(left, lease.Candidate{ConnectionID: o.ConnectionID, Prev: &o.Token})
		}
	}
	// All at once, batched, as a takeover's.
	w.announceAll(ctx, w.log, left)
}
