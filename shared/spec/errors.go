package spec

// Every error the spec package returns of its own: a stored spec's unknown
// field, and CheckKeys' refusals. A field's refusal is a *source.FieldError
// (shared/source).

import (
	"errors"
	"strconv"
)

// ErrUnknownField: a stored spec has a field this build does not know. The
// rollout rule (docs/worker.md, "Stored specs and rollouts") is workers
// first: a field reaches the table only from an ingest at least as new as
// every worker, so a worker meets one only when that order was broken (or
// after a rollback of the workers). It refuses to run the session rather
// than run it without the field: a new field changes what the session
// does (what it sends, what it delivers, where its credentials go), and a
// worker that ignored it would run a configuration nobody asked for. The
// session goes FAILED naming the field; a start of it once the workers
// are upgraded runs it.
var ErrUnknownField = errors.New("stored session spec has a field this worker does not know")

// A KeyError is a key CheckKeys refuses: repeated in one object, not a
// field of the type at its path, or nested too deeply. Path is the key's
// path from the top (app_ping.every, open_messages[1].text), Near the path
// of the known field an unknown key looks like a misspelling of ("": none).
type KeyError struct {
	Kind KeyErrorKind
	Path string
	Near string
}

// KeyErrorKind is what is wrong with a KeyError's key.
type KeyErrorKind int

const (
	KeyUnknown KeyErrorKind = iota
	KeyDuplicate
	KeyTooDeep
)

func (e *KeyError) Error() string {
	switch e.Kind {
	case KeyDuplicate:
		return "duplicate key " + QuoteName(e.Path)
	case KeyTooDeep:
		return "nested too deeply"
	}
	msg := "unknown field " + QuoteName(e.Path)
	if e.Near != "" {
		msg += " (did you mean " + strconv.Quote(e.Near) + "?)"
	}
	return msg
}

// A TokenError is where CheckKeys found the text is not JSON: Err is
// encoding/json's error, Offset the input offset after the last token read.
type TokenError struct {
	Err    error
	Offset int64
}

func (e *TokenError) Error() string { return e.Err.Error() }
func (e *TokenError) Unwrap() error { return e.Err }
