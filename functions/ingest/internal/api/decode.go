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
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/sessionapi"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/suggest"
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
	if err := decodeStrict(body, &req, startFields); err != nil {
		return sessions.Desired{}, err
	}
	given, err := spec.GivenKeys(body)
	if err != nil { // decodeStrict read one JSON object: unreachable
		return sessions.Desired{}, badRequest(CodeInvalidJSON, "body must be a JSON object")
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
		return badRequest(CodeInvalidWSURL, "ws_url is not a valid URL")
	}
	check := func(v string) error {
		if err := secretref.Validate(v, p.SecretPrefix); err != nil {
			return err
		}
		return p.SecretHosts.Check(v, target)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		if err := check(s.Headers[name]); err != nil {
			return badRequest(CodeInvalidHeader, "header "+spec.QuoteName(name)+" value: "+err.Error())
		}
	}
	for i, m := range s.OpenMessages {
		if m.Text == nil {
			continue
		}
		if err := check(*m.Text); err != nil {
			return badRequest(CodeInvalidOpenMessages, fmt.Sprintf("open_messages[%d].text: %v", i, err))
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
		switch {
		case errors.As(err, &typeErr):
			field := typeErr.Field
			if field == "" {
				return badRequest(CodeInvalidJSON, "body must be a JSON object")
			}
			// The path runs through embedded structs (Spec, Config) to the
			// key; below the top-level key it may be anything (headers.<name>).
			for _, part := range strings.Split(field, ".") {
				if fields[part] {
					field = part
					break
				}
			}
			if i := strings.IndexByte(field, '.'); i >= 0 {
				field = field[:i]
			}
			return badRequest(CodeInvalidType, fmt.Sprintf("field %q must be a %s", field, jsonKind(typeErr.Type.String())))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.TrimPrefix(err.Error(), "json: unknown field ")
			return badRequest(CodeUnknownField, "unknown field "+truncate(name, 64))
		default:
			return badRequest(CodeInvalidJSON, invalidJSON(err, dec.InputOffset()))
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
	case strings.HasPrefix(goType, "struct"), strings.HasPrefix(goType, "spec."), strings.HasPrefix(goType, "source."):
		return "JSON object"
	case goType == "[]string":
		return "JSON array of strings"
	case strings.HasPrefix(goType, "[]"):
		return "JSON array"
	case goType == "int":
		return "number"
	case goType == "bool":
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
			return badRequest(CodeInvalidJSON, invalidJSON(err, dec.InputOffset()))
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if k, isKey := tok.(string); isKey && top != nil && top.object && top.expect {
			if top.keys[k] {
				return badRequest(CodeInvalidJSON, "duplicate key "+spec.QuoteName(k))
			}
			if len(stack) == 1 && !fields[k] {
				return badRequest(CodeUnknownField, unknownField(k, fields))
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

// unknownField is the refusal of a top-level key not in fields, naming the
// nearest known one when the key looks like a misspelling of it.
func unknownField(k string, fields map[string]bool) string {
	msg := "unknown field " + spec.QuoteName(k)
	if near := suggest.Nearest(k, slices.Collect(maps.Keys(fields)), 0); near != "" {
		msg += " (did you mean " + strconv.Quote(near) + "?)"
	}
	return msg
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
