// Reading and delivery: the read loop, seqs and dedupe, and the sink (the
// session is the sink.Tenure of a pipelined sink).

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/jsonseq"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// bufPool holds the read buffers. They start small (most messages are
// well under 512 B) and keep what they grew to, up to maxPooledBuf: the
// pool holds as many as sessions read at once, which at high rates is
// hundreds (measured at 1,000 × 50 msg/s: 5.6 KiB of 4 KiB buffers per
// session when they started at 4 KiB).
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

const maxPooledBuf = 64 << 10

// read reads and delivers messages until the connection ends or the session
// must stop delivering.
func (s *Session) read(ctx context.Context, conn Conn) error {
	// The read is bounded by closing the socket, never by a context: a
	// context with a deadline would arm a timer on every read.
	rctx := context.Background()
	wait := s.waitFrame(ctx)
	for {
		typ, r, err := conn.Reader(rctx)
		if err != nil {
			return err
		}
		bp := bufPool.Get().(*[]byte)
		buf, grant, err := s.readMessage(r, (*bp)[:0], wait)
		if err == nil {
			err = s.handle(ctx, conn, typ, buf)
		}
		// Handed on (the sink keeps a copy of its own): the grant's bytes
		// are free again.
		s.env.Frames.Release(grant)
		if cap(buf) <= maxPooledBuf {
			*bp = buf[:0]
			bufPool.Put(bp)
		}
		if err != nil {
			return err
		}
	}
}

