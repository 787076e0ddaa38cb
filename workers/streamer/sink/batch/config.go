package batch

// A Batcher's configuration: its defaults and their checks.

import (
	"errors"
	"fmt"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
)

// Config bounds batches. Zero MaxCount / MaxBytes take the sink's limits.
type Config struct {
	MaxCount int           // entries per request (≤ the sink's limit)
	MaxBytes int           // bytes per request (≤ the sink's limit)
	MaxDelay time.Duration // the longest a message waits for a batch to fill
	// PackWait is the longest a message of a slow session waits for other
	// sessions' messages to share its pack, when its pack group is shared
	// (Packing): a message waits max(MaxDelay, min(PackWait, gap/4)), gap
	// the session's smoothed time between messages. 0: MaxDelay only.
	PackWait time.Duration
	// MaxInFlight bounds the requests in flight for the whole worker.
	MaxInFlight int
	// SessionBufferBytes bounds a session's records not yet acknowledged;
	// a full buffer stalls the session's reads.
	SessionBufferBytes int
	// BufferBudget bounds the records not yet acknowledged of all sessions
	// together (the worker's memory budget for the sink); 0: no bound
	// beyond the sessions' own. A full budget stalls reads like a full
	// session buffer.
	BufferBudget int64
	// RequestTimeout bounds one request. A request is sent only when it
	// ends within the trust left to every tenure in it; the worker keeps it
	// inside its safety margin (streamer.Config.Validate).
	RequestTimeout time.Duration
	// PermanentAttempts is how many times an entry refused permanently is
	// sent before the batcher gives up on it (Tenure.Refused).
	PermanentAttempts int
	// RepeatFailures is how many times an entry may fail the same way
	// while the destination takes other records before the batcher gives
	// up on it as refused (RepeatedError, Tenure.Refused).
	RepeatFailures int
	// Retry is the backoff of a failed entry (per entry, by its attempts).
	Retry backoff.Policy
}

// DefaultConfig are the defaults.
func DefaultConfig() Config {
	return Config{
		MaxDelay:           10 * time.Millisecond,
		PackWait:           DefaultPackWait,
		MaxInFlight:        32,
		SessionBufferBytes: 4 << 20,
		RequestTimeout:     time.Second,
		PermanentAttempts:  3,
		RepeatFailures:     8,
		Retry:              backoff.Policy{Base: 50 * time.Millisecond, Max: 5 * time.Second},
	}
}

// Validate checks c against the sink's limits; it reports every problem.
func (c Config) Validate(l Limits) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.MaxCount < 0 || c.MaxCount > l.MaxCount {
		bad("batch max count %d: want 0 (the sink's %d) up to %d", c.MaxCount, l.MaxCount, l.MaxCount)
	}
	if c.MaxBytes < 0 || c.MaxBytes > l.MaxBytes || (c.MaxBytes > 0 && c.MaxBytes < l.MaxRecordBytes) {
		bad("batch max bytes %d: want 0 (the sink's %d) or %d..%d (a request must hold the largest record)", c.MaxBytes, l.MaxBytes, l.MaxRecordBytes, l.MaxBytes)
	}
	if c.MaxDelay < 0 {
		bad("batch max delay %s must not be negative", c.MaxDelay)
	}
	if c.PackWait < 0 || c.PackWait > MaxPackWait {
		bad("batch pack wait %s: want 0 (the max delay only) up to %s", c.PackWait, MaxPackWait)
	}
	if c.MaxInFlight < 1 {
		bad("batch requests in flight %d: want at least 1", c.MaxInFlight)
	}
	if c.SessionBufferBytes < l.MaxRecordBytes {
		bad("session buffer %d bytes: want at least the sink's largest record, %d", c.SessionBufferBytes, l.MaxRecordBytes)
	}
	if c.BufferBudget < 0 || (c.BufferBudget > 0 && c.BufferBudget < int64(l.MaxRecordBytes)) {
		bad("buffer budget %d bytes: want 0 (none) or at least the sink's largest record, %d", c.BufferBudget, l.MaxRecordBytes)
	}
	if c.RequestTimeout <= 0 {
		bad("batch request timeout %s must be positive", c.RequestTimeout)
	}
	if c.PermanentAttempts < 1 {
		bad("batch permanent attempts %d: want at least 1", c.PermanentAttempts)
	}
	if c.RepeatFailures < 2 {
		bad("batch repeat failures %d: want at least 2", c.RepeatFailures)
	}
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("batch retry: %w", err))
	}
	return errors.Join(errs...)
}
