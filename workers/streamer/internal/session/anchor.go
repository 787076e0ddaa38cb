// The anchor: the first checkpoint of a session that has none, written
// before its first delivery.

package session

import (
	"context"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// anchorOf is the anchor of a session whose first message to deliver is
// first: the seq before it, which a source resuming from the next seq
// answers with first (from=first, {{resume_from}} = first). ok is false for
// a first seq below 1: its seq before would read as no checkpoint.
func anchorOf(first int64) (seq int64, ok bool) {
	if first < 1 {
		return lease.NoSeq, false
	}
	return first - 1, true
}

// anchor writes the anchor before the first message this tenure delivers
// (seq first), when its session has no checkpoint: without it a new owner
// of a tenure that ends before the first checkpoint after a delivery lands
// (a crash, or a starved worker fenced by its missed heartbeats) would dial
// without the resume parameter, and what the source sent from this
// tenure's last delivery until that dial would be lost. The message waits
// for the write (one store write per session lifetime; retried while the
// table throttles it), which the session's end cuts short as it does a
// dial (dialCancel: both run on Run's goroutine). Once it landed, the
// connection's resume point is the anchor too, so that a reconnect of this
// tenure resumes from first. An error stops the read: the tenure ended
// (errInvalid), or the session is ending.
func (s *Session) anchor(ctx context.Context, first int64) error {
	seq, ok := anchorOf(first)
	if !ok || s.env.Anchor == nil || s.held.Checkpointed() != lease.NoSeq {
		return nil
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	if s.end != nil {
		s.mu.Unlock()
		return s.end
	}
	s.dialCancel = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.dialCancel = nil
		s.mu.Unlock()
	}()
	// The store's call chain (the SDK's, in the binary) runs on a fresh
	// stack: on Run's goroutine it would grow the stack every session
	// keeps for its life (onFreshStack).
	if _, err := onFreshStack(func() (struct{}, error) { return struct{}{}, s.env.Anchor(actx, s.held, seq) }); err != nil {
		if s.held.Err() != nil {
			return s.invalid()
		}
		return err
	}
	s.lastSeq.Store(seq)
	return nil
}
