// Adoption: a session that starts from a standby's connection and window
// instead of a dial. Its Run takes the window at once and delivers it, the
// standby's goroutine hands the connection's reader over at its next
// message (appending that message), and the session delivers what is left
// and reads the connection itself: no dial, no gap, order kept (the window
// is FIFO and the reader changes hands at a message boundary).

package session

import (
	"context"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// NewAdopting returns a session for h whose Run starts from sb's connection
// (when sb holds one that reads the stream of h's generation; otherwise sb
// is dropped, its Run returns ErrPromoted, and the session dials as New's
// does). Everything else is a normal tenure's (Opened with first true,
// counters; under seq_mode none the numbering of h's epoch).
func NewAdopting(env *Env, h *lease.Held, claimedAtMs int64, sb *Standby, opts ...Option) *Session {
	s := New(env, h, claimedAtMs, opts...)
	s.extension().standby = sb
	return s
}

// adoption is what a session takes from its standby.
type adoption struct {
	conn    Conn
	p       *proto
	entries []entry
}

// adopt hands the connection and window to a session of generation gen,
// or (nil) drops the standby when it has no connection of gen reading the
// stream: the session then dials, and the standby's socket is closed at
// once so that the two never overlap for long.
func (sb *Standby) adopt(gen int64) *adoption {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.adopted || sb.end != nil {
		return nil
	}
	if sb.conn == nil || !sb.ready || sb.kick != nil || sb.gen != gen {
		sb.closeLocked(ErrPromoted, true)
		return nil
	}
	sb.adopted, sb.handed = true, make(chan struct{})
	sb.stopPingLocked()
	return &adoption{conn: sb.conn, p: sb.p, entries: sb.w.takeAll()}
}

// handover waits until sb's goroutine stopped reading (it met a message,
// or the connection ended: handErr), and returns what it appended since.
func (sb *Standby) handover(ctx context.Context, s *Session) ([]entry, error) {
	select {
	case <-sb.handed:
	case <-ctx.Done():
		_ = s.check(ctx) // a crash: the Interrupt closes the connection
		<-sb.handed      // the blocked read returns
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	tail := sb.tail
	sb.tail = nil
	return tail, sb.handErr
}

// adoptFirst is an adopting session's first connection (see connect):
// nil conn without stop when there is nothing to adopt (Run dials).
// drainErr ends the connection as a read error would.
func (s *Session) adoptFirst(ctx context.Context, st *runState) (conn Conn, drainErr error, stop bool, ret error) {
	if s.ext == nil || s.ext.standby == nil {
		return nil, nil, false, nil
	}
	sb := s.ext.standby
	s.ext.standby = nil // the session's from here on
	if err := s.check(ctx); err != nil {
		sb.Close(err)
		return nil, nil, true, err
	}
	it := s.held.Item()
	a := sb.adopt(it.Generation)
	if a == nil {
		return nil, nil, false, nil
	}
	s.reached = false
	if !s.attach(a.conn, it, a.p) {
		// The session ended: attach closed the connection; the standby's
		// goroutine lets go of it.
		_, _ = sb.handover(ctx, s)
		return nil, nil, true, s.check(ctx)
	}
	if s.env.Opened != nil {
		s.env.Opened(s, true)
	}
	s.Logger().Info().Str("ws_url", spec.RedactURL(a.p.url)).Int64("resume_after", s.lastSeq.Load()).
		Int("window", len(a.entries)).Msg("session open: adopted the standby's connection")
	st.first = false
	st.opened, st.gen = time.Now(), it.Generation
	// The window now, not at the standby's next message.
	drainErr = s.drain(ctx, a.conn, a.entries)
	tail, handErr := sb.handover(ctx, s)
	if drainErr == nil {
		drainErr = s.drain(ctx, a.conn, tail)
	}
	if drainErr == nil {
		drainErr = handErr
	}
	return a.conn, drainErr, false, nil
}

// drain delivers kept messages through handle (dedupe, numbering, sink).
func (s *Session) drain(ctx context.Context, conn Conn, entries []entry) error {
	for i := range entries {
		if err := s.handle(ctx, conn, entries[i].typ, entries[i].data); err != nil {
			return err
		}
		entries[i] = entry{}
	}
	return nil
}
