// Finding work: sessions nobody holds, a dead worker's sessions, and the
// audit of what the table says this worker owns.
//
// Every list here reads an index (by_unowned, by_worker_list, by_owner),
// eventually consistent on DynamoDB: an answer may miss a recent write. A
// missing entry only delays what is found, except where an empty answer
// would end the search: a GONE worker moves to DONE only after the index
// lag bound (MayMarkDone), and DONE records are swept again, slowly.

package lease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Orphans lists sessions this worker may try to acquire, up to limit:
// STARTED sessions without owner, then the sessions of workers that died or
// left (a GONE record), then those of DONE workers a sweep found owning
// some (DoneSweepEvery). A GONE worker moves to DONE when its by_owner
// query, sent at least IndexLagBound after this Keeper first saw it gone,
// finds nothing (MayMarkDone) and a consistent read of its record shows it
// still GONE.
func (k *Keeper) Orphans(ctx context.Context, limit int) ([]Candidate, error) {
	var out []Candidate
	ids, err := k.store.Unowned(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("unowned: %w", err)
	}
	for _, id := range ids {
		out = append(out, Candidate{ConnectionID: id})
	}
	gone, err := k.store.ListWorkers(ctx, schema.WorkerListGone, 0)
	if err != nil {
		return out, fmt.Errorf("gone workers: %w", err)
	}
	for _, w := range gone {
		if len(out) >= limit {
			break
		}
		// The listing was answered after w's record left ALIVE.
		seenAt := k.markGone(w)
		sentAt := k.clk.Now()
		owned, err := k.store.OwnedBy(ctx, w, limit-len(out))
		if err != nil {
			return out, fmt.Errorf("sessions of %s: %w", w, err)
		}
		if MayMarkDone(seenAt, sentAt, len(owned), k.cfg.IndexLagBound) {
			if err := k.markDone(ctx, w); err != nil {
				return out, err
			}
			continue
		}
		out = appendStarted(out, owned)
	}
	return k.sweepDone(ctx, out, limit)
}

// appendStarted appends the STARTED sessions of owned, each with the tenure
// to take over.
func appendStarted(out []Candidate, owned []Owned) []Candidate {
	for _, o := range owned {
		if o.DesiredState == schema.StateStarted {
			t := o.Token
			out = append(out, Candidate{ConnectionID: o.ConnectionID, Prev: &t})
		}
	}
	return out
}

// markDone moves GONE worker w to DONE after a consistent read of its
// record (not the by_worker_list index the GONE listing came from) shows it
// still GONE: a record another Keeper already moved is not written again.
func (k *Keeper) markDone(ctx context.Context, w string) error {
	rec, err := k.store.GetWorker(ctx, w)
	switch {
	case errors.Is(err, ErrWorkerNotFound):
		return nil // expired
	case err != nil:
		return fmt.Errorf("mark %s done: %w", w, err)
	case rec.Alive() || rec.List != schema.WorkerListGone:
		return nil
	}
	if err := k.store.MarkDone(ctx, w); err != nil && !errors.Is(err, ErrWorkerAlive) && !errors.Is(err, ErrWorkerNotFound) {
		return fmt.Errorf("mark %s done: %w", w, err)
	}
	return nil
}

// sweepDone appends the sessions DONE workers still own: every
// DoneSweepEvery it lists the DONE records and takes those rendezvous
// hashing over the alive workers gives this Keeper (one sweeper each);
// each is queried every pass until its by_owner answer is empty. This is
// the fallback for an index that lagged beyond IndexLagBound when the
// record moved to DONE: such a session is found within a sweep period of
// appearing in the index, as long as the record has not expired.
func (k *Keeper) sweepDone(ctx context.Context, out []Candidate, limit int) ([]Candidate, error) {
	now := k.clk.Now()
	k.lmu.Lock()
	alive := k.aliveIDs
	k.lmu.Unlock()
	k.gmu.Lock()
	due := len(alive) > 0 && !now.Before(k.nextSweep)
	if due {
		k.nextSweep = now.Add(k.cfg.DoneSweepEvery())
	}
	k.gmu.Unlock()
	if due {
		done, err := k.store.ListWorkers(ctx, schema.WorkerListDone, 0)
		if err != nil {
			return out, fmt.Errorf("done workers: %w", err)
		}
		k.gmu.Lock()
		for _, w := range done {
			if ws := Watchers(w, alive, 1); len(ws) == 1 && ws[0] == k.cfg.Owner {
				k.late[w] = true
			}
		}
		k.gmu.Unlock()
	}
	k.gmu.Lock()
	late := slices.Sorted(maps.Keys(k.late))
	k.gmu.Unlock()
	for _, w := range late {
		if len(out) >= limit {
			break
		}
		owned, err := k.store.OwnedBy(ctx, w, limit-len(out))
		if err != nil {
			return out, fmt.Errorf("sessions of done worker %s: %w", w, err)
		}
		if len(owned) == 0 {
			k.gmu.Lock()
			delete(k.late, w)
			k.gmu.Unlock()
			continue
		}
		k.markGone(w)
		out = appendStarted(out, owned)
	}
	return out, nil
}

// TakeoverOf lists the STARTED sessions of worker id (dead or left), each
// with the tenure to take over. It reads by_owner right after the death:
// a session the worker acquired just before is missing while the index
// lags; Orphans finds it (the record stays GONE for IndexLagBound at least).
func (k *Keeper) TakeoverOf(ctx context.Context, id string) ([]Candidate, error) {
	owned, err := k.store.OwnedBy(ctx, id, 0)
	if err != nil {
		return nil, fmt.Errorf("sessions of %s: %w", id, err)
	}
	return appendStarted(nil, owned), nil
}

// Audit lists the sessions the table says this worker owns (by_owner): the
// owner's check for stops and new generations whose mailbox entry was lost,
// and for tenures it does not hold (an acquire whose reply was lost). The
// index may lag: an entry may be missing (found on a later pass) or stale
// (a session released or taken since); what the caller does with an entry
// is a conditional write the table decides, so a stale one costs a write,
// never safety.
func (k *Keeper) Audit(ctx context.Context) ([]Owned, error) {
	owned, err := k.store.OwnedBy(ctx, k.cfg.Owner, 0)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return owned, nil
}
