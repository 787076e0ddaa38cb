// Package secretref owns secret references: the text {{secret:NAME}} or
// {{secret:NAME#key}} that a session's header value or open-message text
// carries in place of a credential, so that the stored session (DynamoDB,
// the API's answers, logs) holds the reference and never the value. It
// finds references in a string (Refs), checks them (Validate: the syntax,
// and that NAME is under the deployment's secret prefix), and replaces them
// with their values (Expand, ExpandWithin: within a size bound, sized
// before anything is built) given a lookup of a secret's SecretString. It
// also bounds how many references a spec may hold (MaxRefs) and owns where
// a secret may be sent (Bindings, bindings.go: the deployment's
// WSFLEET_SECRET_HOSTS, one definition for ingest and the worker). It is
// pure: no AWS SDK, no I/O; the worker's Secrets Manager resolver
// (workers/streamer/internal/secrets) is the lookup.
//
// NAME is a Secrets Manager secret name: 1..512 characters of letters,
// digits and /_+=.@- (the set CreateSecret allows). An ARN is not accepted
// (':' is outside the set), so the prefix check on the name is the whole
// check. key names a top-level member of the secret's JSON SecretString:
// 1..128 letters, digits and _-. ; its value must be a JSON string.
//
// Disjoint from the source placeholders. shared/source's open-message
// placeholders are the four exact strings {{resume_from}}, {{last_seq}},
// {{connection_id}} and {{generation}}: none starts with "{{secret:" and
// none has a ':', so no text is both a placeholder and a reference, and
// source.Render leaves references untouched. A reference cannot hold a
// placeholder either ('{' is not a name or key character), so
// "{{secret:{{generation}}}}" is a malformed reference, refused. The worker
// renders the placeholders first and expands references last, so a secret
// value is never templated (a value holding "{{last_seq}}" is sent as
// written). Today source.checkTemplate refuses every {{…}} other than its
// four; accepting references there is the integration step.
//
// Errors name the problem and where it is (the reference's ordinal and
// byte offset), never the text around it nor the malformed reference
// itself: the same string may hold a credential pasted by mistake.
package secretref

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The reference syntax.
const (
	Open       = "{{secret:"
	Close      = "}}"
	KeySep     = '#'
	MaxNameLen = 512 // Secrets Manager's limit on a secret name
	MaxKeyLen  = 128
)

// Ref is one well-formed reference: the secret's Name and, when the
// reference has "#key", the JSON Key whose value it stands for ("" = the
// whole SecretString).
type Ref struct {
	Name string
	Key  string
}

// String is the reference as written: {{secret:NAME}} or {{secret:NAME#key}}.
func (r Ref) String() string {
	if r.Key == "" {
		return Open + r.Name + Close
	}
	return Open + r.Name + string(KeySep) + r.Key + Close
}

// Error is a reference that is malformed, not allowed, or whose value could
// not be had. N is the reference's ordinal in the string (1 = the first
// "{{secret:"), Offset its byte offset. Err, when set, is the lookup's
// error (Expand), which Unwrap returns.
type Error struct {
	N      int
	Offset int
	Reason string
	Err    error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("secret reference %d (at byte %d): ", e.N, e.Offset)
	switch {
	case e.Err == nil:
		return msg + e.Reason
	case e.Reason == "":
		return msg + e.Err.Error()
	default:
		return msg + e.Reason + ": " + e.Err.Error()
	}
}

func (e *Error) Unwrap() error { return e.Err }

// Contains reports whether s has the opening of a reference, well-formed or
// not: the cheap test a caller makes before Validate or Expand.
func Contains(s string) bool { return strings.Contains(s, Open) }

// span is one "{{secret:" occurrence: where it starts and ends (end is past
// the closing "}}"), its ordinal, and either its Ref or why it is malformed.
type span struct {
	n, start, end int
	ref           Ref
	bad           string
}

func nameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("/_+=.@-", c) >= 0
}

func keyChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.'
}

