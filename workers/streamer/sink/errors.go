package sink

// Every error of the delivery API: a handler's refusals (permanent,
// throttled, final) and a pipeline's end of a tenure.

import "errors"

// ErrTenureEnded: a Pipeline refuses a message because it dropped or gave up
// on earlier messages of the same tenure (its lease was no longer valid at
// send time, or the destination refused one for good); the session must end.
var ErrTenureEnded = errors.New("sink: the tenure's earlier messages were dropped")

// PermanentError marks a refusal that sending the same message again cannot
// fix (the destination's sender faults: access, size, validation, a KMS
// key), as opposed to a transient one (throttling, 5xx, timeouts, which are
// retried). A Handler returns Permanent(err) for such a refusal; the
// session then follows its on_sink_refusal policy instead of retrying.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as a permanent refusal (nil stays nil).
func Permanent(err error) error {
	if err == nil || IsPermanent(err) {
		return err
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err is a permanent refusal: a PermanentError
// in its chain, or an error that says so with a Permanent() bool method.
func IsPermanent(err error) bool {
	var pe *PermanentError
	if errors.As(err, &pe) {
		return true
	}
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// ThrottledError marks a transient refusal for the destination's
// throughput (throttling): it says nothing about the message, so it never
// counts toward a pipeline's bound on a message that keeps failing the
// same way (sink/batch).
type ThrottledError struct{ Err error }

func (e *ThrottledError) Error() string   { return e.Err.Error() }
func (e *ThrottledError) Unwrap() error   { return e.Err }
func (e *ThrottledError) Throttled() bool { return true }

// Throttled marks err as a throttling refusal (nil stays nil).
func Throttled(err error) error {
	if err == nil || IsThrottled(err) {
		return err
	}
	return &ThrottledError{Err: err}
}

// IsThrottled reports whether err is a throttling refusal: an error in its
// chain that says so with a Throttled() bool method (ThrottledError).
func IsThrottled(err error) bool {
	var t interface{ Throttled() bool }
	return errors.As(err, &t) && t.Throttled()
}

// FinalError marks a permanent refusal of a message the destination applied,
// but not as it was sent (an SQS checksum mismatch: the body it holds
// differs from the one sent). Sending it again would only add copies, so
// it is never sent again: the session's on_sink_refusal policy decides at
// once, whatever the attempts left.
type FinalError struct{ Err error }

func (e *FinalError) Error() string   { return e.Err.Error() }
func (e *FinalError) Unwrap() error   { return e.Err }
func (e *FinalError) Permanent() bool { return true }

// Final marks err as a final refusal (nil stays nil): permanent, and never
// to be sent again.
func Final(err error) error {
	if err == nil || IsFinal(err) {
		return err
	}
	return &FinalError{Err: err}
}

// IsFinal reports whether err is a final refusal (a FinalError in its
// chain).
func IsFinal(err error) bool {
	var fe *FinalError
	return errors.As(err, &fe)
}
