package lease

// The hot standby's rules: its assignment and its drop, fenced by the
// standby epoch.

import (
	"strings"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// MaxStandbyError bounds standby_error in bytes, as the worker bounds
// last_error: a short reason, never a URL, a header or a message.
const MaxStandbyError = 256

// StandbyReason is reason as standby_error records it: at most
// MaxStandbyError bytes, cut at a rune boundary.
func StandbyReason(reason string) string {
	if len(reason) <= MaxStandbyError {
		return reason
	}
	return strings.ToValidUTF8(reason[:MaxStandbyError], "")
}

// CanAssignStandby decides an assignment of worker as the standby of the
// session it at generation gen, replacing prev (nil: none) if that is the
// current standby: the session must be STARTED, not FAILED, at gen, owned
// by another worker, not refused a standby at gen, and without another
// standby than worker's or prev's.
func CanAssignStandby(it *Item, worker string, gen int64, prev *StandbyToken) error {
	switch {
	case it == nil:
		return ErrNotFound
	case it.DesiredState != schema.StateStarted:
		return ErrStopped
	case it.Failed():
		return ErrFailed
	case it.Generation != gen:
		return ErrNewGeneration
	case it.Owner == "":
		return ErrNoOwner
	case it.Owner == worker:
		return ErrOwnStandby
	case it.StandbyRefusedGen == gen:
		return ErrStandbyRefused
	case it.Standby == "" || it.Standby == worker:
	case prev != nil && it.Standby == prev.Worker && it.StandbyEpoch == prev.Epoch:
	default:
		return &StandbyHeldError{Standby: standbyOf(it)}
	}
	return nil
}

// ClassifyAssignStandby explains a failed assignment's condition from the
// item read after it.
func ClassifyAssignStandby(it *Item, worker string, gen int64, prev *StandbyToken) error {
	if err := CanAssignStandby(it, worker, gen, prev); err != nil {
		return err
	}
	return errConditionRaced
}

// CanDropStandby decides a drop of standby t: it must still be the
// session's standby (else ErrStandbyLost, which the dropper treats as
// done: a retry of a drop that applied finds this too).
func CanDropStandby(it *Item, t StandbyToken) error {
	switch {
	case it == nil:
		return ErrNotFound
	case it.Standby != t.Worker || it.StandbyEpoch != t.Epoch:
		return ErrStandbyLost
	}
	return nil
}

// ClassifyDropStandby explains a failed drop's condition.
func ClassifyDropStandby(it *Item, t StandbyToken) error {
	if err := CanDropStandby(it, t); err != nil {
		return err
	}
	return errConditionRaced
}
