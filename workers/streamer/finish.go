// The end of a tenure: release, hand-off, failure or abandon once a
// session closed.

package streamer

import (
	"context"
	"errors"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// finish ends a tenure after its session closed: release (with the final
// checkpoint) unless the lease is no longer ours or the worker abandoned it, and
// announce the hand-off after a graceful shutdown. A session whose source
// cannot be connected is not released but failed: the table records why,
// and no worker takes it until a new start.
//
// It returns the tenure of a rebalancing move whose receiver would not
// take it, for the caller to take back once the session is gone
// (takeBack); nil otherwise.
func (w *Worker) finish(s *session.Session, reason error) *lease.Given {
	h := s.Held()
	log := s.Logger()
	switch {
	case w.abandoned.Load() || errors.Is(reason, session.ErrCrashed):
		w.keeper.Abandon(h)
		log.Warn().Int64("last_seq", h.LastSeq()).Msg("session abandoned (left for the takeover)")
		return nil
	case errors.Is(reason, lease.ErrLeaseLost), errors.Is(reason, lease.ErrNotFound), errors.Is(reason, lease.ErrReleased),
		errors.Is(reason, lease.ErrWorkerDead):
		log.Warn().Err(reason).Int64("last_seq", h.LastSeq()).Msg("lease lost: session closed")
		return nil
	case !w.keeper.Trusted():
		// Fenced: no write as owner. The session is taken over once this
		// worker is declared dead, or audited back at the first heartbeat
		// that succeeds (observer.Heartbeat).
		w.keeper.Abandon(h)
		w.leftFenced.Store(true)
		log.Warn().Err(reason).Int64("last_seq", h.LastSeq()).Msg("session closed while fenced: left for the takeover")
		return nil
	}
	ctx, cancel := context.WithTimeout(w.hardCtx, w.cfg.StoreTimeout*2)
	defer cancel()
	t0 := w.deps.Clock.Now()
	if err := sink.FlushSession(ctx, w.deps.Handler, h.ID()); err != nil {
		w.keeper.Abandon(h)
		log.Error().Err(err).Msg("sink flush: session left for the takeover instead of released")
		return nil
	}
	t1 := w.deps.Clock.Now()
	if errors.Is(reason, session.ErrSourceFailed) || errors.Is(reason, session.ErrSinkRefused) {
		w.fail(ctx, s, reason)
		w.dropOwnStandby(ctx, h.ID())
		return nil
	}
	var move session.MoveTo
	if errors.As(reason, &move) {
		told, err := w.handOff(ctx, s, move)
		if err != nil {
			log.Warn().Err(err).Str("to", move.To).Int64("last_seq", h.LastSeq()).Bool("shutdown", move.Shutdown).Msg("directed hand-off")
			return nil
		}
		if told.kept != nil {
			log.Info().Err(told.why).Str("to", move.To).Int64("last_seq", h.LastSeq()).Dur("give_ms", told.at.Sub(told.released)).
				Msg("rebalancing move: the receiver will not take it (taken back)")
			return told.kept
		}
		move.To = told.to // the receiver that took it (or was told to)
		// release_ms: the release's write when the receiver did not take
		// the given tenure (0 when it did: no write), after the offer it
		// refused (give_ms); publish_ms: telling the receiver (for a given
		// tenure, until it had acquired).
		ev := log.Info().Str("to", move.To).Int64("last_seq", h.LastSeq()).Dur("flush_ms", t1.Sub(t0)).
			Dur("release_ms", told.released.Sub(t1)-told.refused).Dur("publish_ms", told.at.Sub(told.released)).Bool("given", told.given)
		if !told.given {
			ev = ev.Dur("give_ms", told.refused)
		}
		if !move.ReadyAt.IsZero() {
			// ready_ms: since the receiver said it would take it (a
			// session whose standby it holds), before the close.
			ev = ev.Dur("ready_ms", clock.Since(w.deps.Clock, move.ReadyAt))
		}
		if move.Shutdown {
			ev.Bool("handed_off", true).Msg("lease released")
		} else {
			ev.Msg("session handed off to rebalance")
		}
		return nil
	}
	if err := w.keeper.Release(ctx, h); err != nil {
		log.Warn().Err(err).Int64("last_seq", h.LastSeq()).Str("cause", reason.Error()).Msg("release")
		return nil
	}
	if errors.Is(reason, session.ErrStopRequested) {
		w.dropOwnStandby(ctx, h.ID())
	}
	t2 := w.deps.Clock.Now()
	w.reg.Add(schema.MetricReleased, 1)
	ev := log.Info().Int64("last_seq", h.LastSeq()).Str("cause", reason.Error()).
		Dur("flush_ms", t1.Sub(t0)).Dur("release_ms", t2.Sub(t1))
	if errors.Is(reason, session.ErrShutdown) && w.deps.Queue != nil {
		if err := w.announceStart(ctx, h.ID(), h.Item().Generation, nil); err != nil {
			log.Warn().Err(err).Msg("hand-off notification (reconciliation will find the released lease)")
		}
		ev = ev.Bool("handed_off", true).Dur("publish_ms", clock.Since(w.deps.Clock, t2))
	}
	ev.Msg("lease released")
	return nil
}

// fail records that s's source cannot be connected, or that its sink
// refused one of its messages for good (Keeper.Fail, with the acknowledged
// prefix as last_seq), so the session leaves this worker and stops counting
// toward anyone's capacity. When the session got a new generation since the
// failing dial, that configuration was never tried: the lease is released
// instead, for the next claim to dial it.
func (w *Worker) fail(ctx context.Context, s *session.Session, reason error) {
	f := s.LastError()
	if f.Text == "" || errors.Is(reason, session.ErrSinkRefused) {
		f = session.DialFailure{Text: reason.Error(), At: w.deps.Clock.Now(), Generation: s.Held().Item().Generation}
	}
	log := s.Logger()
	err := w.keeper.Fail(ctx, s.Held(), f.Generation, f.Text, f.At)
	switch {
	case errors.Is(err, lease.ErrNewGeneration):
		if rerr := w.keeper.Release(ctx, s.Held()); rerr != nil {
			log.Warn().Err(rerr).Msg("release after a failure of an older generation")
			return
		}
		w.reg.Add(schema.MetricReleased, 1)
		log.Info().Str("cause", reason.Error()).Msg("source failed at an older generation: lease released for the new one")
		return
	case err != nil:
		log.Warn().Err(err).Str("cause", reason.Error()).Msg("record the failed session (the lease expires instead)")
		return
	}
	w.reg.Add(schema.MetricSessionsFailed, 1)
	w.stats.failed.Add(1)
	msg := "session failed: source cannot be connected, waiting for a new start"
	switch {
	case errors.Is(reason, session.ErrSinkRefused):
		msg = "session failed: the sink refused a message for good, waiting for a new start"
	case errors.Is(reason, spec.ErrUnknownField):
		// The rollout rule (docs/worker.md, "Stored specs and rollouts"):
		// logged once, with the session's connection_id, as it fails.
		msg = "session failed: its stored spec has a field this worker does not know (deploy the workers first), waiting for a new start"
	}
	log.Warn().Int64("last_seq", s.Held().LastSeq()).Str("cause", reason.Error()).Msg(msg)
}
