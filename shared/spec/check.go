package spec

import (
	"fmt"
	"maps"
	"regexp"
	"slices"

	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/source"
)

// bad is a refusal of field (source.FieldError: the one refusal type of a
// start's checks, the source protocol's and the session's).
func bad(field, format string, args ...any) *source.FieldError {
	return &source.FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Keys are the top-level keys a body gave a value other than null (see
// CheckKeys): what tells an omitted field from an empty one. A spec built
// in code checks with nil Keys: its non-empty fields count as given.
type Keys map[string]bool

// has reports whether key was given: named by the body, or set.
func (k Keys) has(key string, set bool) bool { return set || k[key] }

var (
	seqFieldPattern    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	resumeParamPattern = regexp.MustCompile(`^[A-Za-z0-9_.~-]{1,64}$`)
)

// Check validates s as decoded from a body that gave the keys given, and
// makes it canonical (see Spec). It reports the first problem. Where the
// worker may dial (the scheme, the host allowlist, the address policy) is
// the deployment's to check, not the spec's.
func (s *Spec) Check(given Keys) *source.FieldError {
	if s.WSURL == "" {
		return bad("ws_url", "ws_url is required")
	}
	if e := checkHeaders(s.Headers); e != nil {
		return e
	}
	if len(s.Headers) == 0 {
		s.Headers = nil
	}
	if e := s.checkSeq(given); e != nil {
		return e
	}
	if e := s.checkSource(given); e != nil {
		return e
	}
	if e := s.checkRefCount(); e != nil {
		return e
	}
	if e := s.Settings.check(given); e != nil {
		return e
	}
	if e := s.checkStandby(); e != nil {
		return e
	}
	return s.checkStored()
}

// checkSeq checks the seq path and resume fields and folds their aliases.
func (s *Spec) checkSeq(given Keys) *source.FieldError {
	none := s.SeqMode == source.SeqNone
	path := ""
	seqField, seqPath := given.has("seq_field", s.SeqField != ""), given.has("seq_path", s.SeqPath != "")
	resumeParam := given.has("resume_query_param", s.ResumeQueryParam != "")
	if seqField {
		if _, err := source.ParsePath(s.SeqField); err != nil || !seqFieldPattern.MatchString(s.SeqField) {
			return bad("seq_field", "seq_field must match %s with no empty segment between dots", seqFieldPattern)
		}
		path = s.SeqField
	}
	if seqPath {
		if _, err := source.ParsePath(s.SeqPath); err != nil {
			return bad("seq_path", "seq_path %v", err)
		}
		if seqField && s.SeqField != s.SeqPath {
			return bad("seq_path", "seq_path and its alias seq_field are both given and differ")
		}
		path = s.SeqPath
	}
	if none && (seqField || seqPath) {
		return bad("seq_path", `seq_path (or seq_field) applies to seq_mode "field" only: under "none" the worker numbers the messages`)
	}
	s.SeqField, s.SeqPath = "", path
	if s.SeqPath == source.DefaultSeqPath {
		s.SeqPath = ""
	}
	var r Resume
	if resumeParam {
		if !resumeParamPattern.MatchString(s.ResumeQueryParam) {
			return bad("resume_query_param", "resume_query_param must match %s", resumeParamPattern)
		}
		r.QueryParam = s.ResumeQueryParam
	}
	if s.Resume != nil {
		if q := s.Resume.QueryParam; q != "" {
			if !resumeParamPattern.MatchString(q) {
				return bad("resume", "resume.query_param must match %s", resumeParamPattern)
			}
			if resumeParam && s.ResumeQueryParam != q {
				return bad("resume", "resume.query_param and its alias resume_query_param are both given and differ")
			}
			r.QueryParam = q
		}
		r.Value = s.Resume.Value
	}
	if none && (s.Resume != nil || resumeParam) {
		return bad("resume", `resume applies to seq_mode "field" only: under "none" the source has no seq to resume from`)
	}
	switch r.Value {
	case "", ResumeLast:
	case ResumeNext:
		r.Value = ""
	default:
		return bad("resume", `resume: value must be "next" or "last"`)
	}
	s.ResumeQueryParam, s.Resume = "", nil
	if r != (Resume{}) {
		s.Resume = &r
	}
	return nil
}

// checkSource checks the source protocol (shared/source) and drops its
// spelled-out defaults.
func (s *Spec) checkSource(given Keys) *source.FieldError {
	if given["on_sink_refusal"] && s.OnSinkRefusal == "" {
		return bad("on_sink_refusal", `on_sink_refusal must be "fail" or "skip"; omit it for "fail"`)
	}
	if given["idle_timeout"] && s.IdleTimeout == "" {
		return bad("idle_timeout", "idle_timeout must be a duration; omit it for none")
	}
	if given["max_connection_age"] && s.MaxConnectionAge == "" {
		return bad("max_connection_age", "max_connection_age must be a duration; omit it for none")
	}
	if given["switch_timeout"] && s.SwitchTimeout == "" {
		return bad("switch_timeout", "switch_timeout must be a duration; omit it for the default (30s)")
	}
	if fe := s.Config.Validate(); fe != nil {
		return fe
	}
	s.Config.Normalize()
	return nil
}

// checkRefCount allows at most secretref.MaxRefs secret references in the
// header values and open messages together (each one can stand for a whole
// secret at every dial), naming the header or open message that passes it.
func (s *Spec) checkRefCount() *source.FieldError {
	n := 0
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		if n += secretref.Count(s.Headers[name]); n > secretref.MaxRefs {
			return bad("headers", "header %s value: more than %d secret references in headers and open_messages together", QuoteName(name), secretref.MaxRefs)
		}
	}
	for i, m := range s.OpenMessages {
		if m.Text == nil {
			continue
		}
		if n += secretref.Count(*m.Text); n > secretref.MaxRefs {
			return bad("open_messages", "open_messages[%d].text: more than %d secret references in headers and open_messages together", i, secretref.MaxRefs)
		}
	}
	return nil
}
