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
	"strings"
	"time"
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
