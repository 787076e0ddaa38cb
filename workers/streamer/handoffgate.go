// The bounds of POST /handoff: how many claims it may have in the
// background, and how fast it takes new ones.

package streamer

import (
	"golang.org/x/time/rate"
)

// Bounds of the hand-off endpoint. A claim a hand-off starts runs in the
// background (the caller does not wait for the dial) and, for a takeover's
// part, waits for the claim pace: without a bound any caller could start
// claims faster than the pace lets them go, each a goroutine, and each
// acquire a conditional write and a consistent read competing with the
// heartbeats. The bounds sit well above what the fleet sends: a worker
// tells at most 16 receivers' hand-offs at once (takeover), and a draining
// one ShutdownInFlight.
const (
	// HandoffMaxInFlight is how many hand-off claims may run at once.
	HandoffMaxInFlight = 256
	// HandoffMinRate is the least hand-offs per second taken (the rate is
	// the larger of it and ClaimsPerSecond), with a burst of
	// HandoffMaxInFlight.
	HandoffMinRate = 100
)

// handoffGate admits hand-off requests: a request over the rate or while
// HandoffMaxInFlight claims run is answered 429, and its sender falls back
// to the work queue and reconciliation.
type handoffGate struct {
	slots chan struct{}
	rate  *rate.Limiter
}

func newHandoffGate(claimsPerSecond float64) handoffGate {
	return handoffGate{
		slots: make(chan struct{}, HandoffMaxInFlight),
		rate:  rate.NewLimiter(rate.Limit(max(claimsPerSecond, HandoffMinRate)), HandoffMaxInFlight),
	}
}

// admit takes a slot (the caller calls done when its claim ends), or
// reports false when the gate is full or the rate is exceeded.
func (g handoffGate) admit() (done func(), ok bool) {
	select {
	case g.slots <- struct{}{}:
	default:
		return nil, false
	}
	if !g.rate.Allow() {
		<-g.slots
		return nil, false
	}
	return func() { <-g.slots }, true
}
