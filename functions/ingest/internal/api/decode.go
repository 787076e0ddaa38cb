package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/sessionapi"
	"github.com/wsfleet/wsfleet/shared/source"
)

// startBody is the JSON body of POST /sessions. Pointers tell absent (or
// null) from empty.
type startBody struct {
	ConnectionID     *string           `json:"connection_id"`
	WSURL            *string           `json:"ws_url"`
	Headers          map[string]string `json:"headers"`
	SeqField         *string           `json:"seq_field"`
	ResumeQueryParam *string           `json:"resume_query_param"`
	Subprotocols     []string          `json:"subprotocols"`
	FollowRedirects  *int              `json:"follow_redirects"`
	CheckpointEvery  *string           `json:"checkpoint_every"`

	// The source protocol (shared/source).
	SeqPath        *string                `json:"seq_path"`
	SeqMode        *string                `json:"seq_mode"`
	OnMissingSeq   *string                `json:"on_missing_seq"`
	OnSinkRefusal  *string                `json:"on_sink_refusal"`
	Resume         *sessionapi.Resume     `json:"resume"`
	OpenMessages   []source.OpenMessage   `json:"open_messages"`
	AppPing        *source.AppPing        `json:"app_ping"`
	KeepaliveReply *source.KeepaliveReply `json:"keepalive_reply"`
	IdleTimeout    *string                `json:"idle_timeout"`
}

// startFields are the keys of a start body, matched case-sensitively
// (encoding/json alone would also take "WS_URL").
var startFields = map[string]bool{
	"connection_id": true, "ws_url": true, "headers": true, "seq_field": true, "resume_query_param": true,
	"subprotocols": true, "follow_redirects": true, "checkpoint_every": true,
	"seq_path": true, "seq_mode": true, "on_missing_seq": true, "on_sink_refusal": true, "resume": true, "open_messages": true,
	"app_ping": true, "keepalive_reply": true, "idle_timeout": true,
}

var (
	seqFieldPattern    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	resumeParamPattern = regexp.MustCompile(`^[A-Za-z0-9_.~-]{1,64}$`)
)

// DecodeStart decodes and validates a start body. It returns the desired
// configuration, with a generated connection_id when the body has none.
func DecodeStart(body []byte, policy URLPolicy) (sessions.Desired, *apiError) {
	var b startBody
	if err := decodeStrict(body, &b, startFields); err != nil {
		return sessions.Desired{}, err
	}
	var d sessions.Desired
	if b.ConnectionID == nil {
		d.ConnectionID = NewConnectionID()
	} else {
		if e := CheckConnectionID(*b.ConnectionID); e != nil {
			return sessions.Desired{}, e
		}
		d.ConnectionID = *b.ConnectionID
	}
	if b.WSURL == nil {
		return sessions.Desired{}, badRequest(CodeInvalidWSURL, "ws_url is required")
	}
	if e := policy.CheckWSURL(*b.WSURL); e != nil {
		return sessions.Desired{}, e
	}
	d.WSURL = *b.WSURL
	if e := CheckHeaders(b.Headers); e != nil {
		return sessions.Desired{}, e
	}
	if len(b.Headers) > 0 {
		d.Headers = b.Headers
	}
	if e := decodeSource(&b, &d); e != nil {
		return sessions.Desired{}, e
	}
	if e := CheckSubprotocols(b.Subprotocols); e != nil {
		return sessions.Desired{}, e
	}
	if len(b.Subprotocols) > 0 {
		d.Subprotocols = b.Subprotocols
	}
	if b.FollowRedirects != nil {
		if n := *b.FollowRedirects; n < 0 || n > MaxFollowRedirects {
			return sessions.Desired{}, badRequest(CodeInvalidFollowRedirects, fmt.Sprintf("follow_redirects must be 0..%d", MaxFollowRedirects))
		}
		d.FollowRedirects = *b.FollowRedirects
	}
	if b.CheckpointEvery != nil {
		ms, e := CheckCheckpointEvery(*b.CheckpointEvery)
		if e != nil {
			return sessions.Desired{}, e
		}
		d.CheckpointEveryMs = ms
	}
	return d, nil
}

// The range of a start's checkpoint_every: a checkpoint bounds how much a
// crash replays, and each one is a write unit.
const (
	MinCheckpointEvery = time.Second
	MaxCheckpointEvery = 10 * time.Minute
)

