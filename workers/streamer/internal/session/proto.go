package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/jsonseq"
)

// Reasons to reconnect that come from the source protocol.
var (
	errIdle = errors.New("idle timeout: no message from the source")
	// errOpen: an open message could not be sent, or its wait_for was not
	// met. The texts never quote a message (they may carry credentials).
	errOpen = errors.New("open messages")
)

// proto is one connection's target and source protocol, compiled from the
// item's spec when the connection is dialed.
type proto struct {
	generation  int64       // the item generation it was compiled from
	url         string      // ws_url (may carry credentials in its query: log only Redact(url))
	host        string      // ws_url's host, its dials' admission's (dialOn), parsed on compile's fresh stack
	header      http.Header // may carry credentials: never logged
	resumeParam string      // "": none (always "" under seq_mode none)
	// settings are the spec's settings as stored (subprotocols,
	// follow_redirects, …): a dial reads each where it is used, with no
	// compiled copy here.
	settings spec.Settings
	// refs: a header value or an open message's text holds a secret
	// reference, expanded at every dial (dialParts).
	refs bool
	// openRefs: an open message's text holds one (they are then sent
	// only where the handshake ended on ws_url's origin: landed).
	openRefs bool

	seqPath []string
	// The source protocol's flags, together (unpadded: proto stays in
	// its 320 B size class).
	none           bool // seq_mode none: the worker numbers the messages
	deliverMissing bool // on_missing_seq deliver
	skipRefused    bool // on_sink_refusal skip
	resumeLast     bool // resume.value last
	anchors        bool // a source resuming from the next seq: anchor before the first delivery (anchor.go)
	keepDeliver    bool // keepalive_reply.deliver
	planned        bool // a planned reconnect: max_connection_age or reconnect_on
	noticeDeliver  bool // reconnect_on.deliver
	open           []source.OpenMessage
	waits          []*source.Matcher // per open message; nil: no wait_for (its timeout: open[i].WaitFor)
	pingMsg        string            // app_ping.message (templated)
	pingEvery      time.Duration
	pong           []byte // app_ping.pong; nil: none
	keep           *source.Matcher
	keepReply      string
	idle           time.Duration
	// Planned reconnects: maxAge (0: none), the notice that starts one
	// (nil: none), the switch deadline.
	maxAge        time.Duration
	notice        *source.Matcher
	switchTimeout time.Duration
}

// compile reads the item's spec (spec.Decode: the run rules, not ingest's
// admission). An error means the worker cannot run it (a hand-edited item,
// or a field this build does not know: spec.ErrUnknownField, wrapped); its
// text names the field, never a value.
func compile(it lease.Item) (*proto, error) {
	sp, err := spec.Decode(it.Spec)
	if err != nil {
		return nil, err
	}
	c := sp.Config
	p := &proto{
		generation: it.Generation,
		url:        sp.WSURL, resumeParam: sp.ResumeParam(), settings: sp.Settings,
		none: c.SeqMode == source.SeqNone, deliverMissing: c.OnMissingSeq == source.MissingDeliver,
		skipRefused: c.OnSinkRefusal == source.RefusalSkip,
		resumeLast:  sp.ResumesLast(), open: c.OpenMessages, idle: source.Duration(c.IdleTimeout),
	}
	if p.none {
		p.resumeParam = "" // the worker's numbering means nothing to the source
	}
	u, err := url.Parse(sp.WSURL)
	if err != nil { // checked by Decode: unreachable
		return nil, fmt.Errorf("stored session spec is invalid (ws_url)")
	}
	p.host = u.Hostname()
	p.anchors = sp.Resumable() && !p.resumeLast
	if len(sp.Headers) > 0 {
		p.header = make(http.Header, len(sp.Headers))
		for k, v := range sp.Headers {
			p.header.Set(k, v)
			p.refs = p.refs || secretref.Contains(v)
		}
	}
	if p.seqPath, err = source.ParsePath(sp.Seq()); err != nil { // checked by Decode: unreachable
		return nil, fmt.Errorf("stored session spec is invalid (seq_path)")
	}
	for _, m := range c.OpenMessages {
		p.openRefs = p.openRefs || m.Text != nil && secretref.Contains(*m.Text)
		p.refs = p.refs || p.openRefs
		var w *source.Matcher
		if m.WaitFor != nil {
			cm := m.WaitFor.Compile()
			w = &cm
		}
		p.waits = append(p.waits, w)
	}
	if a := c.AppPing; a != nil {
		p.pingMsg, p.pingEvery = a.Message, source.Duration(a.Every)
		if a.Pong != "" {
			p.pong = []byte(a.Pong)
		}
	}
	if k := c.KeepaliveReply; k != nil {
		m := k.Match.Compile()
		p.keep, p.keepReply, p.keepDeliver = &m, k.Reply, k.Deliver
	}
	p.planned, p.maxAge, p.switchTimeout = c.Planned(), source.Duration(c.MaxConnectionAge), c.SwitchDeadline()
	if r := c.ReconnectOn; r != nil {
		m := r.Match.Compile()
		p.notice, p.noticeDeliver = &m, r.Deliver
	}
	return p, nil
}

