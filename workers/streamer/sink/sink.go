// Package sink is the worker's delivery API: what a user implements to receive
// the messages of the WebSocket sessions their workers own, and the JSON-lines
// envelope the shipped sinks write.
//
// Contract (see Handler):
//   - The worker calls Handle once per message, in sequence order per session,
//     from the session's own goroutine: calls for one session never overlap,
//     calls for different sessions run concurrently.
//   - Handle returning nil means "accepted": the worker checkpoints past that
//     sequence number (with the next lease renewal, and at release). A message
//     accepted before a crash is not redelivered unless it is after the last
//     checkpoint, so a Handler that buffers must implement Flusher and must
//     not return nil for data it could still lose, or accept that loss.
//   - ctx carries a deadline that ends by the tenure's trust deadline (and
//     within the worker's sink request timeout): a Handler must give up by
//     then, since after it another worker may own the session.
//   - A non-nil error is counted (SinkErrors), retried a few times while the
//     lease is valid, then the worker reconnects to the source and resumes at
//     the last accepted sequence number + 1. An error marked Permanent is
//     not retried: the session's on_sink_refusal policy decides (fail: the
//     session goes FAILED with the error as last_error; skip: the message is
//     counted, logged with its seq and passed).
//   - A Handler that also implements Pipeline (sink/batch) is given the
//     messages with Submit instead: it queues them and acknowledges them
//     later, in order per session, through the session's Tenure; the worker
//     checkpoints only what was acknowledged and flushes the session
//     (FlushSession) before releasing it.
//   - Message.Data aliases the worker's read buffer: it is valid only until
//     Handle returns. Copy it to keep it.
//   - Every message carries LeaseEpoch, the fencing token of the worker's
//     tenure. It only grows per session; a consumer that must be safe even
//     against a worker paused between its lease check and the write can drop
//     records whose epoch is older than one it has already seen.
package sink

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Message is one message received on a session's WebSocket.
type Message struct {
	ConnectionID string // the session (connection_id)
	Seq          int64  // the message's seq: read at the session's seq_path, or numbered by the worker (seq_mode none)
	LeaseEpoch   int64  // fencing token of the owning tenure
	WorkerID     string // the worker that received it
	ReceivedAtMs int64  // wall-clock ms when the worker read it
	Data         []byte // the raw message; valid only during Handle
	// Binary: the message came in a binary frame (else a text frame).
	Binary bool
	// Sub is 0 for a message with its own seq. A message without one
	// (on_missing_seq deliver) carries the seq of the last sequenced message
	// before it and Sub 1, 2, … after it: (Seq, Sub) is its position.
	Sub int64
}

// Handler receives messages. Implementations must be safe for concurrent use
// by several sessions.
type Handler interface {
	Handle(ctx context.Context, m Message) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, m Message) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, m Message) error { return f(ctx, m) }

// Flusher is implemented by handlers that buffer. The worker calls Flush
// before a session's final checkpoint (graceful shutdown, stop) so that the
// released last_seq never runs ahead of what reached the destination.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Tenure is the side of a session a Pipeline talks back to: how long the
// session may still deliver, which messages were acknowledged, and what to
// do with a message the destination refuses for good.
type Tenure interface {
	// Remaining is how long the owner may still deliver: until the
	// worker's trust deadline (measured on its monotonic clock from its last
	// successful heartbeat), 0 or less once the tenure ended or the
	// deadline passed. A pipeline sends a request only when its timeout
	// ends within Remaining of every tenure in it.
	Remaining() time.Duration
	// Acked is called, in sequence order per session, once every message
	// of the session up to seq was acknowledged by the destination (or
	// skipped, see Refused): the session may checkpoint past seq. It is
	// never called past a message that was dropped or refused without skip.
	Acked(seq int64)
	// Stalled is called when a Submit starts waiting for room in the
	// session's buffer or the worker's memory budget (the session does not
	// read its socket meanwhile).
	Stalled()
	// Refused is called once the pipeline gave up on the message at
	// (seq, sub) after its permanent refusals (err): skip true lets the
	// later messages be acknowledged past it (the session counted and
	// logged it); false ends the tenure's acknowledgments before it (the
	// session ends as failed).
	Refused(seq, sub int64, err error) (skip bool)
}

