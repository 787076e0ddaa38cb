// Tenure writes: acquiring a session, its checkpoints, and the end of a
// tenure (release, hand-off, failure, abandon), and the tenures held.

package lease

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"
)

// Acquire takes session id, from prev when the caller knows its owner is
// not alive (nil: no owner expected). A session held by another worker is
// taken over when that worker is seen not alive (its record DEAD, LEFT or
// gone): the store's conditional write names the exact tenure taken. A
// session a rebalancing move reserved for another worker is taken only when
// that worker is seen not alive or the reservation is older than
// HandoffBound. When this worker holds the session's standby (Standby),
// the acquire is its promotion (From.Standby; Held.Promoted), or, that
// standby lost meanwhile, an ordinary acquire. A takeover that finds
// another worker's standby fails with a *StandbyHeldError while that worker
// is alive (it is the preferred receiver: the caller tells it to claim),
// and bypasses it when it is seen not alive.
func (k *Keeper) Acquire(ctx context.Context, id string, prev *Token) (*Held, error) {
	return k.acquireFrom(ctx, id, From{Prev: prev})
}

// AcquireGiven takes session id from the tenure its owner handed to this
// worker (Keeper.Give on the owner's side): the owner stopped acting for the
// session before telling, so the tenure is taken while its owner is alive,
// and the owner's final checkpoint becomes the resume point. Fails with
// ErrHeld (a *HeldError) when the tenure is no longer the session's (its
// owner released it meanwhile, or another worker took it), and with
// ErrStopped when a stop landed: the owner then ends it as it would have.
func (k *Keeper) AcquireGiven(ctx context.Context, id string, g Given) (*Held, error) {
	return k.acquireFrom(ctx, id, From{Given: &g})
}

func (k *Keeper) acquireFrom(ctx context.Context, id string, from From) (*Held, error) {
	if err := k.fenced(); err != nil {
		return nil, fmt.Errorf("acquire %s: %w", id, err)
	}
	k.mu.Lock()
	if h, ok := k.held[id]; ok && h.Err() == nil {
		k.mu.Unlock()
		return nil, fmt.Errorf("acquire %s: %w (by this worker)", id, ErrHeld)
	}
	k.mu.Unlock()
	sentAt := k.clk.Now()
	k.standbyFrom(id, &from)
	from.Key = TenureKeyOf(k.tenureSecret(id, sentAt))
	it, err := k.acquire(ctx, id, from)
	// A takeover, a reservation, a standby seen gone and a promotion whose
	// standby was lost, in any order: each at most once.
	for range 4 {
		var held *HeldError
		var reserved *ReservedError
		var standby *StandbyHeldError
		switch {
		case errors.As(err, &held) && held.Current.Owner != k.cfg.Owner && from.Prev == nil && from.Given == nil && k.NotAlive(ctx, held.Current.Owner):
			cur := held.Current
			from.Prev = &cur
		case errors.As(err, &reserved) && from.Bypass == "" &&
			(reserved.LapsesIn(k.clk.Now(), k.cfg.HandoffBound) == 0 || k.notTaking(ctx, reserved.To)):
			from.Bypass = reserved.To
		case errors.As(err, &standby) && from.StandbyGone == "" && k.NotAlive(ctx, standby.Standby.Worker):
			from.StandbyGone = standby.Standby.Worker
		case errors.Is(err, ErrStandbyLost) && from.Standby != nil:
			k.forgetStandby(*from.Standby)
			from.Standby, from.Spec = nil, ""
		default:
			continue
		}
		// No acquire is sent after the trust deadline (not even a retry):
		// Orphans counts on it (MayMarkDone).
		if ferr := k.fenced(); ferr != nil {
			return nil, fmt.Errorf("acquire %s: %w", id, ferr)
		}
		sentAt = k.clk.Now()
		from.Key = TenureKeyOf(k.tenureSecret(id, sentAt))
		it, err = k.acquire(ctx, id, from)
	}
	if err != nil {
		return nil, fmt.Errorf("acquire %s: %w", id, err)
	}
	h := newHeld(it, sentAt, k.cfg.CheckpointEvery, k.heldEnv)
	if from.Standby != nil {
		h.promoted = from.Standby
		k.forgetStandby(*from.Standby) // promoted: a worker is never its own session's standby
	}
	k.mu.Lock()
	if old, ok := k.held[id]; ok {
		old.end(ErrLeaseLost)
	}
	k.held[id] = h
	k.queueLocked(h, h.checkpointAt())
	k.mu.Unlock()
	k.forgetSighting(id)
	return h, nil
}

func (k *Keeper) acquire(ctx context.Context, id string, from From) (Item, error) {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	return k.store.Acquire(ctx, id, k.cfg.Owner, from)
}

