// Package awserr owns how the AWS sinks classify a refusal: permanent
// (sending the same message again cannot fix it: the caller's fault, such as
// access denied, a KMS key, a missing queue or stream, an invalid or
// oversize message) or transient (throttling, the service's faults,
// timeouts and connection errors, which are retried).
package awserr

import (
	"errors"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// Throttling reports whether code is a throttling error code: the SDK
// retryer's list (aws/retry.DefaultThrottleErrorCodes) and KMS's, which
// SQS and Kinesis pass through for encrypted destinations.
func Throttling(code string) bool {
	if _, ok := retry.DefaultThrottleErrorCodes[code]; ok {
		return true
	}
	return code == "KMSThrottlingException"
}

// Classify returns err marked sink.Permanent when it is an API error of the
// caller's fault (smithy.FaultClient, or an HTTP 4xx other than 408 and 429)
// whose code is not a throttling one, and marked sink.Throttled when its
// code is a throttling one; any other error is returned as it is.
func Classify(err error) error {
	var ae smithy.APIError
	if err == nil || !errors.As(err, &ae) {
		return err
	}
	if Throttling(ae.ErrorCode()) {
		return sink.Throttled(err)
	}
	client := ae.ErrorFault() == smithy.FaultClient
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		code := re.HTTPStatusCode()
		client = client || (code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests)
		if code >= 500 {
			client = false
		}
	}
	if !client {
		return err
	}
	return sink.Permanent(err)
}
