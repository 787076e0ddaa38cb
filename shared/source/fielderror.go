package source

// FieldError is a configuration a start must refuse: Field is the top-level
// body field at fault (open_messages, app_ping, …), Message the whole reason
// (it names the field and never quotes a header value, an open message or a
// URL). It is the one refusal type of a start's checks: the source
// protocol's here, the session's in shared/spec (spec.FieldError names it).
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Message }

// Code is the API error code of the refusal (FieldCode of its field).
func (e *FieldError) Code() string { return FieldCode(e.Field) }

// FieldCode is the API error code of a refusal of the start body's
// top-level field: "invalid_" and the field, so a new field needs no
// hand-kept code, except for the fields in codeExceptions. It is the one
// definition of a field's code: ingest's refusals, its tests and fuzzers,
// and the documentation test all derive the code here.
func FieldCode(field string) string {
	if code, ok := codeExceptions[field]; ok {
		return code
	}
	return "invalid_" + field
}

// codeExceptions are the fields whose code predates the pattern. Clients
// match on these strings: keep them, and add none (a new field takes the
// pattern).
var codeExceptions = map[string]string{
	"headers": "invalid_header", // one header at fault, named in the message
}
