package dynamostore

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/smithy-go"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// throttleCodes are the error codes DynamoDB answers a request over its
// throughput with (Developer Guide, "Error handling with DynamoDB":
// ProvisionedThroughputExceededException, ThrottlingException,
// RequestLimitExceeded).
var throttleCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"ThrottlingException":                    true,
	"RequestLimitExceeded":                   true,
}

// edge maps an SDK error to the lease package's typed errors: a throttled
// request (by DynamoDB, or by the client's own retry budget, which refuses
// a retry without calling DynamoDB) is lease.ErrThrottled, the SDK error
// kept in the chain.
func edge(err error) error {
	if throttled(err) {
		return fmt.Errorf("%w: %w", lease.ErrThrottled, err)
	}
	return err
}

func throttled(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) && throttleCodes[ae.ErrorCode()] {
		return true
	}
	var quota ratelimit.QuotaExceededError
	return errors.As(err, &quota)
}
