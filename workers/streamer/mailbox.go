// Stops, new generations and the audit: re-reading a held session when
// the mailbox or a stop notification names it, and the audit of what the
// table says this worker owns.

package streamer

import (
	"context"
	"errors"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// stopHint is a stop notification (claimer.StopHint): for a session this
// worker holds, it closes it at once (status 1000) when the table confirms
// it.
func (w *Worker) stopHint(ctx context.Context, id string) {
	s, it, ok := w.readHeld(ctx, id, "stop notification: read session (the mailbox or the audit will bring it)")
	if ok && it.DesiredState == schema.StateStopped {
		s.Interrupt(session.ErrStopRequested)
	}
}

// readHeld reads the item of a session this worker holds (consistently);
// ok is false when it holds none or the read failed (logged with failMsg).
func (w *Worker) readHeld(ctx context.Context, id, failMsg string) (*session.Session, lease.Item, bool) {
	w.mu.Lock()
	s := w.sessions[id]
	w.mu.Unlock()
	if s == nil {
		return nil, lease.Item{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.StoreTimeout)
	defer cancel()
	it, err := w.store.Get(ctx, id)
	if err != nil {
		s.Logger().Warn().Err(err).Msg(failMsg)
		return nil, lease.Item{}, false
	}
	return s, it, true
}

// reread acts on a mailbox entry (ingest wrote it on a stop or a new
// generation of a session this worker owns, or on a stop of a session it
// holds the hot standby of: schema.MailboxEntry): re-read the session and
// stop it or move it to its new configuration (a standby: checkStandby),
// then ack exactly that entry. A stop written after the read is another entry,
// which stays in the mailbox for the next heartbeat to bring.
func (w *Worker) reread(ctx context.Context, entry string) {
	id := schema.MailboxID(entry)
	if w.keptForClaim(id, entry) {
		return
	}
	defer w.keeper.Ack(entry)
	if s, it, ok := w.readHeld(ctx, id, "mailbox: read session (the next audit re-reads it)"); ok {
		w.apply(ctx, s, it)
		return
	}
	// ingest also mails a stop to the worker holding the session's hot
	// standby (whatever its owner knows of it): the standby's check, now.
	w.mu.Lock()
	e := w.standbys[id]
	w.mu.Unlock()
	if e != nil {
		w.checkStandby(ctx, e)
	}
}

// keptForClaim keeps a mailbox entry for id, unacked, when id is being
// claimed: its acquire may have applied with the reply not back yet (the
// entry is then this worker's, written after the acquire), and dropping it
// would leave a STOP to the audit. The claim re-reads it when it returns
// (rereadKept): with the session started, or, when the claim failed, to
// find no session and ack it.
func (w *Worker) keptForClaim(id, entry string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sessions[id] != nil || !w.claiming[id] {
		return false
	}
	w.claimMail[id] = append(w.claimMail[id], entry)
	return true
}

// takeClaimMailLocked takes the entries kept for id (w.mu held), as its
// claim ends (in the same critical section that ends the claiming).
func (w *Worker) takeClaimMailLocked(id string) []string {
	kept := w.claimMail[id]
	delete(w.claimMail, id)
	return kept
}

// rereadKept re-reads the entries kept during a claim, now that it
// returned. Once the Worker is stopping nothing new starts: an entry left
// unacked stays in the record, harmless (the worker is leaving).
func (w *Worker) rereadKept(entries []string) {
	for _, e := range entries {
		w.ph.tasks.Go(func() { w.reread(w.hardCtx, e) })
	}
}

// apply moves session s to what the table says: a STOP closes it (status
// 1000), a new generation reconnects it with the new configuration; both
// checkpoint first.
func (w *Worker) apply(ctx context.Context, s *session.Session, it lease.Item) {
	h := s.Held()
	switch {
	case it.DesiredState == schema.StateStopped:
		s.Interrupt(session.ErrStopRequested)
	case it.Generation != h.Item().Generation:
		if err := w.keeper.Checkpoint(ctx, h); err != nil {
			s.Logger().Warn().Err(err).Msg("checkpoint before the new generation")
		}
		h.SetItem(it)
		if w.wantStandby(it.ConnectionID, it, standbyWanted(it)) {
			w.wakePlacement()
		}
		s.Poke() // its Tick reconnects at the control loop's next pass
	}
}

// auditPass is the reconciler's OnPass: the audit, on the first pass at
// least AuditEvery after the last audit (every pass when 0). Passes run one
// at a time, on the reconciler's goroutine (the first heartbeat after
// sessions were left while fenced runs one of its own: observer.Heartbeat).
//
// The passes hand each audit the last one's listing, whose array the
// Keeper lists into (lease.Keeper.Audit): a steady audit allocates none.
func (w *Worker) auditPass() func(context.Context) {
	var last time.Time
	var listing []lease.Owned
	return func(ctx context.Context) {
		now := w.deps.Clock.Now()
		if w.cfg.AuditEvery > 0 && !last.IsZero() && now.Sub(last) < w.cfg.AuditEvery {
			return
		}
		last = now
		listing = w.audit(ctx, listing)
	}
}

// audit compares what the table says this worker owns (by_owner) with what
// it holds: a stop or a new generation whose mailbox entry was lost is
// applied; a tenure it does not hold (an acquire whose reply was lost, a
// session left while fenced) is claimed back, or released when the worker
// has no room for it. It lists into buf's array and returns the listing,
// emptied, for the next audit to list into.
func (w *Worker) audit(ctx context.Context, buf []lease.Owned) []lease.Owned {
	owned, err := w.keeper.Audit(ctx, buf)
	defer clear(owned) // no reference kept to a session between audits
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn().Err(err).Msg("audit")
		}
		return owned[:0]
	}
	for _, o := range owned {
		w.mu.Lock()
		s, claiming := w.sessions[o.ConnectionID], w.claiming[o.ConnectionID]
		w.mu.Unlock()
		switch {
		case claiming:
		case s != nil && s.Held().Epoch() == o.Epoch:
			if o.DesiredState == schema.StateStopped || o.Generation != s.Held().Item().Generation {
				w.reread(ctx, o.ConnectionID)
			}
		case s != nil:
			// Held at another epoch of ours: the newer tenure wins.
		case o.DesiredState == schema.StateStarted && w.free() > 0:
			if out, err := w.claim(ctx, pathAudit, o.ConnectionID, nil, nil, 0, true); err != nil && out != claim.Reserved {
				w.log.Warn().Err(err).Str("connection_id", o.ConnectionID).Stringer("outcome", out).Msg("audit: claim back")
			}
		default:
			if err := w.keeper.ReleaseToken(ctx, o.Token); err != nil && !errors.Is(err, lease.ErrLeaseLost) {
				w.log.Warn().Err(err).Str("connection_id", o.ConnectionID).Int64("lease_epoch", o.Epoch).Msg("audit: release")
			}
		}
	}
	return owned[:0]
}
