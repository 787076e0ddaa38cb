package source

import "testing"

// A field's code is "invalid_" and the field, but for the codes clients
// knew before the pattern, which stay as they were.
func TestFieldCode(t *testing.T) {
	for field, want := range map[string]string{
		"ws_url":             "invalid_ws_url",
		"connection_id":      "invalid_connection_id",
		"keepalive_reply":    "invalid_keepalive_reply",
		"resume_query_param": "invalid_resume_query_param",
		"headers":            "invalid_header",
		"a_new_field":        "invalid_a_new_field",
	} {
		if got := FieldCode(field); got != want {
			t.Errorf("FieldCode(%q) = %q, want %q", field, got, want)
		}
		if got := (&FieldError{Field: field}).Code(); got != want {
			t.Errorf("FieldError{Field: %q}.Code() = %q, want %q", field, got, want)
		}
	}
}