// decodeSource checks the sequence, resume and source protocol fields of b
// and puts them in d: SeqField (the dotted seq path), ResumeQueryParam and
// Source (the stored shared/source configuration).
func decodeSource(b *startBody, d *sessions.Desired) *apiError {
	var c source.Config
	if b.SeqMode != nil {
		c.SeqMode = *b.SeqMode
	}
	none := c.SeqMode == source.SeqNone
	d.SeqField = source.DefaultSeqPath
	if b.SeqField != nil {
		if _, err := source.ParsePath(*b.SeqField); err != nil || !seqFieldPattern.MatchString(*b.SeqField) {
			return badRequest(CodeInvalidSeqField, "seq_field must match "+seqFieldPattern.String()+" with no empty segment between dots")
		}
		d.SeqField = *b.SeqField
	}
	if b.SeqPath != nil {
		if _, err := source.ParsePath(*b.SeqPath); err != nil {
			return badRequest(CodeInvalidSeqPath, "seq_path "+err.Error())
		}
		if b.SeqField != nil && *b.SeqField != *b.SeqPath {
			return badRequest(CodeInvalidSeqPath, "seq_path and its alias seq_field are both given and differ")
		}
		d.SeqField = *b.SeqPath
	}
	if none && (b.SeqField != nil || b.SeqPath != nil) {
		return badRequest(CodeInvalidSeqPath, `seq_path (or seq_field) applies to seq_mode "field" only: under "none" the worker numbers the messages`)
	}
	if b.ResumeQueryParam != nil {
		if !resumeParamPattern.MatchString(*b.ResumeQueryParam) {
			return badRequest(CodeInvalidResumeParam, "resume_query_param must match "+resumeParamPattern.String())
		}
		d.ResumeQueryParam = *b.ResumeQueryParam
	}
	if r := b.Resume; r != nil {
		if r.QueryParam != "" {
			if !resumeParamPattern.MatchString(r.QueryParam) {
				return badRequest(CodeInvalidResume, "resume.query_param must match "+resumeParamPattern.String())
			}
			if b.ResumeQueryParam != nil && *b.ResumeQueryParam != r.QueryParam {
				return badRequest(CodeInvalidResume, "resume.query_param and its alias resume_query_param are both given and differ")
			}
			d.ResumeQueryParam = r.QueryParam
		}
		c.ResumeValue = r.Value
	}
	if none && (b.Resume != nil || b.ResumeQueryParam != nil) {
		return badRequest(CodeInvalidResume, `resume applies to seq_mode "field" only: under "none" the source has no seq to resume from`)
	}
	if b.OnMissingSeq != nil {
		c.OnMissingSeq = *b.OnMissingSeq
	}
	if b.OnSinkRefusal != nil {
		c.OnSinkRefusal = *b.OnSinkRefusal
		if c.OnSinkRefusal == "" {
			return badRequest(CodeInvalidOnSinkRefusal, `on_sink_refusal must be "fail" or "skip"; omit it for "fail"`)
		}
	}
	if b.IdleTimeout != nil {
		c.IdleTimeout = *b.IdleTimeout
		if c.IdleTimeout == "" {
			return badRequest(CodeInvalidIdleTimeout, "idle_timeout must be a duration; omit it for none")
		}
	}
	c.OpenMessages, c.AppPing, c.KeepaliveReply = b.OpenMessages, b.AppPing, b.KeepaliveReply
	enc, fe := c.Checked()
	if fe != nil {
		return badRequest(sourceCodes[fe.Field], fe.Error())
	}
	d.Source = enc
	return nil
}

// sourceCodes are the error codes of the fields shared/source checks.
var sourceCodes = map[string]string{
	"open_messages": CodeInvalidOpenMessages, "app_ping": CodeInvalidAppPing, "keepalive_reply": CodeInvalidKeepalive,
	"idle_timeout": CodeInvalidIdleTimeout, "seq_mode": CodeInvalidSeqMode, "on_missing_seq": CodeInvalidOnMissingSeq,
	"resume": CodeInvalidResume, "on_sink_refusal": CodeInvalidOnSinkRefusal,
}

