package lease

// Every error the ownership protocol returns: the sentinels, the typed
// refusals that name the tenure in the way, and which are transient.

import (
	"errors"
	"fmt"
	"time"
)

// Errors. Stores return them (wrapped) after classifying a failed condition;
// the Keeper returns ErrUntrusted and ErrReleased of its own.
var (
	ErrNotFound   = errors.New("session not found")
	ErrStopped    = errors.New("session not started")
	ErrHeld       = errors.New("session owned by another worker")
	ErrLeaseLost  = errors.New("lease lost to a newer epoch or another owner")
	ErrSeqRegress = errors.New("checkpoint behind the stored last_seq")
	ErrUntrusted  = errors.New("lease untrusted: no heartbeat before the safety deadline")
	ErrReleased   = errors.New("lease released")
	// ErrFailed: the session is FAILED (its source can never be connected)
	// until a new start; nobody may acquire it.
	ErrFailed = errors.New("session failed: waiting for a new start")
	// ErrNewGeneration: Fail named a generation the session no longer has
	// (a start changed its configuration since the failing dial).
	ErrNewGeneration = errors.New("session has a newer generation")

	// ErrWorkerDead: the worker record is not ALIVE at the epoch the
	// writer holds (declared DEAD, or LEFT): it may never write again.
	ErrWorkerDead = errors.New("worker not alive: declared dead or left")
	// ErrWorkerNotFound: no such worker record (never registered, or its
	// DEAD/LEFT record expired).
	ErrWorkerNotFound = errors.New("worker record not found")
	// ErrWorkerExists: Register found a record with the id.
	ErrWorkerExists = errors.New("worker record exists")
	// ErrWorkerAlive: DeclareDead found the worker's heartbeat counter (or
	// epoch) moved: it is alive.
	ErrWorkerAlive = errors.New("worker heartbeat moved: alive")
	// ErrThrottled: the store refused the request for its throughput (a
	// partition, an index or the table over its capacity, or the client's
	// own retry budget spent). Nothing was written; slow down.
	ErrThrottled = errors.New("store throttled the request")

	// ErrStandbyHeld: another worker holds the session's standby (see
	// StandbyHeldError).
	ErrStandbyHeld = errors.New("session standby held by another worker")
	// ErrStandbyLost: the standby token is no longer the session's
	// standby (dropped, replaced, promoted, or taken over from): a drop
	// of it is done, a promotion with it is an ordinary acquire.
	ErrStandbyLost = errors.New("standby lost to a newer assignment or an acquire")
	// ErrStandbyRefused: the source refused a second connection at the
	// session's current generation (standby_refused_gen): no standby
	// until a new generation.
	ErrStandbyRefused = errors.New("standby refused by the source at this generation")
	// ErrNoOwner: a standby needs an owner to stand by for.
	ErrNoOwner = errors.New("session has no owner to stand by for")
	// ErrOwnStandby: the worker asking to stand by owns the session.
	ErrOwnStandby = errors.New("the session's owner cannot be its standby")
)

// StandbyHeldError is ErrStandbyHeld naming the current standby: an
// assignment may replace it (AssignStandby's prev), and a takeover bypass
// it (From.StandbyGone), once its worker is seen not alive; while it is
// alive, its worker is the takeover's preferred receiver.
type StandbyHeldError struct{ Standby StandbyToken }

func (e *StandbyHeldError) Error() string {
	return fmt.Sprintf("%s: %s", ErrStandbyHeld, e.Standby)
}

// Is makes errors.Is(err, ErrStandbyHeld) true.
func (e *StandbyHeldError) Is(target error) bool { return target == ErrStandbyHeld }

// ReservedError: a directed hand-off reserved the session for worker To
// (at AtMs on the releasing worker's wall clock).
type ReservedError struct {
	To   string
	AtMs int64
}

func (e *ReservedError) Error() string { return fmt.Sprintf("%s: reserved for %s", ErrHeld, e.To) }

// Unwrap makes errors.Is(err, ErrHeld) true: someone else is to take it.
func (e *ReservedError) Unwrap() error { return ErrHeld }

// LapsesIn is how long the reservation still holds at now, a reservation
// holding for bound (Config.HandoffBound); 0 once it lapsed.
func (e *ReservedError) LapsesIn(now time.Time, bound time.Duration) time.Duration {
	return max(time.UnixMilli(e.AtMs).Add(bound).Sub(now), 0)
}

// HeldError is ErrHeld with the current tenure, so that an acquirer that
// finds the owner not alive may take the session from it.
type HeldError struct{ Current Token }

func (e *HeldError) Error() string { return fmt.Sprintf("%s: %s", ErrHeld, e.Current) }

// Unwrap makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Definitive reports whether err says a tenure is over (as opposed to a
// transient failure such as a timeout or throttling).
func Definitive(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrStopped) || errors.Is(err, ErrLeaseLost) ||
		errors.Is(err, ErrSeqRegress) || errors.Is(err, ErrHeld) || errors.Is(err, ErrFailed) ||
		errors.Is(err, ErrWorkerDead) || errors.Is(err, ErrWorkerNotFound) ||
		errors.Is(err, ErrStandbyHeld) || errors.Is(err, ErrStandbyLost) ||
		errors.Is(err, ErrStandbyRefused) || errors.Is(err, ErrNoOwner) || errors.Is(err, ErrOwnStandby)
}

// IsTransient reports whether err from a store call may succeed if retried.
func IsTransient(err error) bool {
	return err != nil && !Definitive(err) && !errors.Is(err, ErrUntrusted)
}

// The fleet summary's refusals (SummaryStore).
var (
	// ErrNoSummary: no summary head (or membership page) is stored.
	ErrNoSummary = errors.New("no fleet summary")
	// ErrSummarySuperseded: a head (or page) at the same or a higher
	// version is stored; the write changed nothing.
	ErrSummarySuperseded = errors.New("fleet summary superseded")
)
