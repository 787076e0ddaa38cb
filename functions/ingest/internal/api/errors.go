package api

import "net/http"

// Error codes of the {"error": {"code", "message"}} body.
const (
	CodeInvalidContentType     = "invalid_content_type"
	CodeBodyTooLarge           = "body_too_large"
	CodeInvalidJSON            = "invalid_json"
	CodeUnknownField           = "unknown_field"
	CodeInvalidType            = "invalid_type"
	CodeInvalidConnID          = "invalid_connection_id"
	CodeInvalidWSURL           = "invalid_ws_url"
	CodeHostNotAllowed         = "host_not_allowed"
	CodeAddressNotAllowed      = "address_not_allowed"
	CodeInvalidHeader          = "invalid_header"
	CodeInvalidSeqField        = "invalid_seq_field"
	CodeInvalidResumeParam     = "invalid_resume_query_param"
	CodeInvalidSubprotocols    = "invalid_subprotocols"
	CodeInvalidFollowRedirects = "invalid_follow_redirects"
	CodeInvalidCheckpointEvery = "invalid_checkpoint_every"
	CodeInvalidSeqPath         = "invalid_seq_path"
	CodeInvalidSeqMode         = "invalid_seq_mode"
	CodeInvalidOnMissingSeq    = "invalid_on_missing_seq"
	CodeInvalidOnSinkRefusal   = "invalid_on_sink_refusal"
	CodeInvalidResume          = "invalid_resume"
	CodeInvalidOpenMessages    = "invalid_open_messages"
	CodeInvalidAppPing         = "invalid_app_ping"
	CodeInvalidKeepalive       = "invalid_keepalive_reply"
	CodeInvalidIdleTimeout     = "invalid_idle_timeout"
	CodeInvalidMaxConnAge      = "invalid_max_connection_age"
	CodeInvalidReconnectOn     = "invalid_reconnect_on"
	CodeInvalidSwitchTimeout   = "invalid_switch_timeout"
	CodeInvalidStandby         = "invalid_standby"
	CodeInvalidQuery           = "invalid_query"
	CodeInvalidBody            = "invalid_body"

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