// Pipeline is implemented by handlers that deliver in the background, in
// batches across sessions (sink/batch). The session then calls Submit
// instead of Handle and checkpoints only what Tenure.Acked reported.
type Pipeline interface {
	// Submit queues m (copying m.Data) and returns; it blocks while the
	// session's buffer is full (calling t.Stalled when it starts waiting)
	// until there is room, stop is closed or ctx ends. A non-nil error
	// means m was not queued.
	Submit(ctx context.Context, m Message, t Tenure, stop <-chan struct{}) error
	// FlushSession returns once every message queued for connectionID was
	// acknowledged, or with ctx's error.
	FlushSession(ctx context.Context, connectionID string) error
}

// FlushSession flushes one session's messages when h is a Pipeline, and
// the whole handler when it is a Flusher.
func FlushSession(ctx context.Context, h Handler, connectionID string) error {
	if p, ok := h.(Pipeline); ok {
		return p.FlushSession(ctx, connectionID)
	}
	return Flush(ctx, h)
}

// Owing is implemented by handlers that hold messages unacknowledged after
// Handle or Submit returned (sink/batch); a synchronous sink holds nothing
// once Handle returned.
type Owing interface {
	// Owed is how long the handler has held the oldest unacknowledged
	// message of session connectionID (0: none).
	Owed(connectionID string) time.Duration
}

// Flush flushes h when it implements Flusher.
func Flush(ctx context.Context, h Handler) error {
	if f, ok := h.(Flusher); ok {
		return f.Flush(ctx)
	}
	return nil
}

// AppendJSON appends m's JSON envelope (no trailing newline):
//
//	{"connection_id":…,"seq":…,"lease_epoch":…,"worker_id":…,"received_at_ms":…,"data":…}
//
// with "sub":… after worker_id for a message without its own seq (Sub).
//
// data is the message itself when it is valid JSON, otherwise the message as
// a JSON string. A payload the envelope cannot carry as text losslessly is
// carried the way a binary frame is, in "data_b64" (standard base64)
// instead of data, after "frame":
//
//	binary frame:                 "frame":"binary","data_b64":…
//	text frame, not valid UTF-8:  "frame":"text","b64_reason":"invalid_utf8","data_b64":…
//
// so a consumer's one rule is: data_b64 present, its base64 decoding is the
// payload's exact bytes; otherwise data is. Every such text payload is
// counted (Base64Text). See AppendEnvelope for destinations that refuse
// some characters (SQS).
func AppendJSON(dst []byte, m Message) []byte { return AppendEnvelope(dst, m, AnyChars) }

// Chars is the set of characters a destination takes in a record's body.
type Chars uint8

const (
	// AnyChars: any valid UTF-8 (JSON lines, Kinesis).
	AnyChars Chars = iota
	// SQSChars: SQS's message content, #x9 | #xA | #xD | #x20 to #xD7FF |
	// #xE000 to #xFFFD | #x10000 to #x10FFFF; SQS refuses anything else
	// (SendMessage, "MessageBody"). The envelope never writes a control
	// byte raw (a JSON payload holds none, it escapes them in a string) and
	// valid UTF-8 holds no surrogate, so of the rest only U+FFFE and U+FFFF
	// can come from a payload: a text payload holding one is carried in
	// data_b64 with "b64_reason":"refused_char".
	SQSChars
)

// B64 reasons: why a text frame's payload is in data_b64.
const (
	ReasonInvalidUTF8 = "invalid_utf8" // RFC 6455 §5.6: a text frame is UTF-8; this one is not
	ReasonRefusedChar = "refused_char" // it holds a character the destination refuses (SQSChars)
)

// Base64Text counts the text payloads an envelope carried in data_b64
// (invalid UTF-8, or a character the destination refuses): the worker
// reports and resets it as a metric (schema.MetricSinkTextBase64).
var Base64Text atomic.Int64

