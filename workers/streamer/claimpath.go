package streamer

// Which of the worker's paths a claim came by: the fleet simulator counts
// claims and their outcomes by path (fleetsim.go); the shipped binary
// notes nothing (claimnote.go).

import "github.com/wsfleet/wsfleet/shared/lease"

// claimPath names the path a claim came by.
type claimPath string

// The paths of a claim.
const (
	pathQueue     claimPath = "queue"     // a start notification (the work queue's consumer)
	pathReconcile claimPath = "reconcile" // a reconcile pass's listing
	pathOwn       claimPath = "own"       // a takeover's own part (the declarer's)
	pathTakeover  claimPath = "takeover"  // a takeover's part told to this worker (POST /handoff with the dead tenure)
	pathMove      claimPath = "move"      // a hand-off told without a tenure (POST /handoff)
	pathGiven     claimPath = "given"     // a tenure its owner gave this worker (a drain's or a move's hand-off, a take-back)
	pathAudit     claimPath = "audit"     // the audit's claim back of a tenure the table says is this worker's
)

// handedOffPath is the path of a hand-off's claim (claimHandedOff).
func handedOffPath(prev *lease.Token, given *lease.Given) claimPath {
	switch {
	case given != nil:
		return pathGiven
	case prev != nil:
		return pathTakeover
	default:
		return pathMove
	}
}
