// Planned reconnects (make-before-break): before a connection reaches the
// session's max_connection_age, or when the source says it will close it
// (reconnect_on), the next connection is dialed, opened and read in a
// goroutine of its own while the current one keeps delivering. Once the new
// connection caught up (it read a seq the session already delivered, or the
// next one), Run closes the current connection and goes on from the new
// one: what both connections carried is dropped by the session's dedupe, so
// nothing is lost or delivered twice, and the session is never dark.
//
// Both connections belong to the session's one tenure: the new one is
// dialed only while the lease is trusted, never delivers (only Run's
// goroutine does, through offer and its trust check), and an Interrupt (a
// stop, a lost tenure, a shutdown) closes both.

package session

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/draw"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/jsonseq"
)

// errSwitch is the reason Run's connection closes (1000) when the new
// connection of a planned reconnect caught up.
var errSwitch = errors.New("planned reconnect: switched to the new connection")

// errPlanned marks why a planned reconnect's new connection was given up
// (the current one stays).
var errPlanned = errors.New("planned reconnect")

// What started a planned reconnect.
const (
	PlanAge    = "max_connection_age"
	PlanNotice = "reconnect_on"
)

// MaxPlanAttempts is how many planned reconnects one connection tries: a
// source that refuses a second connection is not dialed again and again
// (Binance bans addresses that reconnect too often); the connection then
// ends on the source's schedule and the session reconnects as usual.
const MaxPlanAttempts = 3

// MaxSwitchBytes bounds what a new connection may hold before the switch
// (the messages it read past the session's last delivered seq): a new
// connection that runs that far ahead of the current one is given up. All
// of them together hold at most the worker's SwitchBudget (Env.Switch).
const MaxSwitchBytes = 8 << 20

// successor is the new connection of a planned reconnect.
type successor struct {
	cause   string
	started time.Time
	gen     int64 // the generation it is dialed for
	p       *proto
	budget  *SwitchBudget   // the worker's, charged with buf's bytes (charged)
	ctx     context.Context // ends the dial, the open and the catch-up at the switch deadline
	cancel  context.CancelFunc
	done    chan struct{} // closed when its goroutine returned

	// Under the session's mu: the connection once dialed (closing: an
	// Interrupt or a give-up started closing it).
	conn    Conn
	closing bool
	// dropped: the session let it go (an Interrupt, a new generation, a
	// reconnect): not a failed attempt.
	dropped bool

	// orphan: Run's connection ended first; the new connection takes over
	// at its next message.
	orphan atomic.Bool

	// The goroutine's own until done; Run's after.
	buf     []pending
	head    int   // buf[:head] are gone (delivered by the current connection meanwhile)
	bytes   int   // bytes of buf[head:]
	charged int64 // bytes of buf[head:] reserved from budget (freeBuffer gives them back)
	first   int64 // the first seq the new connection read; lease.NoSeq before
	overlap int64 // messages it read that the current connection delivered
	readyAt time.Time
	err     error
}

// pending is a message a new connection read before the switch.
type pending struct {
	seq  int64 // lease.NoSeq: none (or seq_mode none)
	typ  websocket.MessageType
	data []byte
}

// planDelay is when a connection of p starts its planned reconnect: before
// max_connection_age by the switch's lead (the switch deadline, at most a
// quarter of the age) and a jitter (up to a tenth of the age, at most 5
// minutes, drawn from r), so that sessions claimed together do not all
// reconnect at once.
func planDelay(p *proto, r *draw.Stream) time.Duration {
	lead := min(p.switchTimeout, p.maxAge/4)
	jitter := min(p.maxAge/10, 5*time.Minute)
	return p.maxAge - lead - time.Duration(r.Int64N(int64(jitter)+1))
}

// plan starts a planned reconnect for cause, unless one is under way, the
// session is ending or reconnecting, or the last attempt failed less than
// its backoff ago.
func (s *Session) plan(cause string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.planLocked(cause, time.Now())
}

