// The bounds of POST /handoff: how many claims it may have in the
// background, and how fast it takes new ones.

package streamer

import (
	"time"

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
	// the largest of it, ClaimsPerSecond and handoffDrainRate), with a
	// burst of HandoffMaxInFlight.
	HandoffMinRate = 100
)

// handoffDrainRate is the hand-offs per second two draining workers as full
// as this one send it (a graceful shutdown hands its sessions off within a
// third of ShutdownDeadline: paceHandoffs): a rolling deploy pairs each
// old task with about one new one, and a receiver slower than its drainers
// answers 429 and its sessions go the slow way, the work queue at the claim
// pace. Found by the fleet simulator (deploy-infra at 10 workers × 10,000
// sessions, 1,000 a worker: at 100/s the hand-offs' exact dark time was
// 22.5 s p99, at 250/s 4.8 s; docs/worker.md, graceful shutdown).
//
// A deadline longer than the default does not slow a drain down: a
// draining worker hands off ShutdownInFlight sessions at a time from its
// first, whatever its deadline (paceHandoffs widens that when behind,
// never narrows it), so at hand-offs of tens of milliseconds it sends
// about 100 a second either way. The rate is therefore sized at the
// default deadline's pace or a shorter deadline's: the fleet simulator's
// deploy at the infra's 110 s deadline (10 workers × 10,000 sessions,
// 129 %) had receivers at 2 × 1,429 ÷ 36.7 s = 78/s (the 100/s floor)
// answer 411 hand-offs 429, exact dark time p99 1.6 s against 0 at a
// 30 s deadline.
func handoffDrainRate(maxSessions int, shutdownDeadline time.Duration) float64 {
	if shutdownDeadline <= 0 {
		return 0
	}
	return 2 * float64(maxSessions) / (min(shutdownDeadline, defaultShutdownDeadline) / 3).Seconds()
}

// handoffGate admits hand-off requests: a request over the rate or while
// HandoffMaxInFlight claims run is answered 429, and its sender falls back
// to the work queue and reconciliation.
type handoffGate struct {
	slots chan struct{}
	rate  *rate.Limiter
}

func newHandoffGate(claimsPerSecond, drainRate float64) handoffGate {
	return handoffGate{
		slots: make(chan struct{}, HandoffMaxInFlight),
		rate:  rate.NewLimiter(rate.Limit(max(claimsPerSecond, HandoffMinRate, drainRate)), HandoffMaxInFlight),
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
