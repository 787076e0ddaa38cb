// The worker's own liveness: its record's registration, the heartbeat that
// extends its trust, the trust deadline every tenure checks, and leaving.

package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Register creates the worker record (ALIVE, epoch 1). The worker is trusted
// from the send time of the registration.
func (k *Keeper) Register(ctx context.Context) error {
	l := k.reported()
	sentAt := k.clk.Now()
	rec := WorkerRecord{
		ID: k.cfg.Owner, State: schema.WorkerAlive, Epoch: 1, HeartbeatSeq: 0, HeartbeatAtMs: sentAt.UnixMilli(), TTL: k.cfg.TTL,
		Load: l.Sessions, Capacity: l.Capacity, AdminAddr: l.AdminAddr, List: schema.WorkerListAlive, StartedAtMs: sentAt.UnixMilli(),
		Host: k.cfg.Host, Pid: k.cfg.Pid, BootID: k.cfg.BootID, Zone: k.cfg.Zone,
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.Register(ctx, rec); err != nil {
		return fmt.Errorf("register worker %s: %w", k.cfg.Owner, err)
	}
	k.lmu.Lock()
	k.epoch, k.nextSeq, k.record = 1, 1, rec
	k.live.succeeded(sentAt)
	k.publishLocked()
	k.lmu.Unlock()
	return nil
}

// Trusted reports whether the worker may act as owner now.
func (k *Keeper) Trusted() bool { return k.trusted(k.clk.Now()) }

func (k *Keeper) trusted(now time.Time) bool {
	t := k.trust.Load()
	return t.valid && now.Before(t.until)
}

// HeartbeatCurrent reports whether the worker is trusted and its last
// heartbeat that succeeded was sent within one and a half heartbeat
// intervals: no heartbeat is overdue. A worker asked to receive a session
// checks it first: one cut off from the table since its last heartbeat
// keeps its trust for most of the trust window, but could not acquire
// what it was given, and the giver has let the session go by then.
func (k *Keeper) HeartbeatCurrent() bool {
	now := k.clk.Now()
	k.lmu.Lock()
	defer k.lmu.Unlock()
	return k.live.current(now, k.cfg.HeartbeatEvery)
}

// trustDeadline is the published trust deadline (zero: not trusted at all).
func (k *Keeper) trustDeadline() time.Time {
	t := k.trust.Load()
	if !t.valid {
		return time.Time{}
	}
	return t.until
}

// TrustedUntil is the worker's current monotonic trust deadline.
func (k *Keeper) TrustedUntil() time.Time {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	return k.live.trustedUntil
}

// Ended says why the worker's liveness ended (declared dead, left); nil
// while it lives.
func (k *Keeper) Ended() error {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	return k.live.ended
}

// Record is the worker record as the last heartbeat returned it.
func (k *Keeper) Record() WorkerRecord {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	r := k.record
	r.Mailbox = append([]string(nil), r.Mailbox...)
	return r
}

// AliveWorkers is how many workers were ALIVE at the last listing, less
// those this Keeper has seen gone since (a read, a GONE listing): the
// fleet's claim budget is shared by that many (the worker's claim share),
// and at an AZ's loss the survivors see the dead in their first check of
// a takeover's part, up to a refresh (RefreshEvery) and a summary before
// the listing leaves them out (the fleet simulator at 300 × 30,000: the
// survivors claimed at 1/300 of the budget each, 69 % of it together,
// until then).
func (k *Keeper) AliveWorkers() int {
	seen := k.goneSeen.Load()
	k.lmu.Lock()
	if seen == k.aliveAt {
		defer k.lmu.Unlock()
		return k.aliveNow
	}
	ids := k.aliveIDs // replaced by a refresh, never modified
	k.lmu.Unlock()
	n := 0
	now := k.clk.Now()
	k.gmu.Lock()
	for _, id := range ids {
		if id == k.cfg.Owner || !k.goneLocked(id, now) {
			n++
		}
	}
	k.gmu.Unlock()
	k.lmu.Lock()
	defer k.lmu.Unlock()
	if slices.Equal(ids, k.aliveIDs) {
		k.aliveNow, k.aliveAt = n, seen
	}
	return n
}

// Ack records that mailbox entry id (the whole entry, as Observer.Mailbox
// handed it over) was handled; the next heartbeat removes exactly it from
// the record.
// Acking an entry twice (the mailbox and an audit both re-read it) sends
// it once: a heartbeat naming it twice would be refused (a set with
// duplicates is invalid), and so would every one after it.
func (k *Keeper) Ack(id string) {
	k.lmu.Lock()
	if k.pending[id] && !slices.Contains(k.acks, id) {
		k.acks = append(k.acks, id)
	}
	k.lmu.Unlock()
}

// startHeartbeat sends one heartbeat unless one is in flight.
func (k *Keeper) startHeartbeat(ctx context.Context) {
	k.lmu.Lock()
	if k.hbBusy || k.live.ended != nil || !k.live.registered {
		k.lmu.Unlock()
		return
	}
	k.hbBusy = true
	k.lmu.Unlock()
	k.wg.Go(func() { k.heartbeat(ctx) })
}

// heartbeatAgain reports (once) that the last heartbeat failed with its
// worker's trust at risk (HeartbeatAgainAt) and the next is due at now.
func (k *Keeper) heartbeatAgain(now time.Time) bool {
	k.lmu.Lock()
	defer k.lmu.Unlock()
	if k.hbAgain.IsZero() || now.Before(k.hbAgain) {
		return false
	}
	k.hbAgain = time.Time{}
	return true
}

// heartbeat sends one heartbeat with a new counter value and the acks
// collected so far, and applies the outcome.
func (k *Keeper) heartbeat(ctx context.Context) {
	l := k.reported()
	k.lmu.Lock()
	seq, epoch := k.nextSeq, k.epoch
	k.nextSeq++ // a retry never reuses a counter value (see Store.Heartbeat)
	acks := append([]string(nil), k.acks...)
	trustedUntil := k.live.trustedUntil
	if !k.live.registered {
		trustedUntil = time.Time{}
	}
	k.lmu.Unlock()
	sentAt := k.clk.Now()
	rctx, cancel := context.WithTimeout(ctx, HeartbeatTimeout(sentAt, trustedUntil, k.cfg.HeartbeatEvery, k.cfg.RPCTimeout, k.cfg.Tick))
	rec, err := k.store.Heartbeat(rctx, k.cfg.Owner, epoch, Heartbeat{
		Seq: seq, AtMs: sentAt.UnixMilli(), Load: l.Sessions, Capacity: l.Capacity, AdminAddr: l.AdminAddr,
		Draining: l.Draining, MovesPerMin: l.MovesPerMin, Ack: acks,
	})
	cancel()
	latency := k.clk.Now().Sub(sentAt)
	var fresh []string
	k.lmu.Lock()
	k.hbBusy = false
	k.hbAgain = time.Time{}
	if err != nil {
		if at, ok := HeartbeatAgainAt(sentAt, k.clk.Now(), trustedUntil, k.cfg.HeartbeatEvery, k.cfg.RPCTimeout); ok {
			k.hbAgain = at
		}
	}
	switch {
	case err == nil:
		k.live.succeeded(sentAt)
		k.publishLocked()
		k.record = rec
		// Acks sent are applied; drop them.
		k.acks = k.acks[len(acks):]
		for _, id := range acks {
			delete(k.pending, id)
		}
		for _, id := range rec.Mailbox {
			if !k.pending[id] {
				k.pending[id] = true
				fresh = append(fresh, id)
			}
		}
	case errors.Is(err, ErrWorkerDead) || errors.Is(err, ErrWorkerNotFound):
		k.live.end(fmt.Errorf("heartbeat: %w", err))
		k.publishLocked()
	}
	k.lmu.Unlock()
	// After the outcome is applied: an observer that acts on a success
	// (claims back what it left while fenced) finds the worker trusted.
	k.obs.Heartbeat(latency, err)
	if len(fresh) > 0 {
		k.obs.Mailbox(fresh)
	}
}

// fenced returns ErrUntrusted (or the liveness error) when the worker may
// not write as owner now: a fenced worker writes nothing.
func (k *Keeper) fenced() error {
	now := k.clk.Now()
	k.lmu.Lock()
	defer k.lmu.Unlock()
	if k.live.ended != nil {
		return k.live.ended
	}
	if !k.live.valid(now) {
		return ErrUntrusted
	}
	return nil
}

// Leave marks the worker LEFT after it released its sessions (graceful
// exit): nobody waits a TTL; reconcilers take over anything it still owns
// (the GONE list), then mark it DONE.
func (k *Keeper) Leave(ctx context.Context) error {
	k.lmu.Lock()
	epoch, registered := k.epoch, k.live.registered
	k.lmu.Unlock()
	if !registered {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	// Always GONE: a reconciler moves the record to DONE once by_owner has
	// shown it owns nothing for IndexLagBound (MayMarkDone). The worker's own view is not enough (a release
	// whose write failed, an acquire whose reply was lost, an index that
	// lags), and a DONE record's sessions are never looked for again.
	list := schema.WorkerListGone
	// The worker stops acting (no acquire, no delivery) before the record
	// says LEFT: others take its sessions as soon as they see it, and
	// Orphans counts on no acquire passing its trust check after that
	// (MayMarkDone).
	k.lmu.Lock()
	k.live.end(errLeft)
	k.publishLocked()
	k.lmu.Unlock()
	err := k.store.Leave(ctx, k.cfg.Owner, epoch, list, k.clk.Now().UnixMilli())
	k.endAll(errLeft)
	if err != nil {
		return fmt.Errorf("leave %s: %w", k.cfg.Owner, err)
	}
	return nil
}