func (s *Session) planLocked(cause string, now time.Time) {
	p := s.proto
	if s.end != nil || s.conn == nil || s.kick != nil || s.next != nil || p == nil || !p.planned || now.Before(s.retryAt) ||
		s.failedPlans >= MaxPlanAttempts {
		return
	}
	if s.held.Remaining() <= 0 || s.held.Item().Generation != s.connGen {
		return // the tenure is ending, or a new generation reconnects anyway
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.switchTimeout)
	nx := &successor{cause: cause, started: now, gen: s.connGen, p: p, budget: s.env.Switch, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), first: lease.NoSeq}
	s.next = nx
	// A connection is attached (s.conn != nil): Run has not returned, so
	// this Add happens before its closers.Wait.
	s.closers.Add(1)
	go func() {
		defer s.closers.Done()
		s.follow(nx)
	}()
}

// follow runs a planned reconnect's new connection until it caught up (it
// then stops reading it, and asks Run to switch) or is given up.
func (s *Session) follow(nx *successor) {
	defer close(nx.done)
	defer nx.cancel()
	err := s.catchUp(nx)
	s.mu.Lock()
	if err == nil && s.next == nx && s.end == nil && !nx.closing {
		nx.readyAt = time.Now()
		if s.conn != nil && s.kick == nil {
			s.kick = errSwitch
			s.closeLocked(errSwitch)
		}
		// else Run's connection already ended: Run is waiting for this one
		// (orphan), or drops it (a new generation, a reconnect).
		s.mu.Unlock()
		return
	}
	if err == nil {
		err = errors.New("the session moved on")
	}
	nx.err = err
	nx.freeBuffer()
	s.closeNextLocked(nx, errPlanned)
	if s.next == nx {
		s.next = nil
	}
	failed := s.end == nil && !nx.dropped
	if failed {
		s.failedPlans++
		s.retryAt = time.Now().Add(s.reconnectBackoff(nx.p).Next(s.failedPlans-1, s.rnd))
	}
	s.Poke() // the next attempt's schedule (Tick)
	s.mu.Unlock()
	if failed {
		s.planFailed(nx, err)
	}
}

// catchUp dials and opens nx and reads it until it caught up.
func (s *Session) catchUp(nx *successor) error {
	if s.held.Remaining() <= 0 {
		return lease.ErrUntrusted
	}
	it := s.held.Item()
	if it.Generation != nx.gen {
		return errGeneration
	}
	conn, frames, err := s.dialOn(nx.ctx, it, nx.p)
	if err != nil {
		return err
	}
	s.mu.Lock()
	nx.conn = conn
	if s.end != nil || s.next != nx {
		s.mu.Unlock()
		return errors.New("the session moved on")
	}
	s.mu.Unlock()
	// At the deadline the new connection is closed with a handshake (a
	// read bounded by the context would drop it without one).
	stop := context.AfterFunc(nx.ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closeNextLocked(nx, errPlanned)
	})
	defer stop()
	if err := s.open(conn, it, nx.p, frames); err != nil {
		return err
	}
	p := nx.p
	for {
		typ, r, err := conn.Reader(context.Background())
		var data []byte
		var grant int64
		if err == nil {
			// A large message takes a grant only if one is free now (nil
			// wait): the session's read loop may hold one, and a session
			// never waits for a second.
			data, grant, err = s.readMessage(r, nil, nil)
		}
		if errors.Is(err, errFrameWait) {
			return fmt.Errorf("%w: the worker's large-frame budget had no room for a message of more than %d bytes", errPlanned, schema.SmallFrameAllowance)
		}
		if err != nil {
			if nx.ctx.Err() != nil {
				return fmt.Errorf("%w: the new connection did not catch up within %v", errPlanned, p.switchTimeout)
			}
			return fmt.Errorf("%w: the new connection ended before it caught up: %s", errPlanned, describe(err, nil))
		}
		ready, err := s.catchUpOne(nx, conn, it, typ, data)
		// Kept or dropped: a kept message is charged to the switch budget.
		s.env.Frames.Release(grant)
		if err != nil || ready {
			return err
		}
	}
}