// protoFor is the compiled spec of it: the current connection's when it
// was compiled from the same generation (a spec changes only with a new
// generation), else compiled anew. Decoding JSON runs deep: on a fresh
// stack (onFreshStack).
func (s *Session) protoFor(it lease.Item) (*proto, error) {
	s.mu.Lock()
	p := s.proto
	s.mu.Unlock()
	if p != nil && p.generation == it.Generation {
		return p, nil
	}
	return onFreshStack(func() (*proto, error) { return compile(it) })
}

// vars are the placeholder values for a connection of it.
func (s *Session) vars(it lease.Item, p *proto) source.Vars {
	return source.Vars{LastSeq: s.lastSeq.Load(), ResumeLast: p.resumeLast, ConnectionID: s.ID(), Generation: it.Generation}
}

// write sends one frame, bounded by DialTimeout (a source that does not
// read is as good as one that does not answer the handshake).
func (s *Session) write(conn Conn, typ websocket.MessageType, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.env.Config.DialTimeout)
	defer cancel()
	return conn.Write(ctx, typ, data)
}

// open sends the open messages of a new connection in order (frames: as
// its dial rendered and expanded them), each one's wait_for met before the
// next is sent, before anything is delivered. Control messages (keep-alive
// requests, pongs) that arrive meanwhile are answered as usual.
func (s *Session) open(conn Conn, it lease.Item, p *proto, frames []frame) error {
	for i, f := range frames {
		typ := websocket.MessageText
		if f.binary {
			typ = websocket.MessageBinary
		}
		if err := s.write(conn, typ, f.data); err != nil {
			return fmt.Errorf("%w: open_messages[%d] not sent: %w", errOpen, i, err)
		}
		if p.waits[i] != nil {
			if err := s.waitFor(conn, it, p, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitFor reads until the next message that is not a control message, and
// checks it against open message i's wait_for within its timeout. The
// connection is closed when the timeout passes (a read bounded by a
// context ends the connection).
func (s *Session) waitFor(conn Conn, it lease.Item, p *proto, i int) error {
	timeout := p.open[i].WaitFor.WaitTimeout()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	wait := func(n int64) (int64, error) { return s.env.Frames.Acquire(ctx, n, s.ended) }
	for {
		typ, r, err := conn.Reader(ctx)
		var data []byte
		var grant int64
		if err == nil {
			data, grant, err = s.readMessage(r, nil, wait)
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: open_messages[%d]: no reply within %v", errOpen, i, timeout)
			}
			// describe: the status only, never the source's close reason
			// (which may echo what it refused). The text becomes last_error.
			return fmt.Errorf("%w: open_messages[%d]: connection ended awaiting the reply: %s", errOpen, i, describe(err, nil))
		}
		done, err := s.checkReply(conn, it, p, i, typ, data)
		s.env.Frames.Release(grant) // nothing keeps data past the check
		if done || err != nil {
			return err
		}
	}
}

// checkReply checks one message read awaiting open message i's reply:
// done when it is the reply, an error when it fails wait_for, neither for
// a control message (answered).
func (s *Session) checkReply(conn Conn, it lease.Item, p *proto, i int, typ websocket.MessageType, data []byte) (bool, error) {
	s.touch()
	consumed, err := s.control(conn, it, p, typ, data)
	if err != nil {
		return false, err
	}
	if consumed {
		return false, nil
	}
	if raw, lerr := jsonseq.Lookup(data, p.waits[i].Path); lerr == nil && p.waits[i].Equal(raw) {
		return true, nil
	}
	return false, fmt.Errorf("%w: open_messages[%d]: the reply does not match wait_for %s", errOpen, i, strings.Join(p.waits[i].Path, "."))
}

// control answers a control message: a pong to the app ping, or a
// keep-alive request (answered with the reply). consumed: the message is
// not delivered.
func (s *Session) control(conn Conn, it lease.Item, p *proto, typ websocket.MessageType, data []byte) (consumed bool, err error) {
	if p.pong != nil && typ == websocket.MessageText && bytes.Equal(data, p.pong) {
		s.controls.Add(1)
		return true, nil
	}
	if p.notice != nil {
		if raw, lerr := jsonseq.Lookup(data, p.notice.Path); lerr == nil && p.notice.Equal(raw) {
			// The source will end this connection: open the next one now.
			// (On a planned reconnect's new connection the one under way
			// is that next one: plan does nothing.)
			s.controls.Add(1)
			s.plan(PlanNotice)
			return !p.noticeDeliver, nil
		}
	}
	if p.keep == nil {
		return false, nil
	}
	raw, lerr := jsonseq.Lookup(data, p.keep.Path)
	if lerr != nil || !p.keep.Equal(raw) {
		return false, nil
	}
	s.controls.Add(1)
	if err := s.write(conn, websocket.MessageText, []byte(source.Render(p.keepReply, s.vars(it, p)))); err != nil {
		return true, fmt.Errorf("keep-alive reply not sent: %w", err)
	}
	return !p.keepDeliver, nil
}

// touch notes that a message arrived (for the idle timeout).
func (s *Session) touch() { s.lastRead.Store(time.Now().UnixNano()) }

// appPing sends the app ping on conn; a failed send reconnects.
func (s *Session) appPing(conn Conn, msg string) {
	err := s.write(conn, websocket.MessageText, []byte(msg))
	s.mu.Lock()
	s.appPinging = false
	s.mu.Unlock()
	if err != nil {
		s.debug().Err(err).Msg("app ping not sent: reconnecting")
		s.reconnect(errPing, conn)
	}
}
