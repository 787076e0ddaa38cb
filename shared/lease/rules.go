package lease

import (
	"errors"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// The rules below are the whole protocol. Stores express the Can* rules as
// write conditions and use the Classify* rules on a consistent read after a
// condition failed; memstore evaluates the Can* rules directly.

// ExpiresAtMs is the stored expiry of a write sent at sentAt.
func ExpiresAtMs(sentAt time.Time, ttl time.Duration) int64 {
	return sentAt.UnixMilli() + ttl.Milliseconds()
}

// StaleBeforeMs is the expiry before which another worker may take a lease,
// as seen at now: expired by more than maxSkew.
func StaleBeforeMs(now time.Time, maxSkew time.Duration) int64 {
	return now.UnixMilli() - maxSkew.Milliseconds()
}

// TrustedUntil is the monotonic instant after which the holder must no
// longer act as owner of a lease whose last successful write was sent at
// sentAt.
func TrustedUntil(sentAt time.Time, ttl, margin time.Duration) time.Time {
	return sentAt.Add(ttl - margin)
}

// TakeableAt is the wall-clock instant at which a lease expiring at
// expiresAtMs becomes acquirable by another worker.
func TakeableAt(expiresAtMs int64, maxSkew time.Duration) time.Time {
	return time.UnixMilli(expiresAtMs + maxSkew.Milliseconds() + 1)
}

// CanAcquire decides an acquire by owner of the item it (nil: no item).
func CanAcquire(it *Item, staleBeforeMs int64) error {
	switch {
	case it == nil:
		return ErrNotFound
	case it.DesiredState != schema.StateStarted:
		return ErrStopped
	case it.Failed():
		return ErrFailed
	case it.ExpiresAtMs >= staleBeforeMs:
		return ErrHeld
	}
	return nil
}

// ClassifyAcquire explains why an acquire's condition failed, given the item
// read after it. It returns nil when the item shows that this very acquire
// was applied (a retry after an ambiguous first attempt).
func ClassifyAcquire(it *Item, owner string, staleBeforeMs, expiresAtMs int64) error {
	if it != nil && it.Owner == owner && it.ExpiresAtMs == expiresAtMs && it.DesiredState == schema.StateStarted {
		return nil
	}
	if err := CanAcquire(it, staleBeforeMs); err != nil {
		return err
	}
	// The condition failed, yet the item now allows the acquire: it changed
	// in between (a release raced us). Report it as held; the caller may retry.
	return ErrHeld
}

// CanFencedWrite decides a checkpoint or release by t: the lease must still
// be t's (owner and epoch) and last_seq may only move forward.
func CanFencedWrite(it *Item, t Token, lastSeq int64) error {
	switch {
	case it == nil:
		return ErrNotFound
	case it.Owner != t.Owner || it.Epoch != t.Epoch:
		return ErrLeaseLost
	case it.LastSeq > lastSeq:
		return ErrSeqRegress
	}
	return nil
}

// CanFail decides a Fail by t of the configuration at generation gen: a
// fenced write, while the item is still at gen.
func CanFail(it *Item, t Token, gen, lastSeq int64) error {
	if err := CanFencedWrite(it, t, lastSeq); err != nil {
		return err
	}
	if it.Generation != gen {
		return ErrNewGeneration
	}
	return nil
}

// ClassifyFail explains a failed Fail.
func ClassifyFail(it *Item, t Token, gen, lastSeq int64) error {
	if err := CanFail(it, t, gen, lastSeq); err != nil {
		return err
	}
	return errConditionRaced
}

// CanNoteError decides a NoteError by t: the lease must still be t's.
func CanNoteError(it *Item, t Token) error {
	switch {
	case it == nil:
		return ErrNotFound
	case it.Owner != t.Owner || it.Epoch != t.Epoch:
		return ErrLeaseLost
	}
	return nil
}

// ClassifyNoteError explains a failed NoteError.
func ClassifyNoteError(it *Item, t Token) error {
	if err := CanNoteError(it, t); err != nil {
		return err
	}
	return errConditionRaced
}

// CanRenew decides a renew by t at nowMs: a fenced write, on a lease that
// has not expired, of a STARTED session.
func CanRenew(it *Item, t Token, nowMs, lastSeq int64) error {
	if err := CanFencedWrite(it, t, lastSeq); err != nil {
		return err
	}
	switch {
	case it.DesiredState != schema.StateStarted:
		return ErrStopped
	case it.ExpiresAtMs < nowMs:
		return ErrExpired
	}
	return nil
}

// errConditionRaced is returned when a condition failed but the item read
// afterwards satisfies it: the item changed in between. It is transient.
var errConditionRaced = errors.New("condition failed but the item now satisfies it")

// ClassifyRenew explains a failed renew condition from the item read after
// it; nil means the item shows this renew applied.
func ClassifyRenew(it *Item, t Token, nowMs, expiresAtMs, lastSeq int64) error {
	if err := CanFencedWrite(it, t, lastSeq); err != nil {
		return err
	}
	if it.ExpiresAtMs == expiresAtMs && it.LastSeq == lastSeq && it.DesiredState == schema.StateStarted {
		return nil
	}
	if err := CanRenew(it, t, nowMs, lastSeq); err != nil {
		return err
	}
	return errConditionRaced
}

// ClassifyFenced explains a failed checkpoint or release.
func ClassifyFenced(it *Item, t Token, lastSeq int64) error {
	if err := CanFencedWrite(it, t, lastSeq); err != nil {
		return err
	}
	return errConditionRaced
}
