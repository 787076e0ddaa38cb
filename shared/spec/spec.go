// Package spec owns a session's desired configuration: the one Spec type
// that ingest decodes from POST /sessions, admits (Check, with errors that
// name the field: at ingest only), stores (Encode: the session item's spec
// attribute) and shows redacted (View, for GET), that a start compares to
// decide whether the generation moves (two specs are the same configuration
// exactly when their encodings are equal), and that the worker dials from
// (Decode: the stored form read back under the run rules, never admitted
// again, so a rule tightened later fails no stored session; a field it does
// not know is ErrUnknownField, the workers-first rollout rule). The
// ownership core carries the stored form without reading it. A new start
// field that stands alone is one setting (settings.go: the field, its
// check, its run rule) and the worker code that reads it; the checklist is
// docs/guides/start-field.md.
package spec

import (
	"strings"

	"github.com/wsfleet/wsfleet/shared/source"
)

// Spec is a session's desired configuration, in the JSON form of the start
// body (docs/api.md). After Check it is canonical: the aliases folded
// (SeqField into SeqPath, ResumeQueryParam into Resume), spelled-out
// defaults dropped, empty lists and maps nil, durations in Go's own form.
type Spec struct {
	WSURL string `json:"ws_url"`
	// Headers are sent on the handshake; values may carry credentials:
	// never logged, shown or put in a metric.
	Headers map[string]string `json:"headers,omitempty"`
	// SeqField is the input alias of SeqPath ("" once checked).
	SeqField string `json:"seq_field,omitempty"`
	// ResumeQueryParam is the input alias of Resume.QueryParam ("" once
	// checked).
	ResumeQueryParam string `json:"resume_query_param,omitempty"`
	// The settings that stand alone (settings.go): subprotocols,
	// follow_redirects, checkpoint_every, … Here, for the stored key order.
	Settings
	// SeqPath is the dotted path to a message's seq; "": DefaultSeqPath.
	SeqPath string  `json:"seq_path,omitempty"`
	Resume  *Resume `json:"resume,omitempty"`
	// Standby asks for a hot standby (standby.go); nil: none.
	Standby *Standby `json:"standby,omitempty"`
	// The source protocol: seq mode, open messages, pings, keep-alive
	// reply, idle timeout, what a missing seq or a sink refusal does.
	source.Config
}

// Resume is how a reconnect asks the source to resume: QueryParam set to
// last_seq + 1 (Value "next", the default) or last_seq (Value "last").
// Without QueryParam, Value still sets {{resume_from}} in open messages.
type Resume struct {
	QueryParam string `json:"query_param,omitempty"`
	Value      string `json:"value,omitempty"`
}

// Resume values (resume.value).
const (
	ResumeNext = "next" // last_seq + 1, the default
	ResumeLast = "last" // last_seq: the source sends it again (inclusive)
)

// Seq is the checked path of the seq ("" names DefaultSeqPath).
func (s Spec) Seq() string {
	if s.SeqPath == "" {
		return source.DefaultSeqPath
	}
	return s.SeqPath
}

// ResumeParam is the query parameter a reconnect sets ("": none).
func (s Spec) ResumeParam() string {
	if s.Resume == nil {
		return ""
	}
	return s.Resume.QueryParam
}

// ResumesLast reports whether a reconnect resumes at last_seq itself
// (resume.value "last") rather than last_seq + 1.
func (s Spec) ResumesLast() bool { return s.Resume != nil && s.Resume.Value == ResumeLast }

// Resumable reports whether a new connection can ask the source to resume
// from a checkpoint: under seq_mode field, a resume query parameter, or an
// open message whose text carries {{resume_from}} or {{last_seq}}. A source
// that cannot (seq_mode none; a live stream without either) sends only what
// comes after the dial, whatever the checkpoint says.
func (s Spec) Resumable() bool {
	if s.SeqMode == source.SeqNone {
		return false
	}
	if s.ResumeParam() != "" {
		return true
	}
	for _, m := range s.OpenMessages {
		if m.Text != nil && (strings.Contains(*m.Text, source.PhResumeFrom) || strings.Contains(*m.Text, source.PhLastSeq)) {
			return true
		}
	}
	return false
}
