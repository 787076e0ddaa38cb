package batch

// Every error the batcher returns of its own: a Submit given up as its
// session ends, and an entry refused after repeated failures.

import (
	"errors"
	"fmt"
)

// ErrStopped: Submit gave up because the session is ending.
var ErrStopped = errors.New("batch: session ending while its buffer was full")

// RepeatedError: an entry failed the same way Config.RepeatFailures times
// while the destination took other records. It is a refusal of the entry
// (sink.IsPermanent): its tenure decides (Tenure.Refused).
type RepeatedError struct {
	Failures int
	Err      error // the last failure
}

func (e *RepeatedError) Error() string {
	return fmt.Sprintf("refused: failed the same way %d times while the destination took other records: %v", e.Failures, e.Err)
}
func (e *RepeatedError) Unwrap() error   { return e.Err }
func (e *RepeatedError) Permanent() bool { return true }