// checkpoint writes seq for h (fenced on the worker's trust), within
// RPCTimeout.
func (k *Keeper) checkpoint(ctx context.Context, h *Held, seq int64) error {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	return k.checkpointUnder(ctx, h, seq)
}

// checkpointUnder writes seq for h (fenced on the worker's trust) under
// ctx's deadline (the caller's: a scan's writes share one,
// writeCheckpoints).
func (k *Keeper) checkpointUnder(ctx context.Context, h *Held, seq int64) error {
	if err := k.fenced(); err != nil {
		return err
	}
	return k.store.Checkpoint(ctx, h.token, seq)
}

// Checkpoint writes h's highest observed seq now if it advanced (a stop, a
// new generation).
func (k *Keeper) Checkpoint(ctx context.Context, h *Held) error {
	seq := h.LastSeq()
	if seq <= h.Checkpointed() {
		return nil
	}
	err := k.checkpoint(ctx, h, seq)
	h.checkpointDone(seq, err, k.clk.Now().Add(h.every))
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", h.token, err)
	}
	return nil
}

// Anchor writes seq as the first checkpoint of h's session, before the
// message after it is delivered: a session that has none yet and whose
// source resumes from the next seq gets its resume point before anything
// is delivered, so that a new owner dials from the first seq this tenure
// delivers (not live) however this tenure ends, fenced before any later
// checkpoint landed included. It returns once the write landed, retrying a
// throttled attempt as the first checkpoint is (FirstCheckpointRetry: it
// does not yield) and a transient one after RetryEvery, within the Keeper's
// MaxConcurrentWrites; it fails once the tenure ended (a refused write ends
// it, as a checkpoint's does) or ctx did. The periodic checkpoints then
// follow it by an interval: it is the session's first.
func (k *Keeper) Anchor(ctx context.Context, h *Held, seq int64) error {
	for n := 1; ; n++ {
		if err := h.Err(); err != nil {
			return fmt.Errorf("anchor %s at %d: %w", h.token, seq, err)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("anchor %s at %d: %w", h.token, seq, err)
		}
		select {
		case k.sem <- struct{}{}:
		default: // no free slot: wait for one, or for the end (Done is made then only)
			select {
			case k.sem <- struct{}{}:
			case <-h.Done():
				continue
			case <-ctx.Done():
				return fmt.Errorf("anchor %s at %d: %w", h.token, seq, ctx.Err())
			}
		}
		err := k.checkpoint(ctx, h, seq)
		<-k.sem
		wait := k.cfg.RetryEvery
		switch {
		case err == nil:
			k.checkpointSucceeded()
			h.anchored(seq, k.clk.Now().Add(h.every))
			return nil
		case errors.Is(err, ErrThrottled):
			k.checkpointThrottled(k.clk.Now())
			wait = FirstCheckpointRetry(n, k.cfg.RetryEvery)
		case Definitive(err):
			if h.end(err) {
				k.forget(h)
				k.obs.Ended(h, err)
			}
			continue // ended: the tenure's reason is returned
		}
		t := k.clk.NewTimer(wait)
		select {
		case <-t.C():
		case <-h.Done():
		case <-ctx.Done():
		}
		t.Stop()
	}
}

