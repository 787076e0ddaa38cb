package source

// Open messages' placeholders: which there are, their checks, and their
// rendering.

import (
	"strconv"
	"strings"

	"github.com/wsfleet/wsfleet/shared/secretref"
)

var placeholders = []string{PhResumeFrom, PhLastSeq, PhConnectionID, PhGeneration}

// checkTemplate refuses an unknown placeholder, and the seq placeholders
// under seq_mode none (the worker's own numbering means nothing to the
// source).
func checkTemplate(field, where, s string, none bool) *FieldError {
	rest := s
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			return nil
		}
		rest = rest[i:]
		if strings.HasPrefix(rest, secretref.Open) {
			// A secret reference (shared/secretref): its syntax is checked
			// here, whether this deployment allows it is ingest's check.
			_, n, ok := secretref.At(rest)
			if !ok {
				return bad(field, "%s: a malformed secret reference ({{secret:NAME}} or {{secret:NAME#key}})", where)
			}
			rest = rest[n:]
			continue
		}
		known := ""
		for _, p := range placeholders {
			if strings.HasPrefix(rest, p) {
				known = p
				break
			}
		}
		if known == "" {
			j := strings.Index(rest, "}}")
			name := rest
			if j >= 0 {
				name = rest[:j+2]
			}
			if len(name) > 40 {
				name = name[:40] + "…"
			}
			return bad(field, "%s: unknown placeholder %q (known: %s)", where, name, strings.Join(placeholders, ", "))
		}
		if none && (known == PhResumeFrom || known == PhLastSeq) {
			return bad(field, `%s: %s needs seq_mode "field" (under "none" the source has no seq to resume from)`, where, known)
		}
		rest = rest[len(known):]
	}
}

// Vars are the values of the placeholders. LastSeq < 0: nothing delivered
// yet, and {{last_seq}} and {{resume_from}} render as empty text.
type Vars struct {
	LastSeq      int64
	ResumeLast   bool // resume.value "last": {{resume_from}} is last_seq itself
	ConnectionID string
	Generation   int64
}

// Render replaces the placeholders in s (validated) with v.
func Render(s string, v Vars) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	last, from := "", ""
	if v.LastSeq >= 0 {
		last = strconv.FormatInt(v.LastSeq, 10)
		from = strconv.FormatInt(v.LastSeq+1, 10)
		if v.ResumeLast {
			from = last
		}
	}
	return strings.NewReplacer(PhResumeFrom, from, PhLastSeq, last, PhConnectionID, v.ConnectionID,
		PhGeneration, strconv.FormatInt(v.Generation, 10)).Replace(s)
}
