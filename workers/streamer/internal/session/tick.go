// The session's periodic duties, run from the worker's control loop: a new
// generation, the lease's end, idle timeouts and pings.

package session

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/source"
)

// TickCeiling is the longest the control loop leaves a session without a
// Tick: the backstop for an ended lease (the Keeper's observer interrupts
// the session at once; a silent session whose tenure ended otherwise, say
// replaced by a newer one of this worker, closes within it) and the
// resolution of a connection's last activity for pings (a connection is
// pinged between PingEvery and PingEvery + TickCeiling after its last
// message).
const TickCeiling = 2 * time.Second

// Due reports whether the control loop should run Tick at now: a session
// says when it next has something to do (Tick's schedule), and anything
// that changes it earlier pokes it (Poke).
func (s *Session) Due(now time.Time) bool { return now.UnixNano() >= s.due.Load() }

// NextDue is when the session is next due (Unix ns; 0: at the next pass).
// A loop may keep it (it changes only by the session's own Tick, or by a
// Poke, which Schedule.Poked reports).
func (s *Session) NextDue() int64 { return s.due.Load() }

// Poke makes the session due at the control loop's next pass (a new
// generation, a new connection, a planned reconnect that ended).
func (s *Session) Poke() {
	s.due.Store(0)
	if sc := s.env.Schedule; sc != nil {
		sc.pokes.Add(1) // after the store: a loop that sees it sees the 0
	}
}

// Schedule tells the control loop that a session was poked since it last
// asked: it then reads every session's NextDue again. Without a poke the
// loop keeps the due times Tick left (its own compact array), so that a
// pass over 19,000 sessions touches none of them that is not due.
type Schedule struct{ pokes atomic.Int64 }

// Poked reports (and forgets) whether any session was poked since the
// last call.
func (sc *Schedule) Poked() bool { return sc.pokes.Swap(0) > 0 }

// Tick runs the session's periodic duties from the worker's control loop:
// it reconnects when the lease brought a new generation, ends the session
// when its lease ended, and starts a ping when one is due; then it
// schedules its next run (Due). It never blocks.
func (s *Session) Tick(now time.Time) {
	if err := s.held.Err(); err != nil { // ended (Done is made only by a wait on it)
		s.Interrupt(err)
		s.due.Store(now.Add(TickCeiling).UnixNano())
		return
	}
	s.mu.Lock()
	conn := s.conn
	if conn == nil || s.end != nil || s.kick != nil {
		// Between connections: every pass, as attach pokes anyway.
		s.due.Store(0)
		s.mu.Unlock()
		return
	}
	// A mailbox re-read that brought a new generation (Held.SetItem): the
	// connection's is no longer the item's. One that arrives while no
	// connection is attached is found once one is (a dial reads the item
	// installed last).
	if s.held.Generation() != s.connGen {
		s.kick = errGeneration
		s.closeLocked(errGeneration)
		s.due.Store(0)
		s.mu.Unlock()
		return
	}
	p := s.proto
	if p.idle > 0 && now.UnixNano()-s.lastRead.Load() > int64(p.idle) {
		s.kick = errIdle
		s.closeLocked(errIdle)
		s.due.Store(0)
		s.mu.Unlock()
		return
	}
	if !s.planAt.IsZero() && !now.Before(s.planAt) && s.next == nil {
		s.planLocked(PlanAge, now)
	}
	cfg := s.env.Config
	// A connection that brought something in the last ping interval is
	// alive: no ping (each costs a goroutine, a timer and a frame each
	// way, for nothing its messages did not prove). One silent for an
	// interval is pinged, as soon as before.
	if a := s.activity(); a != s.pingSeen {
		s.pingSeen, s.activeAt = a, now
	}
	ping := cfg.PingEvery > 0 && !s.pinging && !now.Before(s.nextPin) && now.Sub(s.activeAt) >= cfg.PingEvery
	if ping {
		s.pinging = true
		s.nextPin = now.Add(cfg.PingEvery)
	}
	appPing := p.pingEvery > 0 && !s.appPinging && !now.Before(s.nextAppPing)
	if appPing {
		s.appPinging = true
		s.nextAppPing = now.Add(p.pingEvery)
	}
	s.due.Store(s.nextDueLocked(now, p).UnixNano())
	s.mu.Unlock()
	if ping {
		go s.ping(conn)
	}
	if appPing {
		msg := source.Render(p.pingMsg, s.vars(s.held.Item(), p))
		go s.appPing(conn, msg)
	}
}

// nextDueLocked is when the attached connection next has a duty (under
// mu, after Tick did what was due at now): its idle deadline, its planned
// reconnect, its next ping or app ping, and at most TickCeiling away.
func (s *Session) nextDueLocked(now time.Time, p *proto) time.Time {
	next := now.Add(TickCeiling)
	if p.idle > 0 {
		next = clock.Earliest(next, time.Unix(0, s.lastRead.Load()).Add(p.idle))
	}
	if !s.planAt.IsZero() && s.next == nil && s.failedPlans < MaxPlanAttempts {
		next = clock.Earliest(next, clock.Latest(s.planAt, s.retryAt))
	}
	if cfg := s.env.Config; cfg.PingEvery > 0 {
		next = clock.Earliest(next, clock.Latest(s.nextPin, s.activeAt.Add(cfg.PingEvery)))
	}
	if p.pingEvery > 0 {
		next = clock.Earliest(next, s.nextAppPing)
	}
	return next
}

// activity counts what the current connection brought: messages
// delivered, duplicates, messages without a seq, control messages.
func (s *Session) activity() int64 {
	return s.messages.Load() + s.dups.Load() + s.missingDropped.Load() + s.controls.Load()
}

func (s *Session) ping(conn Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), s.env.Config.PingTimeout)
	err := conn.Ping(ctx)
	cancel()
	s.mu.Lock()
	s.pinging = false
	s.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		s.Logger().Warn().Dur("timeout", s.env.Config.PingTimeout).Msg("no pong: reconnecting")
		s.reconnect(errPing, conn)
	}
}
