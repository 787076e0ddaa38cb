// Package source owns a session's source protocol: what a worker sends and
// expects on a connection besides reading messages (open messages sent after
// every connect, each optionally waiting for an acknowledgement; an
// application-level ping; a reply to the source's keep-alive requests; an
// idle timeout), how it finds a message's sequence number (a dotted path,
// or none at all) and what a message the sink refuses does. Config is
// embedded in the session spec (shared/spec), whose JSON is both the start
// body and the stored form, so ingest (which validates it) and the worker
// (which runs it) share one definition. It also owns the fixed placeholders
// open messages may carry and the dotted paths that name a JSON value.
package source

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/secretref"
)

// Limits of a source configuration. A session item holds them, and DynamoDB
// bills every write of the item on its whole size (1 KB units) and caps an
// item at 400 KB (Developer Guide, "Capacity unit consumption for write
// operations" and "Service, account, and table quotas"): open messages are
// bounded well below that.
const (
	MaxOpenMessages     = 16
	MaxOpenMessageBytes = 64 << 10  // one message, decoded
	MaxOpenTotalBytes   = 128 << 10 // all of them, decoded
	MaxControlBytes     = 4 << 10   // app_ping.message, app_ping.pong, keepalive_reply.reply
	MaxPathBytes        = 128
	MaxPathSegments     = 8
	MaxEqualsBytes      = 256

	MinPingEvery   = time.Second
	MaxPingEvery   = time.Hour
	MinIdleTimeout = time.Second
	MaxIdleTimeout = time.Hour
	MinWaitTimeout = 100 * time.Millisecond
	MaxWaitTimeout = time.Minute
	DefaultWaitFor = 10 * time.Second
	// A planned reconnect's bounds: max_connection_age and switch_timeout.
	MinConnectionAge     = time.Second
	MaxConnectionAge     = 30 * 24 * time.Hour
	MinSwitchTimeout     = time.Second
	MaxSwitchTimeout     = 10 * time.Minute
	DefaultSwitchTimeout = 30 * time.Second
	maxDurationBytes     = 32
)

// DefaultSeqPath is the seq_path (seq_field) of a session that names none.
const DefaultSeqPath = "seq"

// Sequence modes (seq_mode).
const (
	SeqField = "field" // the default: the seq is read at seq_path
	SeqNone  = "none"  // the worker numbers the messages it delivers
)

// What happens to a message without a seq under SeqField (on_missing_seq).
const (
	MissingDrop    = "drop" // the default: dropped and counted
	MissingDeliver = "deliver"
)

// On sink refusal values (on_sink_refusal): what the worker does with a
// message the destination refuses for good (a permanent refusal, after the
// worker's WSFLEET_SINK_PERMANENT_ATTEMPTS, or a message too large for the
// sink).
const (
	RefusalFail = "fail" // the default: the session goes FAILED, nothing acknowledged past it
	RefusalSkip = "skip" // the message is skipped: counted and logged with its seq, never silent
)

// Config is a session's source protocol. The zero value is the default
// behaviour: nothing sent, seqs read at seq_path, messages without one
// dropped, a message the sink refuses for good failing the session.
type Config struct {
	OpenMessages   []OpenMessage   `json:"open_messages,omitempty"`
	AppPing        *AppPing        `json:"app_ping,omitempty"`
	KeepaliveReply *KeepaliveReply `json:"keepalive_reply,omitempty"`
	// IdleTimeout: reconnect when no message arrived for this long (a Go
	// duration); "": never.
	IdleTimeout  string `json:"idle_timeout,omitempty"`
	SeqMode      string `json:"seq_mode,omitempty"`
	OnMissingSeq string `json:"on_missing_seq,omitempty"`
	// OnSinkRefusal is RefusalFail ("" = fail) or RefusalSkip.
	OnSinkRefusal string `json:"on_sink_refusal,omitempty"`
	// Planned reconnects (make-before-break): before a connection reaches
	// MaxConnectionAge (a Go duration; "": never), or at once when a
	// message matches ReconnectOn, the worker opens the next connection
	// while the current one keeps delivering, and switches once the new one
	// caught up, within SwitchTimeout ("": DefaultSwitchTimeout).
	MaxConnectionAge string       `json:"max_connection_age,omitempty"`
	ReconnectOn      *ReconnectOn `json:"reconnect_on,omitempty"`
	SwitchTimeout    string       `json:"switch_timeout,omitempty"`
}

// ReconnectOn is a source's notice that the connection will end (Binance's
// {"e":"serverShutdown"}): a message matching Match starts a planned
// reconnect; it is not delivered unless Deliver.
type ReconnectOn struct {
	Match   Match `json:"match"`
	Deliver bool  `json:"deliver,omitempty"`
}

