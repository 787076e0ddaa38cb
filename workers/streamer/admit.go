// Claim admission: room for a session, the claim itself, and starting and
// running the session it brings.

package streamer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// free is the number of sessions the worker may still claim (claimer.Free).
func (w *Worker) free() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state != stateRunning {
		return 0
	}
	return w.cfg.MaxSessions - len(w.sessions) - len(w.claiming) - len(w.standbys)
}

// claim is admission (state, capacity, the claims per second limit), then
// the lease acquire, then the session (claimer.Claim); paced false skips
// the claims-per-second limit, for a directed hand-off whose sender already
// paces its moves (a few in flight): the limit is there for the bursts
// nobody paces (a mass start, a takeover).
// While the store throttles claims (claimPacer) every claim waits for the
// pace, and a throttled claim slows it further. given, when set, is the
// tenure its owner handed to this worker (a directed hand-off's receiver:
// Keeper.AcquireGiven), taken instead of an unowned session or prev's.
func (w *Worker) claim(ctx context.Context, path claimPath, id string, prev *lease.Token, given *lease.Given, sentAtMs int64, paced bool) (out claim.Outcome, err error) {
	defer func() { w.noteClaim(path, id, out) }()
	w.mu.Lock()
	switch {
	case w.state != stateRunning:
		w.mu.Unlock()
		return claim.Draining, nil
	case w.sessions[id] != nil || w.claiming[id]:
		w.mu.Unlock()
		return claim.OwnedHere, nil
	case w.standbys[id] == nil && len(w.sessions)+len(w.claiming)+len(w.standbys) >= w.cfg.MaxSessions:
		// A standby's promotion keeps the slot it held.
		w.mu.Unlock()
		return claim.AtCapacity, nil
	}
	w.claiming[id] = true
	// The promotion of a standby is no burst to pace: it is the one
	// receiver the takeover waits for.
	promotion := w.standbys[id] != nil
	w.mu.Unlock()
	started := false
	defer func() {
		if !started {
			w.mu.Lock()
			delete(w.claiming, id)
			delete(w.alignFP, id)
			kept := w.takeClaimMailLocked(id)
			w.mu.Unlock()
			w.rereadKept(kept)
			w.signalFreed()
		}
	}()
	w.pacer.setBase(w.claimShare())
	if (paced && !promotion) || w.pacer.Throttling() {
		var skip func() bool
		if prev != nil && (path == pathQueue || path == pathReconcile) {
			queued := w.deps.Clock.Now()
			skip = func() bool { return w.takenWhileQueued(ctx, id, *prev, queued) }
		}
		skipped, err := w.pacer.WaitUnless(ctx, skip)
		if err != nil {
			return claim.Draining, fmt.Errorf("claim %s: admission: %w", id, err)
		}
		if skipped {
			return claim.HeldElsewhere, nil
		}
	}
	var h *lease.Held
	if given != nil {
		h, err = w.keeper.AcquireGiven(ctx, id, *given)
	} else {
		h, err = w.keeper.Acquire(ctx, id, prev)
	}
	var standbyHeld *lease.StandbyHeldError
	var reserved *lease.ReservedError
	switch {
	case err == nil:
	case errors.As(err, &standbyHeld):
		// A takeover of a session whose standby's worker is alive: that
		// worker is the receiver (no dial, nothing lost); it is told to
		// claim at once.
		w.tellStandbyToClaim(standbyHeld.Standby.Worker, id, prev)
		return claim.HeldElsewhere, nil
	case errors.As(err, &reserved):
		// Reserved for another worker by a directed hand-off: the work
		// queue hands a start notification back until it lapses (its
		// receiver may never have been told: the hand-off fell back to the
		// notification).
		after := reserved.LapsesIn(w.deps.Clock.Now(), w.keeper.Config().HandoffBound)
		return claim.Reserved, &claim.ReservedUntil{After: after, Err: err}
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

// recheckAfter is how long a claim of a gone worker's session (one naming
// its tenure) that came from a listing or the work queue may wait for the
// claim pace before it reads the session again: one that queued longer
// was likely taken meanwhile, by the receiver its takeover told or by the
// queue's consumer of its announcement. (A takeover's told part and its
// declarer's own part are no one else's to claim: they are not read
// again.)
const recheckAfter = time.Second

// takenWhileQueued reports whether session id, which this worker would
// take over from tenure prev and whose claim queued since queued, is
// another tenure's by now: one consistent read of the session item (1
// read unit, no write and no slot of the claim pace, where the acquire
// refused would cost a write and a slot: in the fleet simulator's AZ loss
// at 1,000 × 1,000,000, 132,728 reconcile claims were refused so, the
// listing read before the claims' wait behind the told parts). A read that
// fails says nothing: the acquire decides, as before.
func (w *Worker) takenWhileQueued(ctx context.Context, id string, prev lease.Token, queued time.Time) bool {
	if w.deps.Clock.Now().Sub(queued) < recheckAfter {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, w.keeper.Config().RPCTimeout)
	defer cancel()
	it, err := lease.GetHead(rctx, w.keeper.Store(), id)
	if err != nil {
		return false
	}
	return it.Owner != "" && (it.Owner != prev.Owner || it.Epoch != prev.Epoch)
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
	var opts []session.Option
	sp, spErr := spec.Decode(h.Item().Spec)
	wanted := spErr == nil && sp.StandbyEnabled()
	if wanted && sp.SeqMode == source.SeqNone {
		// Its standby's window aligns on the fingerprint of the last
		// message delivered (a directed hand-off names it, the positions
		// carry it).
		opts = append(opts, session.Fingerprints())
	}
	placeNow := w.wantStandby(h.ID(), h.Item(), wanted)
	w.mu.Lock()
	stb := w.takeStandbyLocked(h.ID())
	fp, aligned := w.alignFP[h.ID()]
	delete(w.alignFP, h.ID())
	w.mu.Unlock()
	var s *session.Session
	if stb != nil {
		if aligned {
			stb.sb.AlignAfter(fp)
		}
		s = session.NewAdopting(w.env, h, sentAtMs, stb.sb, opts...)
		w.reg.Add(schema.MetricStandbyPromotions, 1)
		w.stats.promotions.Add(1)
	} else {
		s = session.New(w.env, h, sentAtMs, opts...)
	}
	w.mu.Lock()
	delete(w.claiming, h.ID())
	kept := w.takeClaimMailLocked(h.ID())
	w.sessions[h.ID()] = s
	w.sessionsGen++
	st := w.state
	w.mu.Unlock()
	switch {
	case w.abandoned.Load():
		s.Interrupt(session.ErrCrashed)
	case st != stateRunning:
		s.Interrupt(session.ErrShutdown)
	}
	s.Logger().Info().Int64("last_seq", s.LastSeq()).Bool("standby", stb != nil).Msg("lease acquired")
	w.ph.sessions.Go(func() { w.runSession(s) })
	if placeNow {
		w.wakePlacement()
	}
	w.rereadKept(kept) // a STOP that came during the claim closes it now
}

func (w *Worker) runSession(s *session.Session) {
	reason := s.Run(w.hardCtx)
	kept := w.finish(s, reason)
	// What this tenure knew of its standby ends with it (a next tenure
	// here starts from the item's).
	w.sbMu.Lock()
	delete(w.ownStandbys, s.ID())
	w.sbMu.Unlock()
	s.MarkFinished()
	w.mu.Lock()
	if w.sessions[s.ID()] == s {
		delete(w.sessions, s.ID())
		w.sessionsGen++
	}
	w.mu.Unlock()
	w.signalFreed()
	if kept != nil {
		w.takeBack(*kept, s.Held().Item().Generation)
	}
}