// readAll reads r to its end into buf, or until buf holds limit bytes
// (limit < 0: no limit), reporting more when it stopped there: the message
// may go on.
func readAll(r io.Reader, buf []byte, limit int) ([]byte, bool, error) {
	for {
		if limit >= 0 && len(buf) >= limit {
			return buf, true, nil
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := cap(buf)
		if limit >= 0 {
			end = min(end, limit)
		}
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
}

// errInvalid stops the read loop when the lease is no longer valid.
var errInvalid = errors.New("lease no longer valid")

// handle answers control messages, then finds (or assigns) the message's
// seq, dedupes and delivers it. It runs under read for every message: the
// rare paths (control messages, logging, sink refusals) are calls of their
// own, so that this frame and offer's stay small (see Run).
func (s *Session) handle(ctx context.Context, conn Conn, typ websocket.MessageType, data []byte) error {
	p := s.proto // written by attach, in this same goroutine
	if p.idle > 0 {
		s.touch()
	}
	if p.pong != nil || p.keep != nil || p.notice != nil {
		if consumed, err := s.handleControl(conn, p, typ, data); err != nil || consumed {
			return err
		}
	}
	last := s.lastSeq.Load()
	if p.none {
		// The worker's own numbering: above every seq of earlier tenures
		// (whose epochs are lower), even those delivered after the last
		// checkpoint before a crash.
		return s.offer(ctx, conn, typ, data, max(last+1, (s.held.Epoch()-1)<<32+1), true)
	}
	seq, err := jsonseq.FindPath(data, p.seqPath)
	if err != nil {
		if p.deliverMissing {
			return s.offer(ctx, conn, typ, data, last, false)
		}
		s.dropMissing(p, err)
		return nil
	}
	if seq <= last {
		s.reached = true // the stream flows: a resume replayed what we have
		s.dups.Add(1)
		s.env.Counters.DuplicatesDropped.Add(1)
		return nil
	}
	if last != lease.NoSeq && seq > last+1 {
		s.noteGap(last, seq)
	}
	if last == lease.NoSeq && p.anchors {
		if err := s.anchor(ctx, seq); err != nil {
			return err
		}
	}
	return s.offer(ctx, conn, typ, data, seq, true)
}

// handleControl answers a control message (control) and reconnects when
// the answer could not be sent.
func (s *Session) handleControl(conn Conn, p *proto, typ websocket.MessageType, data []byte) (consumed bool, err error) {
	consumed, err = s.control(conn, s.held.Item(), p, typ, data)
	if err != nil {
		s.reconnect(err, conn)
	}
	return consumed, err
}

// dropMissing counts (and now and then logs) a message dropped for having
// no seq.
func (s *Session) dropMissing(p *proto, err error) {
	s.missingDropped.Add(1)
	if s.env.Counters.SeqMissingDropped.Add(1)%1000 == 1 {
		s.Logger().Warn().Err(err).Strs("seq_path", p.seqPath).Msg("message without a sequence number dropped")
	}
}

// noteGap counts a seq the source skipped to.
func (s *Session) noteGap(last, seq int64) {
	s.gaps.Add(1)
	s.debug().Int64("after", last).Int64("seq", seq).Msg("source skipped sequence numbers")
}

// offer hands one message to the sink while the lease is valid, retrying a
// refusal; advance: seq is the session's new last delivered seq (false for
// a message without one, delivered with the last seq and the next sub). A
// Pipeline sink queues it (the session checkpoints it once Acked), any
// other Handler accepts it synchronously.
func (s *Session) offer(ctx context.Context, conn Conn, typ websocket.MessageType, data []byte, seq int64, advance bool) error {
	// One clock read (the tenure's clock) for the arrival time and the
	// first trust check.
	now := s.held.Now()
	msg := sink.Message{
		ConnectionID: s.ID(), Seq: seq, LeaseEpoch: s.held.Epoch(), WorkerID: s.env.Config.WorkerID,
		ReceivedAtMs: now.UnixMilli(), Data: data, Binary: typ == websocket.MessageBinary,
	}
	if !advance {
		s.sub++
		msg.Sub = s.sub
	}
	// The connect succeeded, whatever the sink makes of the message (its
	// refusals are not the source's failure).
	s.reached = true
	pl, pipelined := s.env.Handler.(sink.Pipeline)
	for attempt := 1; ; attempt++ {
		// The lease's monotonic deadline, checked right before every
		// delivery (start first: start + rem is then never after it).
		start := now
		if attempt > 1 {
			start = s.held.Now()
		}
		rem := s.held.RemainingAt(start)
		if rem <= 0 {
			return s.invalid()
		}
		var err error
		if pipelined {
			err = pl.Submit(ctx, msg, s, s.ended)
		} else {
			err = s.handleWithin(ctx, msg, start.Add(min(rem, s.env.Config.SinkTimeout)))
		}
		if err == nil {
			break
		}
		if sink.IsPermanent(err) && (pipelined || attempt >= s.env.Config.SinkAttempts || sink.IsFinal(err)) {
			// Sending it again cannot help: the session's policy decides.
			if !s.Refused(seq, msg.Sub, err) {
				return ErrSinkRefused
			}
			// Skipped: a pipeline acknowledges the later messages past it;
			// a synchronous sink took everything before it.
			break
		}
		if err := s.refused(ctx, conn, err, seq, attempt); err != nil {
			return err
		}
	}
	if advance {
		if !pipelined {
			s.held.Observe(seq) // a pipeline acknowledges later (Acked)
		}
		s.lastSeq.Store(seq)
		s.sub = 0
	}
	if x := s.ext; x != nil && x.fingerprints {
		x.delivered(seq, Fingerprint(data), pipelined)
	}
	s.messages.Add(1)
	s.env.Counters.MessagesIn.Add(1)
	return nil
}

// handleWithin calls the unbatched sink with a context that ends at
// deadline: by the tenure's trust deadline and within SinkTimeout, so that
// no call of this tenure is in flight once another worker may own the
// session. A sink.ContextFree sink (a local write) gets none: it would not
// heed it.
func (s *Session) handleWithin(ctx context.Context, msg sink.Message, deadline time.Time) error {
	if h, ok := s.env.Handler.(sink.ContextFree); ok {
		return h.Handle(ctx, msg) // no deadline it would heed
	}
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return s.env.Handler.Handle(hctx, msg)
}

// invalid ends the session whose lease is no longer valid (errInvalid
// stops the read loop).
func (s *Session) invalid() error {
	err := s.held.Err()
	if err == nil {
		err = lease.ErrUntrusted
	}
	s.Interrupt(err)
	return errInvalid
}

// refused follows a sink's refusal of attempt: nil after a pause before
// the next attempt; errInvalid when the pipeline ended the tenure; errSink
// (the connection is closed, to resume after the last accepted seq) when
// the attempts are spent or the session is ending.
func (s *Session) refused(ctx context.Context, conn Conn, err error, seq int64, attempt int) error {
	if errors.Is(err, sink.ErrTenureEnded) {
		s.Interrupt(lease.ErrUntrusted)
		return errInvalid
	}
	s.env.Counters.SinkErrors.Add(1)
	if attempt >= s.env.Config.SinkAttempts || ctx.Err() != nil || s.terminal() != nil {
		s.Logger().Error().Err(err).Int64("seq", seq).Int("attempts", attempt).Msg("sink refused the message: reconnecting to resume after the last accepted one")
		s.reconnect(errSink, conn)
		return errSink
	}
	t := time.NewTimer(time.Duration(attempt) * 50 * time.Millisecond)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	return nil
}

// Remaining is how long the session may still deliver (sink.Tenure).
func (s *Session) Remaining() time.Duration { return s.held.Remaining() }

// Refused follows the sink's permanent refusal of the message at (seq, sub)
// (sink.Tenure, and the unbatched path): under on_sink_refusal skip it
// counts and logs the message and returns true; otherwise it ends the
// session with ErrSinkRefused (the worker records it as FAILED) and returns
// false.
func (s *Session) Refused(seq, sub int64, err error) bool {
	s.env.Counters.SinkRefused.Add(1)
	if s.skipRefused.Load() {
		s.env.Counters.SinkSkipped.Add(1)
		ev := s.Logger().Warn().Err(err).Int64("seq", seq)
		if sub > 0 {
			ev = ev.Int64("sub", sub)
		}
		ev.Msg("sink refused the message permanently: skipped")
		return true
	}
	s.Interrupt(fmt.Errorf("%w: seq %d: %s", ErrSinkRefused, seq, ErrorText(err)))
	return false
}

// Acked records that the sink acknowledged every message up to seq
// (sink.Tenure): the next checkpoint may pass it.
func (s *Session) Acked(seq int64) {
	s.held.Observe(seq)
	if x := s.ext; x != nil && x.fingerprints {
		x.acked(seq)
	}
}

// Stalled counts a wait for room in the sink's buffer (sink.Tenure).
func (s *Session) Stalled() { s.env.Counters.SinkStalls.Add(1) }
