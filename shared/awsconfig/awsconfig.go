// Package awsconfig owns how wsfleet builds its AWS SDK configuration: the
// standard credential chain and the SDK's own endpoint variables
// (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS) so that the same binaries
// talk to AWS or to local engines.
package awsconfig

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
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
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	return cfg, nil
}