// catchUpOne answers a control message of the new connection, or keeps
// the message (take).
func (s *Session) catchUpOne(nx *successor, conn Conn, it lease.Item, typ websocket.MessageType, data []byte) (bool, error) {
	consumed, err := s.control(conn, it, nx.p, typ, data)
	if err != nil || consumed {
		return false, err
	}
	return nx.take(typ, data, s.lastSeq.Load())
}

// take keeps one message of the new connection, given the session's last
// delivered seq, and reports whether the new connection caught up: it
// carries the next seq to deliver, or one already delivered (its seqs then
// run on from there without a gap). Without seqs (seq_mode none) the first
// message switches. Once Run's connection ended (orphan) any message does.
func (nx *successor) take(typ websocket.MessageType, data []byte, last int64) (bool, error) {
	p := nx.p
	if p.none {
		if !nx.keep(lease.NoSeq, typ, data) {
			return false, nx.overBudget(len(data))
		}
		return true, nil
	}
	seq, err := jsonseq.FindPath(data, p.seqPath)
	nx.trim(last)
	switch {
	case err != nil && nx.head == len(nx.buf):
		// Without a seq, before any kept message: what the current
		// connection carries too (or not at all), as far as anybody knows.
		nx.overlap++
	case err != nil:
		if !nx.keep(lease.NoSeq, typ, data) {
			return false, nx.overBudget(len(data))
		}
	default:
		if nx.first == lease.NoSeq {
			nx.first = seq
		}
		if seq <= last {
			nx.overlap++
		} else if !nx.keep(seq, typ, data) {
			return false, nx.overBudget(len(data))
		}
	}
	if nx.bytes > MaxSwitchBytes {
		return false, fmt.Errorf("%w: the new connection ran %d bytes ahead of the current one", errPlanned, nx.bytes)
	}
	caught := nx.first != lease.NoSeq && (last == lease.NoSeq || nx.first <= last+1)
	return caught || (nx.orphan.Load() && nx.head < len(nx.buf)), nil
}

// keep keeps one message, charged to the worker's budget first; false
// (not kept) when the budget is full.
func (nx *successor) keep(seq int64, typ websocket.MessageType, data []byte) bool {
	if !nx.budget.reserve(int64(len(data))) {
		return false
	}
	nx.charged += int64(len(data))
	nx.buf = append(nx.buf, pending{seq: seq, typ: typ, data: data})
	nx.bytes += len(data)
	return true
}

// overBudget is the give-up of a new connection whose next message of n
// bytes does not fit the worker's budget.
func (nx *successor) overBudget(n int) error {
	return fmt.Errorf("%w: the worker's switch buffer budget (%d bytes, every planned reconnect's) has no room for %d more bytes after the %d this new connection holds",
		errPlanned, nx.budget.limit, n, nx.bytes)
}

// freeBuffer drops what nx kept and gives its bytes back to the budget
// (its goroutine's call once it gave up; Run's once it switched or
// dropped it). Calling it again does nothing.
func (nx *successor) freeBuffer() {
	nx.budget.release(nx.charged)
	nx.charged = 0
	nx.buf, nx.head, nx.bytes = nil, 0, 0
}

// trim drops the kept messages the current connection delivered meanwhile
// (seq <= last), and the seq-less ones before them.
func (nx *successor) trim(last int64) {
	drop := -1
	for j := nx.head; j < len(nx.buf); j++ {
		if sq := nx.buf[j].seq; sq != lease.NoSeq {
			if sq > last {
				break
			}
			drop = j
		}
	}
	for ; nx.head <= drop; nx.head++ {
		n := len(nx.buf[nx.head].data)
		nx.overlap++
		nx.bytes -= n
		nx.budget.release(int64(n))
		nx.charged -= int64(n)
		nx.buf[nx.head] = pending{}
	}
}

