// Claim admission: room for a session, the claim itself, and starting and
// running the session it brings.

package streamer

import (
	"context"
	"errors"
	"fmt"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// Free implements claim.Claimer.
func (w *Worker) Free() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateRunning {
		return 0
	}
	return w.cfg.MaxSessions - len(w.sessions) - len(w.claiming)
}

// Claim implements claim.Claimer: admission (state, capacity, the claims
// per second limit), then the lease acquire, then the session.
func (w *Worker) Claim(ctx context.Context, id string, prev *lease.Token, sentAtMs int64) (claim.Outcome, error) {
	return w.claim(ctx, id, prev, sentAtMs, true)
}

// claim is Claim; paced false skips the claims-per-second limit, for a
// directed hand-off whose sender already paces its moves (a few in flight):
// the limit is there for the bursts nobody paces (a mass start, a takeover).
// While the store throttles claims (claimPacer) every claim waits for the
// pace, and a throttled claim slows it further.
func (w *Worker) claim(ctx context.Context, id string, prev *lease.Token, sentAtMs int64, paced bool) (claim.Outcome, error) {
	w.mu.Lock()
	switch {
	case w.state != stateRunning:
		w.mu.Unlock()
		return claim.Draining, nil
	case w.sessions[id] != nil || w.claiming[id]:
		w.mu.Unlock()
		return claim.OwnedHere, nil
	case len(w.sessions)+len(w.claiming) >= w.cfg.MaxSessions:
		w.mu.Unlock()
		return claim.AtCapacity, nil
	}
	w.claiming[id] = true
	w.mu.Unlock()
	started := false
	defer func() {
		if !started {
			w.mu.Lock()
			delete(w.claiming, id)
			kept := w.takeClaimMailLocked(id)
			w.mu.Unlock()
			w.rereadKept(kept)
			w.signalFreed()
		}
	}()
	w.pacer.setBase(w.claimShare())
	if paced || w.pacer.Throttling() {
		if err := w.pacer.Wait(ctx); err != nil {
			return claim.Draining, fmt.Errorf("claim %s: admission: %w", id, err)
		}
	}
	h, err := w.keeper.Acquire(ctx, id, prev)
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrHeld), errors.Is(err, lease.ErrLeaseLost):
		return claim.HeldElsewhere, nil
	case errors.Is(err, lease.ErrStopped), errors.Is(err, lease.ErrNotFound), errors.Is(err, lease.ErrFailed):
		return claim.NotStarted, nil
	case errors.Is(err, lease.ErrUntrusted), errors.Is(err, lease.ErrWorkerDead):
		return claim.Draining, nil
	case errors.Is(err, lease.ErrThrottled):
		w.pacer.Throttled()
		return claim.Failed, err
	default:
		return claim.Failed, err
	}
	w.pacer.Succeeded()
	w.reg.Add(schema.MetricAcquired, 1)
	started = true
	w.start(h, sentAtMs)
	return claim.Acquired, nil
}

func (w *Worker) signalFreed() {
	for _, ch := range []chan struct{}{w.freed, w.idle} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (w *Worker) start(h *lease.Held, sentAtMs int64) {
	s := session.New(w.env, h, sentAtMs)
	w.mu.Lock()
	delete(w.claiming, h.ID())
	kept := w.takeClaimMailLocked(h.ID())
	w.sessions[h.ID()] = s
	w.sessionsGen++
	st := w.state
	w.sessWG.Add(1)
	w.mu.Unlock()
	switch {
	case w.abandoned.Load():
		s.Interrupt(session.ErrCrashed)
	case st != stateRunning:
		s.Interrupt(session.ErrShutdown)
	}
	s.Logger().Info().Int64("last_seq", s.LastSeq()).Msg("lease acquired")
	go w.runSession(s)
	w.rereadKept(kept) // a STOP that came during the claim closes it now
}

func (w *Worker) runSession(s *session.Session) {
	defer w.sessWG.Done()
	reason := s.Run(w.hardCtx)
	w.finish(s, reason)
	s.MarkFinished()
	w.mu.Lock()
	if w.sessions[s.ID()] == s {
		delete(w.sessions, s.ID())
		w.sessionsGen++
	}
	w.mu.Unlock()
	w.signalFreed()
}
