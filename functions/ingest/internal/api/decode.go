package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/sessionapi"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// startFields are the keys of a start body, from its type (matched
// case-sensitively: encoding/json alone would also take "WS_URL").
var startFields = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range spec.FieldNames(reflect.TypeFor[sessionapi.StartRequest]()) {
		m[k] = true
	}
	return m
}()

// DecodeStart decodes and validates a start body: the connection id (a
// generated one when the body has none) and the checked spec, whose URL the
// deployment's policy allows.
func DecodeStart(body []byte, policy URLPolicy) (sessions.Desired, *apiError) {
	var req sessionapi.StartRequest
	given, err := decodeStrict(body, &req, startFields)
	if err != nil {
		return sessions.Desired{}, err
	}
	d := sessions.Desired{ConnectionID: req.ConnectionID}
	if !given["connection_id"] {
		d.ConnectionID = NewConnectionID()
	} else if e := CheckConnectionID(req.ConnectionID); e != nil {
		return sessions.Desired{}, e
	}
	d.Spec = req.Spec
	if fe := d.Spec.Check(given); fe != nil {
		return sessions.Desired{}, badRequest(fe.Code(), fe.Error())
	}
	if e := policy.CheckWSURL(d.Spec.WSURL); e != nil {
		return sessions.Desired{}, e
	}
	if e := policy.checkSecretRefs(d.Spec); e != nil {
		return sessions.Desired{}, e
	}
	return d, nil
}

// checkSecretRefs refuses a secret reference in a header value or an open
// message whose name is not under the deployment's prefix (or any, without
// one), or whose secret the deployment does not bind to the ws_url's host
// (SecretHosts): a credential goes only where it may be presented, whoever
// starts the session. The syntax and the number of references were checked
// with the spec (spec.Check); the message never quotes the value.
func (p URLPolicy) checkSecretRefs(s spec.Spec) *apiError {
	target, err := url.Parse(s.WSURL)
	if err != nil { // CheckWSURL parsed it: unreachable
		return invalidField("ws_url", "ws_url is not a valid URL")
	}
	check := func(v string) error {
		if err := secretref.Validate(v, p.SecretPrefix); err != nil {
			return err
		}
		return p.SecretHosts.Check(v, target)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		if err := check(s.Headers[name]); err != nil {
			return invalidField("headers", "header "+spec.QuoteName(name)+" value: "+err.Error())
		}
	}
	for i, m := range s.OpenMessages {
		if m.Text == nil {
			continue
		}
		if err := check(*m.Text); err != nil {
			return invalidField("open_messages", fmt.Sprintf("open_messages[%d].text: %v", i, err))
		}
	}
	return nil
}

// DecodeStop checks a stop body: empty, or an empty JSON object.
func DecodeStop(body []byte) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var b struct{}
	_, err := decodeStrict(body, &b, nil)
	return err
}

// CheckConnectionID validates a connection_id (notify.ConnectionIDPattern).
func CheckConnectionID(id string) *apiError {
	if !notify.ValidConnectionID(id) {
		return invalidField("connection_id", "connection_id must match "+notify.ConnectionIDPattern.String()+" and not be \".\" or \"..\"")
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
// keys at any depth, keys at any depth exactly (case-sensitively) the
// fields of v's type at their path (checkKeys), nothing after the object.
// fields are the top-level keys, which a type error is reported on. It
// returns the top-level keys given a value other than null, from the key
// walk: the body is read twice, by that walk and by the decode, never a
// third time.
func decodeStrict(body []byte, v any, fields map[string]bool) (spec.Keys, *apiError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest(CodeInvalidJSON, "a JSON object body is required")
	}
	if !utf8.Valid(body) {
		return nil, badRequest(CodeInvalidJSON, "body is not valid UTF-8")
	}
	if bytes.TrimLeft(body, " \t\r\n")[0] != '{' {
		return nil, badRequest(CodeInvalidJSON, "body must be a JSON object")
	}
	given, kerr := checkKeys(body, reflect.TypeOf(v))
	if kerr != nil {
		return nil, kerr
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typeErr):
			field := typeErr.Field
			if field == "" {
				return nil, badRequest(CodeInvalidJSON, "body must be a JSON object")
			}
			// The path runs through embedded structs (Spec, Config) to the
			// top-level key, then through the keys of the objects below it
			// (standby.enabled): a map's path stops at the map (headers), an
			// array's elements carry no index (open_messages.text).
			parts := strings.Split(field, ".")
			for i, part := range parts {
				if fields[part] {
					field = strings.Join(parts[i:], ".")
					break
				}
			}
			return nil, badRequest(CodeInvalidType, fmt.Sprintf("field %q must be a %s", truncate(field, 64), jsonKind(typeErr.Type.String())))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.TrimPrefix(err.Error(), "json: unknown field ")
			return nil, badRequest(CodeUnknownField, "unknown field "+truncate(name, 64))
		default:
			return nil, badRequest(CodeInvalidJSON, invalidJSON(err, dec.InputOffset()))
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest(CodeInvalidJSON, "body must hold exactly one JSON object")
	}
	return given, nil
}

func jsonKind(goType string) string {
	switch {
	case goType == "string" || goType == "*string":
		return "string"
	case strings.HasPrefix(goType, "map["):
		return "JSON object of strings"
	case strings.HasPrefix(goType, "struct"), strings.HasPrefix(goType, "spec."), strings.HasPrefix(goType, "source."):
		return "JSON object"
	case goType == "[]string":
		return "JSON array of strings"
	case strings.HasPrefix(goType, "[]"):
		return "JSON array"
	case goType == "int" || goType == "int64" || goType == "*int64":
		return "number"
	case goType == "bool" || goType == "*bool":
		return "boolean"
	}
	return goType
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// checkKeys refuses a key repeated in one object, a key not a field of
// the type t decodes into at its path (named with the field it may have
// meant), and nesting too deep (spec.CheckKeys), and returns the top-level
// keys given a value other than null.
func checkKeys(body []byte, t reflect.Type) (spec.Keys, *apiError) {
	given, err := spec.CheckKeys(body, t)
	var ke *spec.KeyError
	var te *spec.TokenError
	switch {
	case err == nil:
		return given, nil
	case errors.As(err, &ke) && ke.Kind == spec.KeyUnknown:
		return nil, badRequest(CodeUnknownField, ke.Error())
	case errors.As(err, &ke) && ke.Kind == spec.KeyTooDeep:
		return nil, badRequest(CodeInvalidJSON, "body is nested too deeply")
	case errors.As(err, &te):
		return nil, badRequest(CodeInvalidJSON, invalidJSON(te.Err, te.Offset))
	}
	return nil, badRequest(CodeInvalidJSON, err.Error())
}

// invalidJSON says where a body stops being JSON: the byte offset of the
// syntax error, or where the body ended early.
func invalidJSON(err error, at int64) string {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("body is not valid JSON (at byte %d: %s)", se.Offset, se.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("body is not valid JSON (it ends early, after byte %d)", at)
	}
	return fmt.Sprintf("body is not valid JSON (at byte %d)", at)
}