// scan finds every "{{secret:" in s in order. A malformed one ends where
// its scan stopped, so the next search starts after its opening and a
// later well-formed reference is still found.
func scan(s string) []span {
	var out []span
	for at := 0; ; {
		i := strings.Index(s[at:], Open)
		if i < 0 {
			return out
		}
		sp := span{n: len(out) + 1, start: at + i}
		p := sp.start + len(Open)
		j := p
		for j < len(s) && nameChar(s[j]) {
			j++
		}
		sp.ref.Name = s[p:j]
		switch {
		case j == p:
			sp.bad = "empty secret name or a character outside letters, digits and /_+=.@-"
		case j-p > MaxNameLen:
			sp.bad = fmt.Sprintf("secret name longer than %d characters", MaxNameLen)
		}
		if sp.bad == "" && j < len(s) && s[j] == KeySep {
			k := j + 1
			j = k
			for j < len(s) && keyChar(s[j]) {
				j++
			}
			sp.ref.Key = s[k:j]
			switch {
			case j == k:
				sp.bad = "empty JSON key after '#' or a character outside letters, digits and _-."
			case j-k > MaxKeyLen:
				sp.bad = fmt.Sprintf("JSON key longer than %d characters", MaxKeyLen)
			}
		}
		if sp.bad == "" && !strings.HasPrefix(s[j:], Close) {
			sp.bad = "not closed by }} right after the name (or #key): the name may hold a character outside letters, digits and /_+=.@-"
		}
		if sp.bad == "" {
			j += len(Close)
			sp.end = j
		} else {
			sp.ref = Ref{}
			sp.end = sp.start + len(Open)
		}
		out = append(out, sp)
		at = sp.end
	}
}

// At reports whether s starts with a well-formed reference, and its length
// (through the closing "}}"): what a template checker skips.
func At(s string) (ref Ref, n int, ok bool) {
	if !strings.HasPrefix(s, Open) {
		return Ref{}, 0, false
	}
	sps := scan(s)
	if len(sps) == 0 || sps[0].start != 0 || sps[0].bad != "" {
		return Ref{}, 0, false
	}
	return sps[0].ref, sps[0].end, true
}

// Refs is the well-formed references in s, in order, repeats included. A
// malformed one is skipped: Validate refuses it.
func Refs(s string) []Ref {
	var out []Ref
	for _, sp := range scan(s) {
		if sp.bad == "" {
			out = append(out, sp.ref)
		}
	}
	return out
}

// CheckPrefix checks a deployment's secret prefix: "" (references not
// allowed), or name characters ending in '/', so that the prefix is a
// folder ("wsfleet/prod" would admit "wsfleet/production-db").
func CheckPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) >= MaxNameLen {
		return fmt.Errorf("secret prefix longer than %d characters", MaxNameLen-1)
	}
	for i := 0; i < len(prefix); i++ {
		if !nameChar(prefix[i]) {
			return fmt.Errorf("secret prefix %q has a character outside letters, digits and /_+=.@-", prefix)
		}
	}
	if !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("secret prefix %q does not end in '/'", prefix)
	}
	return nil
}

// Validate refuses the first malformed reference in s, and any reference
// when prefix is "" (the deployment has no secret prefix, so it allows
// none) or whose name is not under prefix. A string without "{{secret:" is
// valid whatever the prefix.
func Validate(s, prefix string) error {
	for _, sp := range scan(s) {
		switch {
		case sp.bad != "":
			return &Error{N: sp.n, Offset: sp.start, Reason: sp.bad}
		case prefix == "":
			return &Error{N: sp.n, Offset: sp.start, Reason: "secret references are not allowed: this deployment has no secret prefix configured"}
		case len(sp.ref.Name) <= len(prefix) || !strings.HasPrefix(sp.ref.Name, prefix):
			return &Error{N: sp.n, Offset: sp.start, Reason: fmt.Sprintf("the secret name is not under this deployment's secret prefix %q", prefix)}
		}
	}
	return nil
}

// MaxRefs bounds the secret references of one session spec, its header
// values and open messages together (repeats count): each one costs a
// lookup and up to a whole secret (Secrets Manager's SecretString is at
// most 64 KiB) in every dial's memory.
const MaxRefs = 16

// ErrTooLarge marks an expansion past its bound (ExpandWithin): the *Error
// wraps it and names the reference at which the bound was passed.
var ErrTooLarge = errors.New("the expanded text is too large")

// Count is the number of "{{secret:" openings in s, well-formed or not:
// what MaxRefs bounds.
func Count(s string) int { return strings.Count(s, Open) }

// Expand is ExpandWithin without a bound on the expanded size.
func Expand(s string, lookup func(Ref) (string, error)) (string, error) {
	return ExpandWithin(s, math.MaxInt, lookup)
}

