// Package awsconfig owns how wsfleet builds its AWS SDK configuration: the
// standard credential chain and the SDK's own endpoint variables
// (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS) so that the same binaries
// talk to AWS or to local engines; and the retry policies of its clients
// (BulkRetryer, LivenessRetryer).
package awsconfig

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Load returns the SDK config from the environment. When no region is set it
// uses us-east-1 (the local engines accept any). Retries use BulkRetryer with
// at most maxAttempts attempts (0 keeps the SDK default); every client built
// from the config gets a retryer, and so a retry budget, of its own.
func Load(ctx context.Context, maxAttempts int) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{}
	if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
		opts = append(opts, config.WithRegion("us-east-1"))
	}
	if maxAttempts > 0 {
		opts = append(opts, config.WithRetryer(func() aws.Retryer { return BulkRetryer(maxAttempts) }))
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

// BulkMaxBackoff caps one wait of BulkRetryer.
const BulkMaxBackoff = 2 * time.Second

// BulkRetryer is the SDK's standard retryer, at most maxAttempts attempts
// and waits capped at BulkMaxBackoff, with its client-side retry budget: a
// bucket of retry.DefaultRetryRateTokens (500) tokens, a retry after a
// throttle costing 5 and after another error 14, refilled by successes. Under
// throttling or timeouts the budget runs dry and the client stops retrying
// ("failed to get rate limit token, retry quota exceeded", aws-sdk-go-v2
// #1665, #3189) instead of adding load. That is right for bulk work (claims,
// checkpoints, releases, the sinks) and wrong for a worker's liveness, which
// gets LivenessRetryer on a client of its own. Each call returns a new
// retryer, so a budget is never shared between clients.
func BulkRetryer(maxAttempts int, opts ...func(*retry.StandardOptions)) aws.Retryer {
	return retry.NewStandard(append([]func(*retry.StandardOptions){func(o *retry.StandardOptions) {
		o.MaxAttempts = maxAttempts
		o.MaxBackoff = BulkMaxBackoff
	}}, opts...)...)
}

// LivenessMaxAttempts is how many attempts a liveness call makes (the first
// and 3 retries).
const LivenessMaxAttempts = 4

// LivenessRetryer is the retryer of the liveness client: the worker's
// heartbeats, its registration and leave, the death declarations it makes
// as a watcher, and the reads of worker records its trust checks and
// watches make (shared/lease/dynamostore WithLiveness). It retries the
// standard retryer's errors (throttling, 5xx, connection errors) with no
// client-side retry budget (ratelimit.None), so bulk clients draining their
// own budgets cannot starve it, up to LivenessMaxAttempts attempts, with
// jittered waits each at most LivenessMaxBackoff(callTimeout), so that all
// of them sum to at most half of callTimeout: the retries happen before the
// call's own deadline cancels it (the Keeper bounds each store call by
// lease.Config.RPCTimeout, which Config.Validate keeps, with a heartbeat
// period, inside the trust window TTL − SafetyMargin). A liveness call is
// one small write or read per worker per heartbeat period (per half period
// for a watcher's reads), so retrying it without a budget adds at most
// LivenessMaxAttempts − 1 requests per period per worker to a throttled
// table.
func LivenessRetryer(callTimeout time.Duration, opts ...func(*retry.StandardOptions)) aws.Retryer {
	return retry.NewStandard(append([]func(*retry.StandardOptions){func(o *retry.StandardOptions) {
		o.MaxAttempts = LivenessMaxAttempts
		o.MaxBackoff = LivenessMaxBackoff(callTimeout)
		o.RateLimiter = ratelimit.None
	}}, opts...)...)
}

// LivenessMaxBackoff caps one wait of LivenessRetryer(callTimeout): half of
// callTimeout shared by the LivenessMaxAttempts − 1 retries.
func LivenessMaxBackoff(callTimeout time.Duration) time.Duration {
	return callTimeout / 2 / (LivenessMaxAttempts - 1)
}
