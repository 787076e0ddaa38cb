package feed

// Serving one admitted connection: writing the session's messages, the
// server's pings, the max-age schedule, and closing the connection as the
// cause that ended it says.

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// StatusKicked is the close code sent to a connection replaced by a newer one.
const StatusKicked websocket.StatusCode = 4000

// ShutdownEvent is the "e" of the notice a connection gets
// Config.ShutdownNotice before it reaches Config.MaxConnAge (Binance
// WebSocket API style): {"e":"serverShutdown","E":MS}. It carries no seq.
const ShutdownEvent = "serverShutdown"

// Why the server ended a connection (the cause of its context).
var (
	errShutdown  = errors.New(ReasonShutdown)
	errKicked    = errors.New(ReasonKicked)
	errAborted   = errors.New(ReasonAborted)
	errPingLost  = errors.New(ReasonPingLost)
	errWriteFail = errors.New(ReasonWriteErr)

	errNoSubscribe   = errors.New(ReasonNoSubscribe)
	errKeepaliveLost = errors.New(ReasonKeepaliveLost)
	errMaxAge        = errors.New(ReasonMaxAge)
)

type dropped struct{ code websocket.StatusCode }

func (dropped) Error() string { return ReasonDropped }

// seqDuration is how long the feed takes to produce n messages.
func (s *Server) seqDuration(n int64) time.Duration { return SeqDuration(s.cfg.Rate, n) }

// pump writes the session's messages to one connection until it ends, then
// closes it as its cause says and waits for its reader.
func (s *Server) pump(c *conn, ws *websocket.Conn, t0 time.Time, next int64) {
	read, readEnded := context.WithCancel(context.Background()) // done when the reader returned
	in := newInbox()
	go func() {
		defer readEnded()
		for {
			// Not c.ctx: cancelling a read aborts the connection without a
			// close frame. The reader ends with the connection.
			typ, data, err := ws.Read(context.Background())
			if err != nil {
				s.ended(c, websocket.CloseStatus(err))
				return
			}
			if typ == websocket.MessageText {
				in.got(data)
			}
		}
	}()
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		s.keepalive(c, ws, read)
	}()
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		s.keepaliveRequests(c, ws, read, in)
	}()
	aged := make(chan struct{})
	go func() {
		defer close(aged)
		s.schedule(c, ws, read)
	}()
	if s.cfg.SubscribeWithin > 0 {
		next = s.awaitSubscribe(c, ws, read, in, next)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	buf := make([]byte, 0, 96+len(c.rec.Session)+s.cfg.PayloadBytes)
	pad := strings.Repeat("x", s.cfg.PayloadBytes)
	for {
		if wait := time.Until(t0.Add(s.seqDuration(next))); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-read.Done():
			case <-c.ctx.Done():
			}
		}
		if read.Err() != nil || c.ctx.Err() != nil {
			break
		}
		typ := websocket.MessageText
		// ts is when seq next was produced: the same bytes on every
		// connection of the session, as a source broadcasts one event to
		// all its subscribers (a standby aligns on them).
		ts := t0.Add(s.seqDuration(next)).UnixMilli()
		if kind := s.poisonOf(c.rec.Session, next); kind != PoisonOff {
			buf = appendPoisoned(buf[:0], kind, c.rec.Session, next, ts)
		} else {
			buf, typ = appendShaped(buf[:0], s.cfg.Shape, c.rec.Session, next, ts, pad, c.rec.AuthDigest)
		}
		wctx, cancel := context.WithTimeout(context.Background(), s.cfg.WriteTimeout)
		err := ws.Write(wctx, typ, buf)
		cancel()
		if err != nil {
			if read.Err() == nil {
				c.stop(errWriteFail)
			}
			break
		}
		s.sent(c, next)
		next++
	}
	var d dropped
	switch cause := context.Cause(c.ctx); {
	case cause == nil, errors.Is(cause, errAborted), errors.Is(cause, errPingLost):
		_ = ws.CloseNow() // nil: the client closed or went away
	case errors.Is(cause, errKicked):
		s.closeWS(ws, StatusKicked, "replaced by a newer connection")
	case errors.As(cause, &d):
		s.closeWS(ws, d.code, "dropped by feed control")
	case errors.Is(cause, errShutdown):
		s.closeWS(ws, websocket.StatusGoingAway, "feed shutting down")
	case errors.Is(cause, errNoSubscribe):
		s.closeWS(ws, websocket.StatusPolicyViolation, "no subscribe in time")
	case errors.Is(cause, errKeepaliveLost):
		s.closeWS(ws, websocket.StatusPolicyViolation, "keep-alive not answered")
	case errors.Is(cause, errMaxAge):
		s.closeWS(ws, websocket.StatusGoingAway, "connection reached its max age")
	default: // errWriteFail
		s.closeWS(ws, websocket.StatusPolicyViolation, "write timed out")
	}
	<-read.Done()
	c.stop(nil)
	<-pinged
	<-kept
	<-aged
}

// schedule ends c when it reaches its max age (ReasonMaxAge), when it has
// one, after sending it the shutdown notice that long before, when it has
// one. The pump goes on writing the stream meanwhile.
func (s *Server) schedule(c *conn, ws *websocket.Conn, read context.Context) {
	if c.maxAge <= 0 {
		return
	}
	wait := func(at time.Time) bool {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-c.ctx.Done():
			return false
		case <-read.Done():
			return false
		case <-t.C:
			return true
		}
	}
	if c.notice > 0 {
		if !wait(c.rec.OpenedAt.Add(c.maxAge - c.notice)) {
			return
		}
		now := time.Now()
		s.mu.Lock()
		c.rec.NoticeAt = now
		s.mu.Unlock()
		msg := `{"e":"` + ShutdownEvent + `","E":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`
		wctx, cancel := context.WithTimeout(context.Background(), s.cfg.WriteTimeout)
		err := ws.Write(wctx, websocket.MessageText, []byte(msg))
		cancel()
		if err != nil {
			return // the pump sees the connection end
		}
	}
	if wait(c.rec.OpenedAt.Add(c.maxAge)) {
		c.stop(errMaxAge)
	}
}

// keepalive pings ws every PingEvery (when > 0) until the connection ends,
// and stops it (ReasonPingLost) when a pong does not come within PingTimeout.
func (s *Server) keepalive(c *conn, ws *websocket.Conn, read context.Context) {
	if s.cfg.PingEvery <= 0 {
		return
	}
	t := time.NewTimer(s.cfg.PingEvery)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-read.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(c.ctx, s.cfg.PingTimeout)
		err := ws.Ping(pctx)
		timedOut := errors.Is(pctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil {
			if timedOut && read.Err() == nil {
				c.stop(errPingLost)
			}
			return
		}
		t.Reset(s.cfg.PingEvery)
	}
}

// closeWS starts a close handshake and, when the client does not finish it
// within CloseTimeout, closes the TCP connection.
func (s *Server) closeWS(ws *websocket.Conn, code websocket.StatusCode, why string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ws.Close(code, why)
	}()
	select {
	case <-done:
	case <-time.After(s.cfg.CloseTimeout):
		_ = ws.CloseNow()
		<-done
	}
}
