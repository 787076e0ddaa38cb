// The run loop: connect, read, reconnect with backoff, and give up on a
// source that never connects.

package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/coder/websocket"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// Run holds the session until a terminal reason, which it returns:
// ErrShutdown, ErrStopRequested, ErrCrashed, ErrSourceFailed (a permanent
// dial error, or MaxDialFailures failed connects in a row) or the lease's
// own error. ctx bounds sink calls and waits; cancelling it is a crash (the
// caller also interrupts). The caller releases the lease afterwards (or,
// after ErrSourceFailed, records the failure).
func (s *Session) Run(ctx context.Context) error {
	// A close starts only while a connection is attached (closeLocked), and
	// none is once the loop returned: every Add happens before this Wait.
	defer s.closers.Wait()
	return s.run(ctx)
}

func (s *Session) run(ctx context.Context) error {
	// Run's goroutine lives as long as the session and spends its life in
	// read: the frames under read stay small (the item, the dial and the
	// logging live in connect's and reconnectWait's frames, gone by then),
	// so that the per-message path fits the goroutine's 4 KiB stack.
	st := runState{first: true}
	// An adopting session starts from its standby's connection; without
	// one ready it dials as any other.
	conn, openErr, stop, ret := s.adoptFirst(ctx, &st)
	if conn == nil && !stop {
		conn, openErr, stop, ret = s.connect(ctx, &st)
	}
	for {
		if stop {
			return ret
		}
		if conn == nil {
			// the dial failed: backed off, dial again
			conn, openErr, stop, ret = s.connect(ctx, &st)
			continue
		}
		readErr := openErr
		if readErr == nil {
			readErr = s.read(ctx, conn)
		}
		kick := s.detach(conn)
		// A planned reconnect's new connection goes on where this one ended.
		if conn, openErr = s.switchOver(ctx, &st, kick); conn != nil {
			continue
		}
		if term := s.reconnectWait(ctx, &st, openErr, readErr, kick); term != nil {
			return term
		}
		conn, openErr, stop, ret = s.connect(ctx, &st)
	}
}

// runState is Run's bookkeeping across connections.
type runState struct {
	attempt int
	// failures counts the failed connects of failGen in a row. A connect
	// fails unless its connection reaches the source's first message (see
	// Session.reached): a source that accepts the handshake and then
	// refuses the open messages, never meets a wait_for or closes at once
	// is as broken as one that refuses the handshake, and would otherwise
	// be re-sent its credentials every backoff, forever.
	failures int
	failGen  int64
	first    bool      // no connection opened yet in this tenure
	opened   time.Time // when the current connection was attached
	gen      int64     // the generation the current connection was dialed for
}

// connect dials the item's source, attaches the connection and sends the
// open messages (openErr: they failed; the connection is attached all the
// same, for Run to detach). stop: Run returns ret. A nil conn without stop:
// the dial failed and the session has backed off; dial again.
func (s *Session) connect(ctx context.Context, st *runState) (conn Conn, openErr error, stop bool, ret error) {
	if err := s.check(ctx); err != nil {
		return nil, nil, true, err
	}
	it := s.held.Item()
	p, perr := s.protoFor(it)
	if perr != nil {
		s.Interrupt(fmt.Errorf("%w: %w", ErrSourceFailed, perr))
		return nil, nil, true, s.terminal()
	}
	conn, frames, err := s.dial(ctx, it, p)
	if err != nil {
		if term := s.check(ctx); term != nil {
			return nil, nil, true, term
		}
		if term := s.connectFailed(ctx, st, p, err, it.Generation, "dial"); term != nil {
			return nil, nil, true, term
		}
		return nil, nil, false, nil
	}
	s.reached = false
	if !s.attach(conn, it, p) {
		return nil, nil, true, s.check(ctx)
	}
	if s.env.Opened != nil {
		s.env.Opened(s, st.first)
	}
	if st.first {
		s.Logger().Info().Str("ws_url", spec.RedactURL(p.url)).Int64("resume_after", s.lastSeq.Load()).Msg("session open")
	} else {
		s.debug().Str("ws_url", spec.RedactURL(p.url)).Int64("resume_after", s.lastSeq.Load()).Msg("reconnected")
	}
	st.first = false
	st.opened, st.gen = time.Now(), it.Generation
	return conn, s.open(conn, it, p, frames), false, nil
}

