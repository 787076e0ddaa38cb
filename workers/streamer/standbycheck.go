package streamer

// Hot standby, the holder's backstop: every held standby's session re-read
// at its own pace (a stop, a new generation, a new owner, the owner gone),
// one worker-wide loop, no timer per standby.

import (
	"context"
	"errors"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// standbyCheckDelay is the time until a standby's next backstop read: the
// check interval, jittered by up to a quarter so that standbys assigned
// together do not read together. 0 interval: never (a year).
func (w *Worker) standbyCheckDelay() time.Duration {
	every := w.cfg.StandbyCheckEvery
	if every <= 0 {
		return 365 * 24 * time.Hour
	}
	return every - time.Duration(w.standbyRnd.Int64N(int64(every/4)+1))
}

// standbyCheckLoop is the backstop: each standby re-reads its session
// item every StandbyCheckEvery.
func (w *Worker) standbyCheckLoop(ctx context.Context) {
	if w.cfg.StandbyCheckEvery <= 0 {
		return
	}
	t := newTick(w.deps.Clock, max(w.cfg.StandbyCheckEvery/8, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.next()
		}
		now := w.deps.Clock.Now()
		var due []*standbyHeld
		w.mu.Lock()
		for _, e := range w.standbys {
			if !now.Before(e.checkAt) {
				e.checkAt = now.Add(w.standbyCheckDelay())
				due = append(due, e)
			}
		}
		w.mu.Unlock()
		for _, e := range due {
			if ctx.Err() != nil {
				return
			}
			w.checkStandby(ctx, e)
		}
	}
}

// checkStandby re-reads e's session item and follows it. The check reads
// the session item alone (lease.GetHead: one read unit, not two with the
// spec item, and half the SDK's allocations, which at one check a standby
// every 30 s set how far a holder's heap grows between collections); the
// spec is read only when the generation moved.
func (w *Worker) checkStandby(ctx context.Context, e *standbyHeld) {
	rctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	it, err := lease.GetHead(rctx, w.keeper.Store(), e.tok.ConnectionID)
	cancel()
	switch {
	case !standbyRead(e, err):
		return
	case it.Standby != e.tok.Worker || it.StandbyEpoch != e.tok.Epoch:
		// Another standby, or none: ended. Not when the read shows this
		// standby's promotion applied while this worker's acquire of the
		// session is in flight (the read came between the promotion's
		// write and its reply): the acquire takes the connection. A chaos
		// run closed it just before the acquire returned, and the new
		// tenure dialed again: 17 messages of the standby's window were
		// lost.
		if !lease.PromotionApplied(&it, e.tok) || !w.claimingNow(e.tok.ConnectionID) {
			e.sb.Close(errStandbyFenced)
		}
		return
	case it.DesiredState != schema.StateStarted || it.Failed():
		e.sb.Close(errStandbyStopped)
		return
	}
	if it.LastSeq != lease.NoSeq {
		e.sb.Trim(it.LastSeq)
	}
	if it.Owner != "" {
		w.mu.Lock()
		e.owner, e.ownerEpoch = it.Owner, it.Epoch
		w.mu.Unlock()
	}
	if it.Generation == e.gen {
		return
	}
	// A new generation: this worker stands by for it too (a new standby
	// epoch), dialing the new configuration, which the whole item holds.
	gctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	it, err = w.keeper.Store().Get(gctx, e.tok.ConnectionID)
	cancel()
	if !standbyRead(e, err) || it.Generation == e.gen {
		return
	}
	actx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	tok, nit, err := w.keeper.AssignStandby(actx, e.tok.ConnectionID, it.Generation, nil)
	cancel()
	if err != nil {
		e.sb.Close(errStandbyFenced)
		return
	}
	// The assignment's write returns the session item, not its spec: the
	// one just read is this generation's (the write was conditional on it).
	nit.Spec = it.Spec
	w.keeper.StandbySpec(tok, it.Spec)
	w.mu.Lock()
	e.tok, e.gen = tok, nit.Generation
	w.mu.Unlock()
	e.sb.SetItem(nit)
}

// standbyRead follows a check's read of e's session that ended with err:
// false when the check ends there (the session is gone: the standby
// closes; another error: the next check reads again).
func standbyRead(e *standbyHeld, err error) bool {
	if errors.Is(err, lease.ErrNotFound) {
		e.sb.Close(errStandbyStopped)
	}
	return err == nil
}

// claimingNow reports whether a claim of session id is in flight here.
func (w *Worker) claimingNow(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.claiming[id]
}
