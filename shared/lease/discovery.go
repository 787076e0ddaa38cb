// Finding work: sessions nobody holds, a dead worker's sessions, and the
// audit of what the table says this worker owns.

package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Orphans lists sessions this worker may try to acquire, up to limit:
// STARTED sessions without owner, then the sessions of workers that died or
// left (a GONE record). A GONE worker that owns none is moved to DONE.
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
		owned, err := k.store.OwnedBy(ctx, w, limit-len(out))
		if err != nil {
			return out, fmt.Errorf("sessions of %s: %w", w, err)
		}
		if len(owned) == 0 {
			if err := k.store.MarkDone(ctx, w); err != nil && !errors.Is(err, ErrWorkerAlive) {
				return out, fmt.Errorf("mark %s done: %w", w, err)
			}
			continue
		}
		k.markGone(w)
		for _, o := range owned {
			if o.DesiredState == schema.StateStarted {
				t := o.Token
				out = append(out, Candidate{ConnectionID: o.ConnectionID, Prev: &t})
			}
		}
	}
	return out, nil
}

// TakeoverOf lists the STARTED sessions of worker id (dead or left), each
// with the tenure to take over.
func (k *Keeper) TakeoverOf(ctx context.Context, id string) ([]Candidate, error) {
	owned, err := k.store.OwnedBy(ctx, id, 0)
	if err != nil {
		return nil, fmt.Errorf("sessions of %s: %w", id, err)
	}
	var out []Candidate
	for _, o := range owned {
		if o.DesiredState == schema.StateStarted {
			t := o.Token
			out = append(out, Candidate{ConnectionID: o.ConnectionID, Prev: &t})
		}
	}
	return out, nil
}

// Audit lists the sessions the table says this worker owns (by_owner): the
// owner's check for stops and new generations whose mailbox entry was lost,
// and for tenures it does not hold (an acquire whose reply was lost).
func (k *Keeper) Audit(ctx context.Context) ([]Owned, error) {
	owned, err := k.store.OwnedBy(ctx, k.cfg.Owner, 0)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return owned, nil
}
