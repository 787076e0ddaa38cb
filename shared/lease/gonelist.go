// The listing of the GONE workers that the checks of a dead worker's
// tenures share: one query for many dead workers instead of one record
// read each.

package lease

import (
	"context"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// GoneListEvery is how often at most a Keeper lists the GONE workers for
// its checks (NotAlive). An AZ's loss at 1,000 workers declares about 333
// dead at once, and each survivor receives parts of about 30 of their
// takeovers within seconds: a record read per dead owner per receiver was
// about 20,000 read units in the busiest second (docs/SCALE.md), one
// listing a second per receiver is at most one query each, whatever the
// number of dead.
const GoneListEvery = time.Second

// goneListing is the state of those listings: a semaphore holding one
// listing at a time (its callers wait for it rather than send their own)
// and when the last was sent.
type goneListing struct {
	sem      chan struct{}
	lastSent time.Time // guarded by sem
}

// listedGone reports whether a listing of the GONE workers sent at or
// after need shows worker id, remembering every worker it shows gone
// (markGone). One listing at a time, at most one per GoneListEvery: a
// caller arriving meanwhile waits for the next (at most GoneListEvery and
// the listing's deadline) when patient, else gets false at once unless a
// listing is due now and none is in flight. False when the listing missed
// id (an index lags), failed or ctx ended: the caller reads id's record.
func (k *Keeper) listedGone(ctx context.Context, id string, need time.Time, patient bool) bool {
	if patient {
		select {
		case k.gl.sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
	} else {
		select {
		case k.gl.sem <- struct{}{}:
		default:
			return false // a listing in flight: the record is read instead
		}
	}
	defer func() { <-k.gl.sem }()
	if k.KnownGone(id) {
		return true // a listing another caller waited for
	}
	list, wait := GoneListingDue(need, k.gl.lastSent, k.clk.Now(), GoneListEvery)
	if !list || (wait > 0 && !patient) {
		return false
	}
	if wait > 0 {
		if err := clock.Sleep(ctx, k.clk, wait); err != nil {
			return false
		}
	}
	k.gl.lastSent = k.clk.Now()
	gone, err := rpc(ctx, k.cfg.listTimeout(), func(ctx context.Context) ([]string, error) {
		return k.store.ListWorkers(ctx, schema.WorkerListGone, 0)
	})
	if err != nil {
		return false
	}
	for _, w := range gone {
		k.markGone(w)
	}
	return k.KnownGone(id)
}