// Planned reports whether c asks for planned reconnects.
func (c Config) Planned() bool { return c.MaxConnectionAge != "" || c.ReconnectOn != nil }

// SwitchDeadline is how long a planned reconnect's new connection has to
// catch up.
func (c Config) SwitchDeadline() time.Duration {
	if c.SwitchTimeout == "" {
		return DefaultSwitchTimeout
	}
	return Duration(c.SwitchTimeout)
}

// OpenMessage is one message sent after every connect: Text (templated) or
// BinaryB64 (standard base64, sent as one binary frame, not templated).
type OpenMessage struct {
	Text      *string `json:"text,omitempty"`
	BinaryB64 *string `json:"binary_b64,omitempty"`
	// WaitFor: the next message the source sends must match before the
	// next open message is sent (or, for the last one, before anything is
	// delivered).
	WaitFor *Match `json:"wait_for,omitempty"`
}

// Match is a JSON value at a dotted path equal to Equals (a JSON string,
// number, boolean or null, compared as written). Timeout (wait_for only) is
// how long to wait for it; "": DefaultWaitFor.
type Match struct {
	Path    string          `json:"path"`
	Equals  json.RawMessage `json:"equals"`
	Timeout string          `json:"timeout,omitempty"`
}

// AppPing is a text frame sent every Every (a Go duration). A text frame
// equal to Pong, when set, is the source's answer: it is not delivered.
type AppPing struct {
	Message string `json:"message"`
	Every   string `json:"every"`
	Pong    string `json:"pong,omitempty"`
}

// KeepaliveReply answers every message matching Match with Reply (a
// templated text frame). Matched messages are not delivered unless Deliver.
type KeepaliveReply struct {
	Match   Match  `json:"match"`
	Reply   string `json:"reply"`
	Deliver bool   `json:"deliver,omitempty"`
}

// FieldError is a configuration a start must refuse: Field is the
// top-level body field at fault (open_messages, app_ping, …), Reason why.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