// Release ends h and writes the final checkpoint and the release, so that
// another worker may take the session at once. The caller has stopped
// using the session first. A fenced worker writes nothing (ErrUntrusted):
// its sessions are taken over once it is declared dead.
func (k *Keeper) Release(ctx context.Context, h *Held) error {
	h.end(ErrReleased)
	k.forget(h)
	if err := k.fenced(); err != nil {
		return fmt.Errorf("release %s: %w", h.token, err)
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	k.ended.add(h.token, k.clk.Now())
	if err := k.store.Release(ctx, h.token, h.LastSeq()); err != nil {
		k.ended.undo(h.token)
		return fmt.Errorf("release %s: %w", h.token, err)
	}
	return nil
}

// Give ends h here without a write, for a directed hand-off that names its
// receiver the tenure (Keeper.AcquireGiven there) instead of releasing it:
// the caller has stopped using the session (closed, flushed) first, and
// acts for it no more; if the receiver does not take it, HandoffGiven ends
// the tenure with a release reserved for the receiver. A fenced worker gives nothing
// (ErrUntrusted): its sessions are taken over once it is declared dead.
func (k *Keeper) Give(h *Held) (Given, error) {
	h.end(ErrReleased)
	k.forget(h)
	if err := k.fenced(); err != nil {
		return Given{}, fmt.Errorf("give %s: %w", h.token, err)
	}
	return Given{Token: h.token, Seq: h.LastSeq(), Secret: k.tenureSecret(h.token.ConnectionID, h.acquiredAt)}, nil
}

// HandoffGiven ends a tenure this worker gave (Give) and its receiver did
// not take: released with its final checkpoint, reserved for to
// (Store.Handoff), so that only to may take it until HandoffBound lapses. ErrLeaseLost: the receiver (or, once this worker was seen gone,
// another) took it after all.
func (k *Keeper) HandoffGiven(ctx context.Context, g Given, to string) error {
	if err := k.fenced(); err != nil {
		return fmt.Errorf("hand off %s: %w", g.Token, err)
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	k.ended.add(g.Token, k.clk.Now())
	if err := k.store.Handoff(ctx, g.Token, g.Seq, to, k.clk.Now().UnixMilli()); err != nil {
		k.ended.undo(g.Token)
		return fmt.Errorf("hand off %s to %s: %w", g.Token, to, err)
	}
	return nil
}

// GivenTaken records that the receiver of a tenure this worker gave (Give)
// took it: the tenure is over in the table (the receiver's acquire), and an
// audit listing that still shows it is stale.
func (k *Keeper) GivenTaken(g Given) { k.ended.add(g.Token, k.clk.Now()) }

// ReleaseToken releases a tenure of this worker that it does not hold in
// memory (found by an audit: an acquire whose reply was lost). A tenure
// this Keeper ended, or is ending, is not written again (ended.go).
func (k *Keeper) ReleaseToken(ctx context.Context, t Token) error {
	if err := k.fenced(); err != nil {
		return fmt.Errorf("release %s: %w", t, err)
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if k.ended.covers(t) {
		return nil // this Keeper ended it, or its release is in flight
	}
	k.ended.add(t, k.clk.Now())
	if err := k.store.Release(ctx, t, NoSeq); err != nil {
		k.ended.undo(t)
		return fmt.Errorf("release %s: %w", t, err)
	}
	return nil
}

// Fail ends h and records that its source, as configured at generation gen,
// can never be connected (Store.Fail). ErrNewGeneration: the session has a
// newer configuration, never tried; nothing was written and h may still be
// released.
func (k *Keeper) Fail(ctx context.Context, h *Held, gen int64, reason string, at time.Time) error {
	h.end(ErrFailed)
	k.forget(h)
	if err := k.fenced(); err != nil {
		return fmt.Errorf("fail %s: %w", h.token, err)
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	k.ended.add(h.token, k.clk.Now())
	if err := k.store.Fail(ctx, h.token, gen, h.LastSeq(), reason, at.UnixMilli()); err != nil {
		k.ended.undo(h.token)
		return fmt.Errorf("fail %s: %w", h.token, err)
	}
	return nil
}

// NoteError records reason as h's session's last connection error, seen at
// at while dialing it as configured at generation gen, with gen and h's
// epoch (Store.NoteError), while h holds it. It does not end h.
func (k *Keeper) NoteError(ctx context.Context, h *Held, gen int64, reason string, at time.Time) error {
	if err := k.fenced(); err != nil {
		return fmt.Errorf("note error %s: %w", h.token, err)
	}
	ctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	if err := k.store.NoteError(ctx, h.token, gen, reason, at.UnixMilli()); err != nil {
		return fmt.Errorf("note error %s: %w", h.token, err)
	}
	return nil
}

// Abandon stops holding h without writing anything (the session is taken
// over once this worker is declared dead, or audited back).
func (k *Keeper) Abandon(h *Held) {
	h.end(ErrReleased)
	k.forget(h)
}

// Holds reports whether this worker currently holds id.
func (k *Keeper) Holds(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	h, ok := k.held[id]
	return ok && h.Err() == nil
}

// Get returns the tenure of id this worker holds, or nil.
func (k *Keeper) Get(id string) *Held {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.held[id]
}

// Held lists the tenures being held, by connection id.
func (k *Keeper) Held() []*Held {
	k.mu.Lock()
	out := make([]*Held, 0, len(k.held))
	for _, h := range k.held {
		out = append(out, h)
	}
	k.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// Count is the number of sessions held.
func (k *Keeper) Count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.held)
}

// tenureSecret is the secret of this worker's tenure of session id whose
// acquire was sent at sentAt (Held.acquiredAt): an HMAC under the Keeper's
// own secret, drawn at its start and never written anywhere, so the Held
// keeps no copy; the session's TenureKey is its hash (From.Key), and only
// Give hands it on.
func (k *Keeper) tenureSecret(id string, sentAt time.Time) string {
	mac := hmac.New(sha256.New, k.secret)
	mac.Write([]byte(id))
	mac.Write(binary.BigEndian.AppendUint64(nil, uint64(sentAt.UnixNano())))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}
