package api

import (
	"net/http"

	"github.com/wsfleet/wsfleet/shared/source"
)

// Error codes of the {"error": {"code", "message"}} body that name no
// field. A refusal of a start body's field carries the field's code
// (invalidField: source.FieldCode), kept in no list here.
const (
	CodeInvalidContentType = "invalid_content_type"
	CodeBodyTooLarge       = "body_too_large"
	CodeInvalidJSON        = "invalid_json"
	CodeUnknownField       = "unknown_field"
	CodeInvalidType        = "invalid_type"
	CodeHostNotAllowed     = "host_not_allowed"
	CodeAddressNotAllowed  = "address_not_allowed"
	CodeInvalidQuery       = "invalid_query"
	CodeInvalidBody        = "invalid_body"

	CodeMissingSignature = "missing_signature"
	CodeStaleTimestamp   = "stale_timestamp"
	CodeBadSignature     = "bad_signature"
	CodeBadNonce         = "bad_nonce"
	CodeOutcomeUnknown   = "outcome_unknown"
	CodeReplayed         = "replayed_request"

	CodeNotFound         = "not_found"
	CodeRouteNotFound    = "route_not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeUnavailable      = "unavailable"
	CodeRejected         = "rejected"
	CodeInternal         = "internal"
)

// apiError is a refused request: the status, the code and a message safe to
// show (it never quotes a header value or a URL).
type apiError struct {
	status    int
	code      string
	message   string
	retryable bool
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func badRequest(code, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: msg}
}

// invalidField is a refusal of the start body's top-level field: a 400
// with the field's code, "invalid_" and the field (source.FieldCode).
func invalidField(field, msg string) *apiError {
	return badRequest(source.FieldCode(field), msg)
}

func unauthorized(code, msg string) *apiError {
	return &apiError{status: http.StatusUnauthorized, code: code, message: msg}
}

// errorBody is the JSON of every error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable,omitempty"`
}
