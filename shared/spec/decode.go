package spec

// A stored spec read back: decoding apart from admission (Check).

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/textproto"
	"reflect"
	"slices"

	"github.com/wsfleet/wsfleet/shared/source"
)

// Decode reads a stored spec (Encode's form, written by ingest) to run it
// or show it: it parses it, refuses a field this build does not know
// (ErrUnknownField, at any depth), makes it canonical (the aliases folded,
// spelled-out defaults dropped, as Check does) and checks the run rules:
// what a worker cannot run at all (no ws_url, a path that does not parse, a
// value of an enumerated field it does not know, a duration that is not
// positive, a header the handshake cannot send, more secret references
// than it resolves; source.Config.Runnable). It never applies the
// admission limits (Check, at ingest only): a rule tightened later does
// not fail a session stored under the older one. On a refusal it returns
// the spec as decoded with the error (a view can still show it); the
// error's text names the field and never quotes a value.
func Decode(stored string) (Spec, error) {
	if stored == "" {
		return Spec{}, errors.New("stored session spec is empty")
	}
	var unknown error
	if _, err := CheckKeys([]byte(stored), reflect.TypeFor[Spec]()); err != nil {
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Kind != KeyUnknown {
			return Spec{}, errors.New("stored session spec is not valid JSON")
		}
		unknown = fmt.Errorf("%w: %s (written by a newer ingest: deploy the workers first, then start the session again)", ErrUnknownField, QuoteName(ke.Path))
	}
	var s Spec
	if err := json.Unmarshal([]byte(stored), &s); err != nil {
		return Spec{}, errors.New("stored session spec is not valid JSON")
	}
	if unknown != nil {
		return s, unknown
	}
	run := s
	run.Headers, run.Subprotocols = maps.Clone(s.Headers), slices.Clone(s.Subprotocols)
	if fe := run.runnable(); fe != nil {
		return s, fmt.Errorf("stored session spec is invalid (%s): %s", fe.Field, fe.Message)
	}
	return run, nil
}

// runnable checks the run rules of a stored spec and makes it canonical.
func (s *Spec) runnable() *source.FieldError {
	if s.WSURL == "" {
		return bad("ws_url", "ws_url is missing")
	}
	if e := runnableHeaders(s.Headers); e != nil {
		return e
	}
	if e := s.Settings.runnable(); e != nil {
		return e
	}
	if e := s.Config.Runnable(); e != nil {
		return e
	}
	if e := s.checkRefCount(); e != nil {
		return e
	}
	if e := s.foldSeq(); e != nil {
		return e
	}
	if e := s.foldStandby(); e != nil {
		return e
	}
	if len(s.Headers) == 0 {
		s.Headers = nil
	}
	s.Config.Normalize()
	return nil
}

// runnableHeaders refuses a header the handshake cannot send or may not be
// given (not an HTTP token, the handshake's own, given twice, a control
// byte in its value); the counts and lengths are admission's.
func runnableHeaders(h map[string]string) *source.FieldError {
	seen := make(map[string]bool, len(h))
	for _, name := range slices.Sorted(maps.Keys(h)) {
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if !ValidHeaderName(name) || canon == "Sec-Websocket-Protocol" || seen[canon] {
			return bad("headers", "header %s may not be sent on the handshake", QuoteName(name))
		}
		seen[canon] = true
		if !validHeaderValue(h[name]) {
			return bad("headers", "header %s value holds a control or non-ASCII byte", QuoteName(name))
		}
	}
	return nil
}

// foldSeq folds the seq path's and the resume parameter's aliases and
// drops their defaults, refusing a path that does not parse, aliases that
// differ, and a resume value this build does not know.
func (s *Spec) foldSeq() *source.FieldError {
	path := s.SeqPath
	if s.SeqField != "" {
		if path != "" && path != s.SeqField {
			return bad("seq_path", "seq_path and its alias seq_field differ")
		}
		path = s.SeqField
	}
	if path == source.DefaultSeqPath {
		path = ""
	}
	s.SeqField, s.SeqPath = "", path
	if _, err := source.ParsePath(s.Seq()); err != nil {
		return bad("seq_path", "seq_path does not parse")
	}
	var r Resume
	if s.Resume != nil {
		r = *s.Resume
	}
	if q := s.ResumeQueryParam; q != "" {
		if r.QueryParam != "" && r.QueryParam != q {
			return bad("resume", "resume.query_param and its alias resume_query_param differ")
		}
		r.QueryParam = q
	}
	switch r.Value {
	case "", ResumeLast:
	case ResumeNext:
		r.Value = ""
	default:
		return bad("resume", "resume.value is a value this worker does not know")
	}
	s.ResumeQueryParam, s.Resume = "", nil
	if r != (Resume{}) {
		s.Resume = &r
	}
	return nil
}

// foldStandby drops a standby that is not enabled and the window's
// defaults, refusing a window the worker cannot keep. It builds a new
// Standby: the decoded one is the caller's.
func (s *Spec) foldStandby() *source.FieldError {
	in := s.Standby
	s.Standby = nil
	if in == nil || in.Enabled == nil || !*in.Enabled {
		return nil
	}
	out := Standby{Enabled: new(true)}
	if w := in.Window; w != nil {
		d := source.Duration(*w)
		if d <= 0 {
			return bad("standby", "standby.window is not a positive duration")
		}
		if d != DefaultStandbyWindow {
			out.Window = new(d.String())
		}
	}
	if b := in.WindowBytes; b != nil {
		if *b <= 0 {
			return bad("standby", "standby.window_bytes is not positive")
		}
		if *b != DefaultStandbyWindowBytes {
			out.WindowBytes = new(*b)
		}
	}
	s.Standby = &out
	return nil
}
