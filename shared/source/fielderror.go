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

// Code is the API error code of the refusal: "invalid_" and the field
// (headers: "invalid_header").
func (e *FieldError) Code() string {
	if e.Field == "headers" {
		return "invalid_header"
	}
	return "invalid_" + e.Field
}