// CheckCheckpointEvery parses a start's checkpoint_every (a Go duration,
// MinCheckpointEvery..MaxCheckpointEvery) into milliseconds.
func CheckCheckpointEvery(v string) (int64, *apiError) {
	bad := badRequest(CodeInvalidCheckpointEvery, `checkpoint_every must be a duration from 1s to 10m, such as "30s" or "2m"`)
	if len(v) > 32 {
		return 0, bad
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinCheckpointEvery || d > MaxCheckpointEvery {
		return 0, bad
	}
	return d.Milliseconds(), nil
}

// MaxFollowRedirects bounds how many handshake redirects a session may follow.
const MaxFollowRedirects = 5

// MaxSubprotocols bounds the subprotocols a start may offer.
const MaxSubprotocols = 8

// subprotocolPattern is an RFC 6455 subprotocol: an HTTP token (RFC 7230
// tchar), at most 64 bytes here.
var subprotocolPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")

// CheckSubprotocols validates the subprotocols of a start: at most
// MaxSubprotocols tokens, each once.
func CheckSubprotocols(ps []string) *apiError {
	if len(ps) > MaxSubprotocols {
		return badRequest(CodeInvalidSubprotocols, fmt.Sprintf("subprotocols: at most %d", MaxSubprotocols))
	}
	seen := map[string]bool{}
	for i, p := range ps {
		if !subprotocolPattern.MatchString(p) {
			return badRequest(CodeInvalidSubprotocols, fmt.Sprintf("subprotocols[%d] must match %s", i, subprotocolPattern))
		}
		if seen[p] {
			return badRequest(CodeInvalidSubprotocols, fmt.Sprintf("subprotocols[%d] %q is given twice", i, p))
		}
		seen[p] = true
	}
	return nil
}

// DecodeStop checks a stop body: empty, or an empty JSON object.
func DecodeStop(body []byte) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var b struct{}
	return decodeStrict(body, &b, nil)
}

// CheckConnectionID validates a connection_id (notify.ConnectionIDPattern).
func CheckConnectionID(id string) *apiError {
	if !notify.ValidConnectionID(id) {
		return badRequest(CodeInvalidConnID, "connection_id must match "+notify.ConnectionIDPattern.String()+" and not be \".\" or \"..\"")
	}
	return nil
}

// NewConnectionID returns a random RFC 4122 version-4 UUID.
func NewConnectionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// decodeStrict decodes one JSON object into v: valid UTF-8, no duplicate
// keys at any depth, top-level keys exactly (case-sensitively) among fields,
// nothing after the object.
func decodeStrict(body []byte, v any, fields map[string]bool) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest(CodeInvalidJSON, "a JSON object body is required")
	}
	if !utf8.Valid(body) {
		return badRequest(CodeInvalidJSON, "body is not valid UTF-8")
	}
	if bytes.TrimLeft(body, " \t\r\n")[0] != '{' {
		return badRequest(CodeInvalidJSON, "body must be a JSON object")
	}
	if err := checkKeys(body, fields); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		switch {
		case errors.As(err, &typeErr):
			field := typeErr.Field
			if field == "" {
				return badRequest(CodeInvalidJSON, "body must be a JSON object")
			}
			if i := strings.IndexByte(field, '.'); i >= 0 {
				field = field[:i] // headers.<name>: the name could be anything
			}
			return badRequest(CodeInvalidType, fmt.Sprintf("field %q must be a %s", field, jsonKind(typeErr.Type.String())))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.TrimPrefix(err.Error(), "json: unknown field ")
			return badRequest(CodeUnknownField, "unknown field "+truncate(name, maxQuotedNameBytes))
		case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
			return badRequest(CodeInvalidJSON, "body is not valid JSON")
		default:
			return badRequest(CodeInvalidJSON, "body is not valid JSON")
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest(CodeInvalidJSON, "body must hold exactly one JSON object")
	}
	return nil
}

func jsonKind(goType string) string {
	switch {
	case goType == "string" || goType == "*string":
		return "string"
	case strings.HasPrefix(goType, "map["):
		return "JSON object of strings"
	case strings.HasPrefix(goType, "struct"):
		return "JSON object"
	}
	return goType
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// checkKeys walks the tokens of body and refuses a key repeated in one
// object (encoding/json would silently keep the last one, and another parser
// on the path might keep the first) and a top-level key not in fields.
func checkKeys(body []byte, fields map[string]bool) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		expect bool // in an object: the next token is a key
	}
	var stack []*frame
	const maxDepth = 16
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return badRequest(CodeInvalidJSON, "body is not valid JSON")
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, isKey := tok.(string); isKey && top != nil && top.object && top.expect {
			if top.keys[k] {
				return badRequest(CodeInvalidJSON, "duplicate key "+quoteName(k))
			}
			if len(stack) == 1 && !fields[k] {
				return badRequest(CodeUnknownField, "unknown field "+quoteName(k))
			}
			top.keys[k] = true
			top.expect = false
			continue
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= maxDepth {
					return badRequest(CodeInvalidJSON, "body is nested too deeply")
				}
				stack = append(stack, &frame{object: t == '{', keys: map[string]bool{}, expect: t == '{'})
				continue
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		}
		// A value (or a closed container) completed: an enclosing object
		// expects a key next.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expect = true
		}
	}
}
