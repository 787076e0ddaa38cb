package sessions

import (
	"errors"
	"fmt"
	"net"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The SDK's errors are mapped here, at the edge, to the store's typed
// errors; no SDK type leaves this package.

// retryableRefusals are the 4xx error codes DynamoDB answers for a request
// it could take later: throughput and request-rate limits, a transaction
// conflict (Developer Guide, "Error handling with DynamoDB": these are the
// ones marked "OK to retry? Yes"). Every other 4xx is the request's own
// fault: ErrRejected.
var retryableRefusals = map[string]bool{
	"ThrottlingException":                    true,
	"ProvisionedThroughputExceededException": true,
	"RequestLimitExceeded":                   true,
	"LimitExceededException":                 true,
	"TransactionConflictException":           true,
	"TransactionInProgressException":         true,
}

// refusal classifies a 4xx answer: ok is false for anything else. retry
// says whether the same request may succeed later.
func refusal(err error) (retry, ok bool) {
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() < 400 || re.HTTPStatusCode() >= 500 {
		return false, false
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return retryableRefusals[ae.ErrorCode()], true
	}
	return true, true
}

// writeFailed wraps the error of a write: ErrRejected when DynamoDB refused
// the request for what it is; ErrUnavailable when the request surely was
// not applied and may succeed later (a throughput refusal, or no connection
// could be opened); ErrOutcomeUnknown otherwise (sent, and the answer lost
// or a 5xx).
func writeFailed(op, id string, err error) error {
	if retry, ok := refusal(err); ok {
		if !retry {
			return fmt.Errorf("%w: %s %s: %v", ErrRejected, op, id, err)
		}
		return unavailable(op, id, err)
	}
	var ne *net.OpError
	if errors.As(err, &ne) && ne.Op == "dial" {
		return unavailable(op, id, err)
	}
	return fmt.Errorf("%w: %s %s: %v", ErrOutcomeUnknown, op, id, err)
}

// readFailed wraps the error of a read: ErrRejected for a refusal no retry
// can fix, ErrUnavailable otherwise (a read changes nothing).
func readFailed(op, id string, err error) error {
	if retry, ok := refusal(err); ok && !retry {
		return fmt.Errorf("%w: %s %s: %v", ErrRejected, op, id, err)
	}
	return unavailable(op, id, err)
}

// unavailable wraps an SDK error as ErrUnavailable, keeping its text but not
// its type.
func unavailable(op, id string, err error) error {
	return fmt.Errorf("%w: %s %s: %v", ErrUnavailable, op, id, err)
}