// closeNextLocked closes nx's connection (if dialed and not closing yet)
// for reason.
func (s *Session) closeNextLocked(nx *successor, reason error) {
	nx.cancel()
	if nx.conn == nil {
		return
	}
	_, graceful := closeCodeFor(reason)
	if nx.closing {
		if !graceful {
			nx.conn.Abort()
		}
		return
	}
	nx.closing = true
	s.closeConn(nx.conn, reason)
}

// planFailed records a planned reconnect that was given up: a failed
// connect (last_error, the table's note), while the current connection
// stays.
func (s *Session) planFailed(nx *successor, err error) {
	s.plannedFailed.Add(1)
	s.env.Counters.PlannedFailed.Add(1)
	text, now := ErrorText(err), time.Now()
	s.mu.Lock()
	s.failedLocked(DialFailure{Text: text, At: now, Generation: nx.gen})
	retry := time.Until(s.retryAt)
	note := s.shouldNoteLocked(text, now)
	s.mu.Unlock()
	s.Logger().Warn().Err(err).Str("cause", nx.cause).Dur("retry_in", retry).Msg("planned reconnect given up: the current connection stays")
	if note {
		if nerr := s.env.NoteError(context.Background(), s.held, nx.gen, text, now); nerr != nil {
			s.debug().Err(nerr).Msg("record last error")
		}
	}
}

// switchOver follows Run's connection that ended (kick: the reconnect
// reason set) when a planned reconnect is under way: it returns the new
// connection, attached and with what it read before the switch delivered
// (drainErr: the delivery's error, which ends the new connection as a read
// error would), or nil conn when there is none to go on with (Run then
// reconnects as usual).
func (s *Session) switchOver(ctx context.Context, st *runState, kick error) (conn Conn, drainErr error) {
	s.mu.Lock()
	nx := s.next
	s.mu.Unlock()
	if nx == nil {
		return nil, nil
	}
	switch {
	case errors.Is(kick, errSwitch):
	case kick == nil && s.check(ctx) == nil:
		// The source ended the current connection first: the new one,
		// under way, takes over at its next message (its deadline holds).
		nx.orphan.Store(true)
	default:
		s.mu.Lock()
		nx.dropped = true
		s.closeNextLocked(nx, errGeneration)
		s.mu.Unlock()
	}
	<-nx.done // bounded by the switch deadline; an Interrupt closes it at once
	// What it kept is Run's now: drained into the sink (which charges its
	// own budget) or dropped, it leaves the switch budget on return.
	defer nx.freeBuffer()
	s.mu.Lock()
	if s.next == nx {
		s.next = nil
	}
	if nx.err != nil || nx.closing || s.end != nil {
		s.closeNextLocked(nx, errGeneration)
		s.mu.Unlock()
		return nil, nil
	}
	s.mu.Unlock()
	it := s.held.Item()
	if it.Generation != nx.gen {
		s.mu.Lock()
		s.closeNextLocked(nx, errGeneration)
		s.mu.Unlock()
		return nil, nil
	}
	if !s.attach(nx.conn, it, nx.p) {
		return nil, nil // the session ended: attach closed it
	}
	conn = nx.conn
	if s.env.Opened != nil {
		s.env.Opened(s, false)
	}
	st.opened, st.gen, st.failures = time.Now(), nx.gen, 0
	s.reached = true
	dups := s.dups.Load()
	for _, m := range nx.buf[nx.head:] {
		if drainErr = s.handle(ctx, conn, m.typ, m.data); drainErr != nil {
			break
		}
	}
	overlap := nx.overlap + s.dups.Load() - dups
	saved := nx.readyAt.Sub(nx.started)
	s.planned.Add(1)
	s.overlapped.Add(overlap)
	s.gapSaved.Add(saved.Milliseconds())
	c := s.env.Counters
	c.PlannedReconnects.Add(1)
	c.SwitchOverlap.Add(overlap)
	c.GapSavedMs.Add(saved.Milliseconds())
	s.Logger().Info().Str("cause", nx.cause).Int64("overlap", overlap).Dur("gap_saved", saved).
		Int64("resume_after", s.lastSeq.Load()).Msg("planned reconnect: switched to the new connection")
	return conn, drainErr
}
