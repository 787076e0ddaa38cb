package source

// A source protocol's checks: Normalize fills its defaults, Validate reports
// every problem as a FieldError naming the field.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/wsfleet/wsfleet/shared/secretref"
)

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