// ExpandWithin returns s with each reference replaced by its value. lookup
// returns the whole SecretString of r.Name (r.Key is for Expand: a
// reference with a key stands for that top-level member of the secret's
// JSON object, which must be a string). lookup is called once per distinct
// name, so every reference to one secret in s sees the same version. A
// malformed reference, a lookup error, a missing key, a non-string member,
// or a value that itself holds "{{secret:" (references do not nest) is an
// *Error that names the reference's ordinal, the secret and the key, never
// a value. Expand does not check the prefix: Validate did, at ingest.
//
// The result is at most max bytes: the size is summed from the values
// before anything is built, so an expansion past max (many references to a
// large secret) allocates nothing of its result and is an *Error wrapping
// ErrTooLarge that names the reference at which the sum passed max.
func ExpandWithin(s string, max int, lookup func(Ref) (string, error)) (string, error) {
	spans := scan(s)
	if len(spans) == 0 {
		return s, nil
	}
	for _, sp := range spans {
		if sp.bad != "" {
			return "", &Error{N: sp.n, Offset: sp.start, Reason: sp.bad}
		}
	}
	type got struct {
		val    string
		obj    map[string]json.RawMessage
		parsed bool
		keys   map[string]string // the #key values decoded so far
	}
	secrets := map[string]*got{}
	vals := make([]string, len(spans))
	size := len(s)
	for i, sp := range spans {
		fail := func(format string, args ...any) error {
			return &Error{N: sp.n, Offset: sp.start, Reason: fmt.Sprintf(format, args...)}
		}
		g := secrets[sp.ref.Name]
		if g == nil {
			v, err := lookup(sp.ref)
			if err != nil {
				// The worker's resolver names the secret itself; a
				// Provider's error may not.
				reason := ""
				if q := strconv.Quote(sp.ref.Name); !strings.Contains(err.Error(), q) {
					reason = "secret " + q
				}
				return "", &Error{N: sp.n, Offset: sp.start, Reason: reason, Err: err}
			}
			g = &got{val: v}
			secrets[sp.ref.Name] = g
		}
		val := g.val
		if sp.ref.Key != "" {
			if !g.parsed {
				g.parsed = true
				// json's error text may quote part of the value: it is dropped.
				if json.Unmarshal([]byte(g.val), &g.obj) != nil {
					g.obj = nil
				}
			}
			if g.obj == nil {
				return "", fail("secret %q: its value is not a JSON object, so it has no key %q", sp.ref.Name, sp.ref.Key)
			}
			str, ok := g.keys[sp.ref.Key]
			if !ok {
				raw, ok := g.obj[sp.ref.Key]
				if !ok {
					return "", fail("secret %q has no JSON key %q", sp.ref.Name, sp.ref.Key)
				}
				// A member that is not a JSON string (null included:
				// Unmarshal would leave val as it was, the whole secret) is
				// refused.
				if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '"' || json.Unmarshal(t, &str) != nil {
					return "", fail("secret %q: JSON key %q is not a string", sp.ref.Name, sp.ref.Key)
				}
				if g.keys == nil {
					g.keys = map[string]string{}
				}
				g.keys[sp.ref.Key] = str // decoded once: repeats share it
			}
			val = str
		}
		if strings.Contains(val, Open) {
			return "", fail("secret %q: its value holds a secret reference, and references do not nest", sp.ref.Name)
		}
		size += len(val) - (sp.end - sp.start)
		if size > max {
			return "", &Error{N: sp.n, Offset: sp.start, Reason: fmt.Sprintf("the text expands to more than %d bytes", max), Err: ErrTooLarge}
		}
		vals[i] = val
	}
	var b strings.Builder
	b.Grow(size)
	last := 0
	for i, sp := range spans {
		b.WriteString(s[last:sp.start])
		b.WriteString(vals[i])
		last = sp.end
	}
	b.WriteString(s[last:])
	// The text around the references holds no "{{secret:" (each one was a
	// reference), nor does any value; a value joined to its neighbours
	// still can ("{{" before a value starting "secret:").
	if out := b.String(); !strings.Contains(out, Open) {
		return out, nil
	}
	return "", errors.New("secret references: a value joined to the text around it forms \"{{secret:\", and references do not nest")
}
