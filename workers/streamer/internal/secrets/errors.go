package secrets

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"
)

// ErrPermanent marks a resolution that retrying cannot fix: the secret is
// missing, access is denied, it cannot be decrypted, the request is
// invalid (e.g. the secret is scheduled for deletion), or the secret is
// binary. The session fails instead of reconnecting. Everything else
// (throttling, timeouts, connection errors, the service's 5xx) is
// transient: the next dial tries again.
var ErrPermanent = errors.New("permanent")

// permanentCodes are the GetSecretValue error codes that are permanent.
var permanentCodes = map[string]bool{
	"ResourceNotFoundException": true,
	"AccessDeniedException":     true,
	"DecryptionFailure":         true,
	"InvalidRequestException":   true,
	"InvalidParameterException": true,
}

// Error is a failed resolution of the secret Name. Its text names the
// secret, the AWS error code and the service's message (which never holds
// a value: Secrets Manager does not echo one), never a value.
type Error struct {
	Name      string
	Code      string // the AWS error code; "" when there was no API answer
	Reason    string // what went wrong, when not an API error
	Permanent bool
	Err       error // the cause, for errors.Is (context.DeadlineExceeded, …)
}

func (e *Error) Error() string {
	kind := "transient"
	if e.Permanent {
		kind = "permanent"
	}
	msg := fmt.Sprintf("secret %q: ", e.Name)
	switch {
	case e.Code != "":
		msg += fmt.Sprintf("GetSecretValue: %s (%s)", e.Code, kind)
		var ae smithy.APIError
		if errors.As(e.Err, &ae) && ae.ErrorMessage() != "" {
			msg += ": " + ae.ErrorMessage()
		}
	case e.Reason != "":
		msg += e.Reason + " (" + kind + ")"
	default:
		msg += fmt.Sprintf("GetSecretValue (%s): %v", kind, e.Err)
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrPermanent) true of a permanent Error.
func (e *Error) Is(target error) bool { return target == ErrPermanent && e.Permanent }

// classify maps an SDK error of GetSecretValue for name to an *Error.
func classify(name string, err error) *Error {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return &Error{Name: name, Code: ae.ErrorCode(), Permanent: permanentCodes[ae.ErrorCode()], Err: err}
	}
	return &Error{Name: name, Err: err}
}
