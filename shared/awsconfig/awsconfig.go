// Package awsconfig owns how wsfleet builds its AWS SDK configuration: the
// standard credential chain and the SDK's own endpoint variables
// (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS) so that the same binaries
// talk to AWS or to local engines.
package awsconfig

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Load returns the SDK config from the environment. When no region is set it
// uses us-east-1 (the local engines accept any). Retries use the standard
// retryer with at most maxAttempts attempts (0 keeps the SDK default).
func Load(ctx context.Context, maxAttempts int) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion("us-east-1"))
	}
	if maxAttempts > 0 {
		opts = append(opts, config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = maxAttempts
				o.MaxBackoff = 2 * time.Second
			})
		}))
	}
	opts = append(opts, config.WithHTTPClient(HTTPClient()))
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	return cfg, nil
}

// MaxIdleConnsPerHost is how many idle connections to one endpoint the SDK's
// HTTP client keeps. The SDK's default (10) is below what a worker has in
// flight (up to WSFLEET_MAX_CONCURRENT_RENEWS renewals, claims, a hand-off
// of every session at once): each request beyond it opens a connection (a
// TLS handshake against AWS) that is closed again as soon as it is idle.
// Measured on the local stack (bin/bench -mode quick -only handoff, 3 runs
// each): handing 100 sessions off, p99 330 / 329 / 341 ms with 10, 292 /
// 310 / 293 ms with 256.
const MaxIdleConnsPerHost = 256

// HTTPClient is the SDK's buildable client with the idle pool sized for a
// worker's concurrency (see MaxIdleConnsPerHost).
func HTTPClient() *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConnsPerHost = MaxIdleConnsPerHost
		tr.MaxIdleConns = 2 * MaxIdleConnsPerHost
	})
}