// AppendEnvelope is AppendJSON for a destination that takes only chars in
// a body: a text payload holding any other character goes in data_b64
// with "b64_reason":"refused_char". Only the ids and the payload can hold
// one; the ids are escaped as \uXXXX.
func AppendEnvelope(dst []byte, m Message, chars Chars) []byte {
	dst = append(dst, `{"connection_id":`...)
	dst = appendString(dst, m.ConnectionID)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, m.Seq, 10)
	dst = append(dst, `,"lease_epoch":`...)
	dst = strconv.AppendInt(dst, m.LeaseEpoch, 10)
	dst = append(dst, `,"worker_id":`...)
	dst = appendString(dst, m.WorkerID)
	if m.Sub > 0 {
		dst = append(dst, `,"sub":`...)
		dst = strconv.AppendInt(dst, m.Sub, 10)
	}
	dst = append(dst, `,"received_at_ms":`...)
	dst = strconv.AppendInt(dst, m.ReceivedAtMs, 10)
	if m.Binary {
		return appendB64(append(dst, `,"frame":"binary"`...), m.Data)
	}
	if reason := textB64Reason(m.Data, chars); reason != "" {
		Base64Text.Add(1)
		dst = append(dst, `,"frame":"text","b64_reason":"`...)
		dst = append(dst, reason...)
		return appendB64(append(dst, '"'), m.Data)
	}
	dst = append(dst, `,"data":`...)
	if len(m.Data) > 0 && validJSON(m.Data) {
		dst = appendCompactable(dst, m.Data)
	} else {
		dst = appendString(dst, string(m.Data))
	}
	return append(dst, '}')
}

// textB64Reason is why a text payload cannot go in data as text ("": it
// can). utf8.Valid reads 8 ASCII bytes at a time, and only SQSChars scans
// again, for the one lead byte of U+FFFE and U+FFFF.
func textB64Reason(data []byte, chars Chars) string {
	if !utf8.Valid(data) {
		return ReasonInvalidUTF8
	}
	if chars == SQSChars && hasNonCharFFFx(data) {
		return ReasonRefusedChar
	}
	return ""
}

// hasNonCharFFFx reports whether valid UTF-8 data holds U+FFFE or U+FFFF
// (EF BF BE, EF BF BF).
func hasNonCharFFFx(data []byte) bool {
	for {
		i := bytes.IndexByte(data, 0xEF)
		if i < 0 || len(data)-i < 3 {
			return false
		}
		if data[i+1] == 0xBF && data[i+2]&^1 == 0xBE {
			return true
		}
		data = data[i+3:] // valid UTF-8: EF leads a 3-byte rune
	}
}

// appendB64 appends "data_b64" and closes the envelope.
func appendB64(dst, data []byte) []byte {
	dst = append(dst, `,"data_b64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, data)
	return append(dst, '"', '}')
}

// appendCompactable appends valid JSON, replacing raw newlines (legal JSON
// whitespace) so that one record stays one line.
func appendCompactable(dst, data []byte) []byte {
	if bytes.IndexByte(data, '\n') < 0 && bytes.IndexByte(data, '\r') < 0 {
		return append(dst, data...) // the usual case, one copy
	}
	for _, b := range data {
		if b == '\n' || b == '\r' {
			b = ' '
		}
		dst = append(dst, b)
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20 || c == 0x7f:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...) // an id; a payload never gets here invalid
		case r == 0xFFFE || r == 0xFFFF: // valid, but refused by SQS (SQSChars)
			dst = append(dst, '\\', 'u', 'f', 'f', 'f', hexDigits[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// Writer writes one JSON line per message (AppendJSON + "\n") to an
// io.Writer with a single Write call per message, unbuffered, so that a
// message Handle accepted has reached the writer. It is safe for concurrent
// use.
type Writer struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Stdout returns the default sink: JSON lines on standard output.
func Stdout() *Writer { return NewWriter(os.Stdout) }

// IgnoresContext: a Writer's Handle is one local write (ContextFree).
func (s *Writer) IgnoresContext() {}

// Handle writes m's line.
func (s *Writer) Handle(_ context.Context, m Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(AppendJSON(s.buf[:0], m), '\n')
	_, err := s.w.Write(s.buf)
	if cap(s.buf) > 64<<10 {
		s.buf = nil // do not pin one huge message's buffer
	}
	return err
}

// Discard accepts every message and does nothing (benchmarks).
var Discard Handler = discard{}

type discard struct{}

func (discard) Handle(context.Context, Message) error { return nil }
func (discard) IgnoresContext()                       {}

// ContextFree is a Handler whose Handle never waits on its context: it
// calls no other system (a write to a local file or pipe, which a context
// could not interrupt anyway). The session then hands it each message
// without making a deadline context (a timer per message saved); the
// lease is still checked right before each call.
type ContextFree interface {
	Handler
	IgnoresContext()
}
