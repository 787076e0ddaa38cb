package feed

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Shape is the shape of the feed's messages: where (and whether) they carry
// their seq, as the real sources of docs/sources.md do.
type Shape string

// Shapes.
const (
	ShapeFlat   Shape = ""       // {"seq":N,"session":S,"ts":MS}: the default
	ShapeNested Shape = "nested" // Binance-style: {"stream":S,"data":{"u":N,"ts":MS}} (seq_path data.u)
	ShapeString Shape = "string" // Twilio-style: {"sequenceNumber":"N","session":S,"ts":MS}
	ShapeNoSeq  Shape = "noseq"  // meeting transcripts: {"session":S,"ts":MS}, no seq
	ShapeBinary Shape = "binary" // audio-like binary frames: N as 8 bytes big-endian, then S; no JSON
)

// ParseShape parses a shape name ("" and "flat" are ShapeFlat).
func ParseShape(s string) (Shape, error) {
	switch sh := Shape(s); sh {
	case ShapeFlat, ShapeNested, ShapeString, ShapeNoSeq, ShapeBinary:
		return sh, nil
	case "flat":
		return ShapeFlat, nil
	}
	return "", fmt.Errorf("feed shape %q: want flat, nested, string, noseq or binary", s)
}

// appendShaped appends the message for seq in shape, and says which frame
// type carries it. Only the flat shape carries pad and auth.
func appendShaped(b []byte, shape Shape, session string, seq, nowMs int64, pad, auth string) ([]byte, websocket.MessageType) {
	switch shape {
	case ShapeNested:
		b = append(append(append(b, `{"stream":"`...), session...), `","data":{"u":`...)
		b = strconv.AppendInt(b, seq, 10)
		b = append(b, `,"ts":`...)
		return append(strconv.AppendInt(b, nowMs, 10), "}}"...), websocket.MessageText
	case ShapeString:
		b = append(b, `{"sequenceNumber":"`...)
		b = strconv.AppendInt(b, seq, 10)
		b = append(append(append(b, `","session":"`...), session...), `","ts":`...)
		return append(strconv.AppendInt(b, nowMs, 10), '}'), websocket.MessageText
	case ShapeNoSeq:
		b = append(append(append(b, `{"session":"`...), session...), `","ts":`...)
		return append(strconv.AppendInt(b, nowMs, 10), '}'), websocket.MessageText
	case ShapeBinary:
		return append(binary.BigEndian.AppendUint64(b, uint64(seq)), session...), websocket.MessageBinary
	}
	return AppendMessage(b, session, seq, nowMs, pad, auth), websocket.MessageText
}

// inbox is what a connection's client sent that the feed acts on: its
// subscribe (the first) and when it last answered a keep-alive request.
type inbox struct {
	subscribe chan []byte
	mu        sync.Mutex
	answered  time.Time
}

func newInbox() *inbox { return &inbox{subscribe: make(chan []byte, 1)} }

var (
	subscribeOp  = []byte(`"op":"subscribe"`)
	keepaliveAns = []byte(`KEEP_ALIVE_RESP`)
	fromField    = regexp.MustCompile(`"from":"([0-9]*)"`)
)

func (in *inbox) got(data []byte) {
	switch {
	case bytes.Contains(data, subscribeOp):
		select {
		case in.subscribe <- data:
		default: // a second subscribe changes nothing
		}
	case bytes.Contains(data, keepaliveAns):
		in.mu.Lock()
		in.answered = time.Now()
		in.mu.Unlock()
	}
}

func (in *inbox) answeredAt() time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.answered
}

// awaitSubscribe waits up to SubscribeWithin for the client's subscribe,
// acks it and returns the seq to send from (next when the subscribe names
// none); without one in time it ends the connection (ReasonNoSubscribe).
func (s *Server) awaitSubscribe(c *conn, ws *websocket.Conn, read context.Context, in *inbox, next int64) int64 {
	t := time.NewTimer(s.cfg.SubscribeWithin)
	defer t.Stop()
	var sub []byte
	select {
	case sub = <-in.subscribe:
	case <-t.C:
		c.stop(errNoSubscribe)
		return next
	case <-read.Done():
		return next
	case <-c.ctx.Done():
		return next
	}
	if m := fromField.FindSubmatch(sub); m != nil && len(m[1]) > 0 {
		if from, err := strconv.ParseInt(string(m[1]), 10, 64); err == nil && from > 0 {
			next = from
			s.mu.Lock()
			c.rec.From, c.rec.FirstSeq, c.rec.LastSeq = from, from, from-1
			s.mu.Unlock()
		}
	}
	wctx, cancel := context.WithTimeout(context.Background(), s.cfg.WriteTimeout)
	defer cancel()
	if err := ws.Write(wctx, websocket.MessageText, []byte(`{"event":"subscribed"}`)); err != nil && read.Err() == nil {
		c.stop(errWriteFail)
	}
	return next
}

// keepaliveRequests sends a KEEP_ALIVE_REQ every KeepaliveEvery (when > 0)
// until the connection ends, and ends it (ReasonKeepaliveLost) when a
// request stays unanswered for 2 × KeepaliveEvery.
func (s *Server) keepaliveRequests(c *conn, ws *websocket.Conn, read context.Context, in *inbox) {
	every := s.cfg.KeepaliveEvery
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var pending time.Time // the oldest unanswered request; zero: none
	for {
		var now time.Time
		select {
		case <-c.ctx.Done():
			return
		case <-read.Done():
			return
		case now = <-t.C:
		}
		if !pending.IsZero() && in.answeredAt().After(pending) {
			pending = time.Time{}
		}
		if !pending.IsZero() && now.Sub(pending) > 2*every {
			c.stop(errKeepaliveLost)
			return
		}
		req := `{"msg_type":"KEEP_ALIVE_REQ","timestamp":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`
		wctx, cancel := context.WithTimeout(context.Background(), s.cfg.WriteTimeout)
		err := ws.Write(wctx, websocket.MessageText, []byte(req))
		cancel()
		if err != nil {
			return // the pump sees the connection end
		}
		if pending.IsZero() {
			pending = now
		}
	}
}
