// The close state machine: ending a session (Interrupt), dropping a
// connection to reconnect, and attaching and detaching connections.

package session

import (
	"context"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/waitfor"
)

// Interrupt ends the session with a terminal reason. A lease that is no
// longer ours (lost, untrusted, expired) or a crash closes the socket at
// once; shutdown (1001) and stop (1000) close it with a handshake bounded by
// CloseGrace. It never blocks; the first reason wins, but a later reason
// that must close at once still cuts a handshake short.
func (s *Session) Interrupt(reason error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, graceful := closeCodeFor(reason)
	if s.end != nil {
		if !graceful && s.conn != nil {
			s.conn.Abort()
		}
		return
	}
	s.end = reason
	close(s.ended) // ends a back-off's sleep, a stalled Submit, a frame wait
	if s.dialCancel != nil {
		s.dialCancel()
	}
	if s.conn != nil {
		s.closeLocked(reason)
	}
	if s.next != nil {
		s.next.dropped = true
		s.closeNextLocked(s.next, reason)
	}
}

// reconnect asks the session to drop its connection and dial again.
func (s *Session) reconnect(reason error, conn Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end != nil || s.conn != conn || s.conn == nil {
		return
	}
	s.kick = reason
	s.closeLocked(reason)
}

// closeLocked starts closing the current connection for reason.
func (s *Session) closeLocked(reason error) { s.closeConn(s.conn, reason) }

// closeConn starts closing conn for reason. It
// runs under mu, while a connection is attached or a planned reconnect's
// goroutine runs (so that every closers.Add precedes Run's Wait).
func (s *Session) closeConn(conn Conn, reason error) {
	code, graceful := closeCodeFor(reason)
	if !graceful {
		s.hardClose(conn)
		return
	}
	grace := s.env.Config.CloseGrace
	s.closers.Add(1)
	go func() {
		defer s.closers.Done()
		t := time.NewTimer(grace)
		defer t.Stop()
		if done, ok := waitfor.Until(func() { _ = conn.Close(code, closeText(code)) }, t.C); !ok {
			s.hardClose(conn)
			<-done // the close handshake returns once the connection is gone
		}
	}()
}

// hardClose closes the transport under conn at once; the blocked read
// returns and the Conn tears itself down.
func (s *Session) hardClose(conn Conn) {
	if conn.Abort() {
		return
	}
	s.closers.Add(1)
	go func() {
		defer s.closers.Done()
		_ = conn.CloseNow()
	}()
}

func (s *Session) terminal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end
}

// check returns the terminal reason, if any.
func (s *Session) check(ctx context.Context) error {
	if err := s.terminal(); err != nil {
		return err
	}
	if err := s.held.Err(); err != nil { // ended (Done is made only by a wait on it)
		s.Interrupt(err)
		return s.terminal()
	}
	if ctx.Err() != nil {
		s.Interrupt(ErrCrashed)
		return s.terminal()
	}
	return nil
}

// sleep waits d, or less when the session must act (terminal reason, a
// generation newer than gen, the one it connected or dialed last: at once
// when the item's already is).
func (s *Session) sleep(ctx context.Context, d time.Duration, gen int64) {
	changed := s.held.Changed()
	select {
	case <-changed: // a signal from before: the generation says
	default:
	}
	if s.held.Generation() != gen {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.ended:
	case <-s.held.Done():
	case <-changed:
	case <-ctx.Done():
	}
}

// attach makes conn the session's connection unless the session already
// ended, in which case it closes conn (per the reason) and waits for it.
func (s *Session) attach(conn Conn, it lease.Item, p *proto) bool {
	s.touch()
	s.mu.Lock()
	s.conn, s.connGen, s.kick, s.proto = conn, it.Generation, nil, p
	cfg := s.env.Config
	now := time.Now()
	// The first ping, if the connection stays silent, at a random phase
	// past the first interval (sessions claimed together do not ping
	// together).
	s.nextPin = now.Add(time.Duration(float64(cfg.PingEvery) * (1 + s.rnd.Float64()/2)))
	s.pingSeen, s.activeAt = s.activity(), now
	s.planAt, s.failedPlans = time.Time{}, 0
	if p.maxAge > 0 {
		s.planAt = now.Add(planDelay(p, s.rnd))
	}
	s.nextAppPing = now.Add(p.pingEvery)
	s.Poke() // the new connection's schedule
	s.skipRefused.Store(p.skipRefused)
	if s.end != nil {
		s.closeLocked(s.end)
		s.mu.Unlock()
		s.detach(conn)
		return false
	}
	s.mu.Unlock()
	s.connected.Store(true)
	return true
}

// detach waits until conn is fully closed and forgets it; it returns the
// reconnect reason that was set, if any.
func (s *Session) detach(conn Conn) error {
	// CloseNow waits for a close handshake in progress (bounded by
	// CloseGrace, after which the socket is closed under it).
	_ = conn.CloseNow()
	conn.Abort()
	s.connected.Store(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	kick := s.kick
	s.conn, s.kick = nil, nil
	return kick
}