func bad(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Normalize drops the spelled-out defaults, so that a start naming a
// default and one omitting it store (and compare) the same.
func (c *Config) Normalize() {
	if c.SeqMode == SeqField {
		c.SeqMode = ""
	}
	if c.OnMissingSeq == MissingDrop {
		c.OnMissingSeq = ""
	}
	if c.OnSinkRefusal == RefusalFail {
		c.OnSinkRefusal = ""
	}
	if len(c.OpenMessages) == 0 {
		c.OpenMessages = nil
	}
	if c.MaxConnectionAge != "" {
		c.MaxConnectionAge = Duration(c.MaxConnectionAge).String()
	}
	if c.SwitchTimeout != "" {
		if d := Duration(c.SwitchTimeout); d == DefaultSwitchTimeout {
			c.SwitchTimeout = ""
		} else {
			c.SwitchTimeout = d.String()
		}
	}
}

// Validate checks c against the limits and reports the first problem. The
// checks that involve the session's other fields (seq_path, the resume
// query parameter) are the caller's.
func (c Config) Validate() *FieldError {
	none := c.SeqMode == SeqNone
	switch c.SeqMode {
	case "", SeqField, SeqNone:
	default:
		return bad("seq_mode", `must be "field" or "none"`)
	}
	switch c.OnMissingSeq {
	case "", MissingDrop, MissingDeliver:
		if none && c.OnMissingSeq != "" {
			return bad("on_missing_seq", `applies to seq_mode "field" only`)
		}
	default:
		return bad("on_missing_seq", `must be "deliver" or "drop"`)
	}
	switch c.OnSinkRefusal {
	case "", RefusalFail, RefusalSkip:
	default:
		return bad("on_sink_refusal", `must be "fail" or "skip"`)
	}
	if e := c.validateOpen(none); e != nil {
		return e
	}
	if p := c.AppPing; p != nil {
		if p.Message == "" || len(p.Message) > MaxControlBytes {
			return bad("app_ping", "message must be 1..%d bytes", MaxControlBytes)
		}
		if secretref.Contains(p.Message) {
			return bad("app_ping", "message: secret references are taken in headers and open_messages only")
		}
		if e := checkTemplate("app_ping", "message", p.Message, none); e != nil {
			return e
		}
		if len(p.Pong) > MaxControlBytes {
			return bad("app_ping", "pong must be at most %d bytes", MaxControlBytes)
		}
		if _, err := ParseDuration(p.Every, MinPingEvery, MaxPingEvery); err != nil {
			return bad("app_ping", "every %v", err)
		}
	}
	if k := c.KeepaliveReply; k != nil {
		if e := checkMatch("keepalive_reply", "match", k.Match, false); e != nil {
			return e
		}
		if k.Reply == "" || len(k.Reply) > MaxControlBytes {
			return bad("keepalive_reply", "reply must be 1..%d bytes", MaxControlBytes)
		}
		if secretref.Contains(k.Reply) {
			return bad("keepalive_reply", "reply: secret references are taken in headers and open_messages only")
		}
		if e := checkTemplate("keepalive_reply", "reply", k.Reply, none); e != nil {
			return e
		}
	}
	if c.IdleTimeout != "" {
		if _, err := ParseDuration(c.IdleTimeout, MinIdleTimeout, MaxIdleTimeout); err != nil {
			return bad("idle_timeout", "%v", err)
		}
	}
	return c.validatePlanned()
}

// validatePlanned checks max_connection_age, reconnect_on and
// switch_timeout.
func (c Config) validatePlanned() *FieldError {
	if c.MaxConnectionAge != "" {
		if _, err := ParseDuration(c.MaxConnectionAge, MinConnectionAge, MaxConnectionAge); err != nil {
			return bad("max_connection_age", "%v", err)
		}
	}
	if r := c.ReconnectOn; r != nil {
		if e := checkMatch("reconnect_on", "match", r.Match, false); e != nil {
			return e
		}
	}
	if c.SwitchTimeout != "" {
		if !c.Planned() {
			return bad("switch_timeout", "applies with max_connection_age or reconnect_on only")
		}
		if _, err := ParseDuration(c.SwitchTimeout, MinSwitchTimeout, MaxSwitchTimeout); err != nil {
			return bad("switch_timeout", "%v", err)
		}
	}
	return nil
}

func (c Config) validateOpen(none bool) *FieldError {
	if len(c.OpenMessages) > MaxOpenMessages {
		return bad("open_messages", "at most %d messages", MaxOpenMessages)
	}
	total := 0
	for i, m := range c.OpenMessages {
		where := "open_messages[" + strconv.Itoa(i) + "]"
		var n int
		switch {
		case (m.Text == nil) == (m.BinaryB64 == nil):
			return bad("open_messages", "%s must have exactly one of text and binary_b64", where)
		case m.Text != nil:
			n = len(*m.Text)
			if e := checkTemplate("open_messages", where+".text", *m.Text, none); e != nil {
				return e
			}
		default:
			b, err := base64.StdEncoding.DecodeString(*m.BinaryB64)
			if err != nil {
				return bad("open_messages", "%s.binary_b64 is not valid standard base64", where)
			}
			n = len(b)
		}
		if n == 0 || n > MaxOpenMessageBytes {
			return bad("open_messages", "%s must be 1..%d bytes", where, MaxOpenMessageBytes)
		}
		total += n
		if m.WaitFor != nil {
			if e := checkMatch("open_messages", where+".wait_for", *m.WaitFor, true); e != nil {
				return e
			}
		}
	}
	if total > MaxOpenTotalBytes {
		return bad("open_messages", "%d bytes in all, at most %d", total, MaxOpenTotalBytes)
	}
	return nil
}

func checkMatch(field, where string, m Match, timeout bool) *FieldError {
	if _, err := ParsePath(m.Path); err != nil {
		return bad(field, "%s.path %v", where, err)
	}
	if len(m.Equals) == 0 {
		return bad(field, "%s.equals is required", where)
	}
	if len(m.Equals) > MaxEqualsBytes {
		return bad(field, "%s.equals must be at most %d bytes", where, MaxEqualsBytes)
	}
	var v any
	if err := json.Unmarshal(m.Equals, &v); err != nil {
		return bad(field, "%s.equals is not valid JSON", where)
	}
	switch v.(type) {
	case string, float64, bool, nil:
	default:
		return bad(field, "%s.equals must be a string, number, boolean or null", where)
	}
	if timeout {
		if m.Timeout != "" {
			if _, err := ParseDuration(m.Timeout, MinWaitTimeout, MaxWaitTimeout); err != nil {
				return bad(field, "%s.timeout %v", where, err)
			}
		}
	} else if m.Timeout != "" {
		return bad(field, "%s.timeout applies to wait_for only", where)
	}
	return nil
}

// ParseDuration parses a Go duration within [min, max].
func ParseDuration(v string, min, max time.Duration) (time.Duration, error) {
	if len(v) > maxDurationBytes {
		return 0, fmt.Errorf("must be a duration from %v to %v", min, max)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < min || d > max {
		return 0, fmt.Errorf("must be a duration from %v to %v, such as \"20s\"", min, max)
	}
	return d, nil
}

// Duration is a validated duration field of c ("" = 0).
func Duration(v string) time.Duration {
	d, _ := time.ParseDuration(v)
	return d
}

// WaitTimeout is how long a wait_for waits.
func (m Match) WaitTimeout() time.Duration {
	if m.Timeout == "" {
		return DefaultWaitFor
	}
	return Duration(m.Timeout)
}

// ParsePath splits a dotted path ("data.u") into its keys: at most
// MaxPathSegments, MaxPathBytes in all, none empty.
func ParsePath(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("is required")
	}
	if len(p) > MaxPathBytes {
		return nil, fmt.Errorf("must be at most %d bytes", MaxPathBytes)
	}
	segs := strings.Split(p, ".")
	if len(segs) > MaxPathSegments {
		return nil, fmt.Errorf("must have at most %d segments", MaxPathSegments)
	}
	for _, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("%q has an empty segment", p)
		}
		for _, r := range s {
			if r < 0x20 || r == '"' || r == '\\' || r == 0x7f {
				return nil, fmt.Errorf("%q has a control character, quote or backslash", p)
			}
		}
	}
	return segs, nil
}

