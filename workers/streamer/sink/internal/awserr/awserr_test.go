package awserr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

func withStatus(err error, status int) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err,
	}}
}

func TestClassify(t *testing.T) {
	for name, c := range map[string]struct {
		err  error
		want bool
	}{
		"access denied":         {&smithy.GenericAPIError{Code: "AccessDeniedException", Fault: smithy.FaultClient}, true},
		"kms key disabled, 400": {withStatus(&smithy.GenericAPIError{Code: "KMSDisabledException"}, 400), true},
		"validation, wrapped":   {fmt.Errorf("put: %w", &smithy.GenericAPIError{Code: "ValidationException", Fault: smithy.FaultClient}), true},
		"throttling":            {&smithy.GenericAPIError{Code: "ThrottlingException", Fault: smithy.FaultClient}, false},
		"kms throttling":        {&smithy.GenericAPIError{Code: "KMSThrottlingException", Fault: smithy.FaultClient}, false},
		"429":                   {withStatus(&smithy.GenericAPIError{Code: "Whatever"}, 429), false},
		"server fault":          {withStatus(&smithy.GenericAPIError{Code: "InternalFailure", Fault: smithy.FaultServer}, 500), false},
		"timeout":               {context.DeadlineExceeded, false},
		"connection":            {errors.New("dial tcp: connection refused"), false},
	} {
		if got := sink.IsPermanent(Classify(c.err)); got != c.want {
			t.Errorf("%s: permanent %v, want %v", name, got, c.want)
		}
		if !errors.Is(Classify(c.err), c.err) {
			t.Errorf("%s: the classified error does not wrap the original", name)
		}
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil) != nil")
	}
}

// Throttling is marked so (sink.IsThrottled): it says nothing about the
// messages, so it never counts toward the batcher's repeated-failure
// bound; nothing else is.
func TestClassifyMarksThrottling(t *testing.T) {
	for name, c := range map[string]struct {
		err  error
		want bool
	}{
		"throttling":     {&smithy.GenericAPIError{Code: "ThrottlingException", Fault: smithy.FaultClient}, true},
		"kms throttling": {&smithy.GenericAPIError{Code: "KMSThrottlingException", Fault: smithy.FaultClient}, true},
		"kinesis":        {withStatus(&smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException"}, 400), true},
		"server fault":   {withStatus(&smithy.GenericAPIError{Code: "InternalFailure", Fault: smithy.FaultServer}, 500), false},
		"access denied":  {&smithy.GenericAPIError{Code: "AccessDeniedException", Fault: smithy.FaultClient}, false},
		"timeout":        {context.DeadlineExceeded, false},
	} {
		if got := sink.IsThrottled(Classify(c.err)); got != c.want {
			t.Errorf("%s: throttled %v, want %v", name, got, c.want)
		}
	}
}
