package dynamostore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// TestEdgeMapsThrottlingToErrThrottled: DynamoDB's throttling answers and
// the SDK's refusal to retry for lack of retry tokens are lease.ErrThrottled;
// other errors are not.
func TestEdgeMapsThrottlingToErrThrottled(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&smithy.GenericAPIError{Code: "ThrottlingException"}, true},
		{&types.ProvisionedThroughputExceededException{}, true},
		{&types.RequestLimitExceeded{}, true},
		{fmt.Errorf("op: %w", errors.Join(&smithy.GenericAPIError{Code: "InternalServerError"}, fmt.Errorf("failed to get rate limit token, %w", ratelimit.QuotaExceededError{}))), true},
		{&types.ConditionalCheckFailedException{}, false},
		{&smithy.GenericAPIError{Code: "ValidationException"}, false},
		{errors.New("connection reset"), false},
	} {
		err := edge(c.err)
		if got := errors.Is(err, lease.ErrThrottled); got != c.want {
			t.Errorf("edge(%v): throttled %v, want %v", c.err, got, c.want)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("edge(%v) lost the SDK error: %v", c.err, err)
		}
	}
}