// Placeholders an open message, app_ping.message or keepalive_reply.reply
// may carry. No other {{…}} is accepted.
const (
	PhResumeFrom   = "{{resume_from}}"
	PhLastSeq      = "{{last_seq}}"
	PhConnectionID = "{{connection_id}}"
	PhGeneration   = "{{generation}}"
)

var placeholders = []string{PhResumeFrom, PhLastSeq, PhConnectionID, PhGeneration}

// checkTemplate refuses an unknown placeholder, and the seq placeholders
// under seq_mode none (the worker's own numbering means nothing to the
// source).
func checkTemplate(field, where, s string, none bool) *FieldError {
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			return nil
		}
		rest = rest[i:]
		if strings.HasPrefix(rest, secretref.Open) {
			// A secret reference (shared/secretref): its syntax is checked
			// here, whether this deployment allows it is ingest's check.
			_, n, ok := secretref.At(rest)
			if !ok {
				return bad(field, "%s: a malformed secret reference ({{secret:NAME}} or {{secret:NAME#key}})", where)
			}
			rest = rest[n:]
			continue
		}
		known := ""
		for _, p := range placeholders {
			if strings.HasPrefix(rest, p) {
				known = p
				break
			}
		}
		if known == "" {
			j := strings.Index(rest, "}}")
			name := rest
			if j >= 0 {
				name = rest[:j+2]
			}
			if len(name) > 40 {
				name = name[:40] + "…"
			}
			return bad(field, "%s: unknown placeholder %q (known: %s)", where, name, strings.Join(placeholders, ", "))
		}
		if none && (known == PhResumeFrom || known == PhLastSeq) {
			return bad(field, `%s: %s needs seq_mode "field" (under "none" the source has no seq to resume from)`, where, known)
		}
		rest = rest[len(known):]
	}
}

// Vars are the values of the placeholders. LastSeq < 0: nothing delivered
// yet, and {{last_seq}} and {{resume_from}} render as empty text.
type Vars struct {
	LastSeq      int64
	ResumeLast   bool // resume.value "last": {{resume_from}} is last_seq itself
	ConnectionID string
	Generation   int64
}

// Render replaces the placeholders in s (validated) with v.
func Render(s string, v Vars) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	last, from := "", ""
	if v.LastSeq >= 0 {
		last = strconv.FormatInt(v.LastSeq, 10)
		from = strconv.FormatInt(v.LastSeq+1, 10)
		if v.ResumeLast {
			from = last
		}
	}
	return strings.NewReplacer(PhResumeFrom, from, PhLastSeq, last, PhConnectionID, v.ConnectionID,
		PhGeneration, strconv.FormatInt(v.Generation, 10)).Replace(s)
}

// Matcher is a compiled Match: the path's keys and the expected value as
// the source writes it.
type Matcher struct {
	Path   []string
	equals []byte
	str    *string // equals is a JSON string: compared decoded
}

// Compile compiles a validated m.
func (m Match) Compile() Matcher {
	path, _ := ParsePath(m.Path)
	out := Matcher{Path: path, equals: bytes.TrimSpace(m.Equals)}
	var s string
	if json.Unmarshal(m.Equals, &s) == nil {
		out.str = &s
	}
	return out
}

// Equal reports whether raw (the JSON value found at the path) is the
// expected value.
func (m Matcher) Equal(raw []byte) bool {
	if m.str == nil {
		return bytes.Equal(raw, m.equals)
	}
	if len(raw) < 2 || raw[0] != '"' {
		return false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1:len(raw)-1]) == *m.str
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == *m.str
}

// Bytes is the frame an open message sends (validated): the text or the
// decoded binary, and whether it is binary.
func (m OpenMessage) Bytes(v Vars) ([]byte, bool) {
	if m.Text != nil {
		return []byte(Render(*m.Text, v)), false
	}
	b, _ := base64.StdEncoding.DecodeString(*m.BinaryB64)
	return b, true
}
