package source

// A stored source protocol's run rules: what a worker needs of a
// configuration to run it at all, apart from the admission limits
// (Validate), which only ingest applies.

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// Runnable reports the first problem that keeps a worker from running c as
// stored: a value of seq_mode, on_missing_seq or on_sink_refusal it does
// not know (a newer ingest's: running it as the default would change what
// is delivered), an open message that is neither text nor base64, a
// template it cannot render, a match whose path does not parse, a duration
// that is not a positive Go duration. Every configuration Validate accepts
// is runnable; the converse does not hold: the limits (sizes, counts,
// duration ranges, the rules between fields) are admission's, so that
// tightening one later does not fail a stored session. Messages name the
// field and the element, never a value.
func (c Config) Runnable() *FieldError {
	for _, e := range []struct {
		field, v string
		known    []string
	}{
		{"seq_mode", c.SeqMode, []string{SeqField, SeqNone}},
		{"on_missing_seq", c.OnMissingSeq, []string{MissingDrop, MissingDeliver}},
		{"on_sink_refusal", c.OnSinkRefusal, []string{RefusalFail, RefusalSkip}},
	} {
		if e.v != "" && !slices.Contains(e.known, e.v) {
			return bad(e.field, "a value this worker does not know")
		}
	}
	for i, m := range c.OpenMessages {
		where := "open_messages[" + strconv.Itoa(i) + "]"
		switch {
		case (m.Text == nil) == (m.BinaryB64 == nil):
			return bad("open_messages", "%s has not exactly one of text and binary_b64", where)
		case m.Text != nil:
			if checkTemplate("open_messages", where, *m.Text, false) != nil {
				return bad("open_messages", "%s.text has an unknown placeholder or a malformed secret reference", where)
			}
		default:
			if _, err := base64.StdEncoding.DecodeString(*m.BinaryB64); err != nil {
				return bad("open_messages", "%s.binary_b64 is not standard base64", where)
			}
		}
		if w := m.WaitFor; w != nil {
			if e := runnableMatch("open_messages", where+".wait_for", *w); e != nil {
				return e
			}
		}
	}
	if p := c.AppPing; p != nil {
		if checkTemplate("app_ping", "message", p.Message, false) != nil {
			return bad("app_ping", "message has an unknown placeholder")
		}
		if !positive(p.Every) {
			return bad("app_ping", "every is not a positive duration")
		}
	}
	if k := c.KeepaliveReply; k != nil {
		if e := runnableMatch("keepalive_reply", "match", k.Match); e != nil {
			return e
		}
		if checkTemplate("keepalive_reply", "reply", k.Reply, false) != nil {
			return bad("keepalive_reply", "reply has an unknown placeholder")
		}
	}
	if r := c.ReconnectOn; r != nil {
		if e := runnableMatch("reconnect_on", "match", r.Match); e != nil {
			return e
		}
	}
	for _, d := range []struct{ field, v string }{
		{"idle_timeout", c.IdleTimeout}, {"max_connection_age", c.MaxConnectionAge}, {"switch_timeout", c.SwitchTimeout},
	} {
		if d.v != "" && !positive(d.v) {
			return bad(d.field, "not a positive duration")
		}
	}
	return nil
}

// runnableMatch reports a match the worker cannot compile: a path that
// does not parse, an equals that is not one JSON value, a timeout that is
// not a positive duration.
func runnableMatch(field, where string, m Match) *FieldError {
	if _, err := ParsePath(m.Path); err != nil {
		return bad(field, "%s.path does not parse", where)
	}
	if len(m.Equals) == 0 || !json.Valid(m.Equals) {
		return bad(field, "%s.equals is not a JSON value", where)
	}
	if m.Timeout != "" && !positive(m.Timeout) {
		return bad(field, "%s.timeout is not a positive duration", where)
	}
	return nil
}

// positive reports whether v is a Go duration above zero.
func positive(v string) bool {
	d, err := time.ParseDuration(v)
	return err == nil && d > 0
}