// reconnectWait follows a connection that ended (openErr: its open
// messages failed; readErr: why it ended; kick: the reconnect reason set,
// if any): the terminal reason if the session must end, otherwise nil once
// the backoff before the next dial has passed (none for a new generation).
func (s *Session) reconnectWait(ctx context.Context, st *runState, openErr, readErr, kick error) error {
	if term := s.check(ctx); term != nil {
		return term
	}
	s.reconnects.Add(1)
	s.env.Counters.Reconnects.Add(1)
	if errors.Is(kick, errGeneration) {
		// The configuration that failed (if it did) is gone: the new one
		// gets all its tries (connectFailed compares generations).
		s.Logger().Info().Msg("new generation: reconnecting")
		st.attempt = 0
		return nil
	}
	if !s.reached {
		// A failed connect, however long the connection stayed open: it
		// counts like a failed dial, and backs off like one (a wait_for
		// timeout longer than StableAfter must not reset the backoff).
		// The cause: the open messages' failure, unless the session itself
		// dropped the connection (kick: idle, ping), which says more.
		cause := openErr
		if cause == nil || kick != nil {
			cause = fmt.Errorf("connection ended before the first message: %s", describe(readErr, kick))
		}
		return s.connectFailed(ctx, st, s.proto, cause, st.gen, "connect")
	}
	st.failures = 0
	if time.Since(st.opened) >= s.env.Config.StableAfter {
		st.attempt = 0
	}
	d := s.reconnectBackoff(s.proto).Next(st.attempt, s.rnd)
	st.attempt++
	s.Logger().Info().Str("cause", describe(readErr, kick)).Dur("retry_in", d).Msg("connection ended: reconnecting")
	s.sleep(ctx, d, st.gen)
	return nil
}

// connectFailed counts a failed connect of generation gen, compiled as p
// (what: "dial" when the handshake failed, "connect" when the connection
// ended before its first message) and records err: the terminal reason
// when the session must end (dialFailed), otherwise nil once the backoff
// has passed.
func (s *Session) connectFailed(ctx context.Context, st *runState, p *proto, err error, gen int64, what string) error {
	if gen != st.failGen {
		st.failures, st.failGen = 0, gen // a new configuration gets all its tries
	}
	st.failures++
	if term := s.dialFailed(ctx, err, gen, st.failures); term != nil {
		return term
	}
	d := s.reconnectBackoff(p).Next(st.attempt, s.rnd)
	ev := s.debug() // a retry's line; the first failure warns
	if st.attempt == 0 {
		ev = s.Logger().Warn()
	}
	ev.Err(err).Int("attempt", st.attempt+1).Int("failures", st.failures).Dur("retry_in", d).Msg(what)
	st.attempt++
	s.sleep(ctx, d, gen)
	return nil
}

// dialFailed keeps err (a failed connect) as the session's last error and
// decides: a terminal ErrSourceFailed after a permanent error or too many
// failed connects in a row; otherwise nil, after recording the error in the
// table when it is new and the last record is old enough.
func (s *Session) dialFailed(ctx context.Context, err error, gen int64, failures int) error {
	text, now := ErrorText(err), time.Now()
	limit := s.env.Config.MaxDialFailures
	s.mu.Lock()
	s.failedLocked(DialFailure{Text: text, At: now, Generation: gen})
	note := !Permanent(err) && !(limit > 0 && failures >= limit) && s.shouldNoteLocked(text, now)
	s.mu.Unlock()
	switch {
	case Permanent(err):
		s.Interrupt(fmt.Errorf("%w: %s", ErrSourceFailed, text))
		return s.terminal()
	case limit > 0 && failures >= limit:
		s.Interrupt(fmt.Errorf("%w: %d connects failed in a row, the last: %s", ErrSourceFailed, failures, text))
		return s.terminal()
	}
	if note {
		if nerr := s.env.NoteError(ctx, s.held, gen, text, now); nerr != nil {
			s.debug().Err(nerr).Msg("record last error")
		}
	}
	return nil
}

// connectFailures is a session's record of its failed connects: the last
// one, and the last one recorded in the table (noted at notedAt).
type connectFailures struct {
	last    DialFailure
	noted   string
	notedAt time.Time
}

// failedLocked keeps f as the last failed connect (under mu).
func (s *Session) failedLocked(f DialFailure) {
	if s.fails == nil {
		s.fails = &connectFailures{}
	}
	s.fails.last = f
}

// shouldNoteLocked reports whether text (a transient failed connect at
// now, kept by failedLocked) is recorded in the table, and if so takes it
// as the last recorded.
func (s *Session) shouldNoteLocked(text string, now time.Time) bool {
	if s.env.NoteError == nil || !ShouldNote(text, s.fails.noted, s.fails.notedAt, now) {
		return false
	}
	s.fails.noted, s.fails.notedAt = text, now
	return true
}

// ShouldNote reports whether a transient error text seen at now is recorded
// in the table, given the last recorded one (noted at notedAt; zero: none):
// only a different text, and at most once per NoteErrorEvery.
func ShouldNote(text, noted string, notedAt, now time.Time) bool {
	return text != noted && (notedAt.IsZero() || now.Sub(notedAt) >= NoteErrorEvery)
}

func describe(readErr, kick error) string {
	if kick != nil {
		return kick.Error()
	}
	if code := websocket.CloseStatus(readErr); code != -1 {
		return "source closed with status " + strconv.Itoa(int(code))
	}
	if readErr == nil {
		return "unknown"
	}
	return readErr.Error()
}
