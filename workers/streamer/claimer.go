package streamer

// The Worker as internal/claim sees it: the consumer's and the reconciler's
// Claimer, kept off Worker's exported methods (what library users call).

import (
	"context"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
)

// claimer is the Worker as a claim.Claimer, for one path (the consumer's,
// the reconciler's, a takeover's own part).
type claimer struct {
	w    *Worker
	path claimPath
}

var _ claim.Claimer = claimer{}

// Claim is a paced claim (admission, the acquire, the session). A start
// notification's previous tenure (a takeover's or a leaver's
// announcement) is named in the acquire only once this worker reads its
// owner's record as not alive itself (once per dead worker: the keeper
// remembers it); the reconciler's come from the keeper's own listing.
func (c claimer) Claim(ctx context.Context, id string, prev *lease.Token, sentAtMs int64) (claim.Outcome, error) {
	if prev != nil && c.path == pathQueue && !c.w.keeper.NotAlive(ctx, prev.Owner) {
		prev = nil
	}
	return c.w.claim(ctx, c.path, id, prev, nil, sentAtMs, true)
}

// Free is the number of sessions the worker may still claim.
func (c claimer) Free() int { return c.w.free() }

// StopHint handles a stop notification.
func (c claimer) StopHint(ctx context.Context, id string) { c.w.stopHint(ctx, id) }
