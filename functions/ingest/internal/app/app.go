// Package app owns assembling the ingest handler from a validated config and
// AWS SDK configuration: the DynamoDB-backed sessions store, the SQS
// publisher, the logger and the metrics output. Both the Lambda main and the
// local front build the handler here, so they run the same code.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/api"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
)

// Build returns the handler for cfg on the AWS clients of awsCfg. Logs and
// EMF lines go to out (stdout in Lambda).
func Build(cfg config.Config, awsCfg aws.Config, log zerolog.Logger, out io.Writer) (*api.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	store := sessions.New(dynamodb.NewFromConfig(awsCfg), cfg.TableName)
	queue := sqsnotify.New(sqs.NewFromConfig(awsCfg), cfg.QueueURL, 0)
	h, err := api.New(cfg, api.Deps{Store: store, Nonces: store, Notifier: queue, Log: log, Metrics: out})
	if err != nil {
		return nil, fmt.Errorf("build ingest handler: %w", err)
	}
	return h, nil
}

// SecretGetter is the part of the Secrets Manager client ResolveSecret calls.
type SecretGetter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// ResolveSecret fills cfg.SigningSecret from Secrets Manager when only
// SigningSecretARN is set. It fails closed: a named secret that cannot be
// read stops the function rather than serving unsigned requests.
func ResolveSecret(ctx context.Context, cfg config.Config, sm SecretGetter) (config.Config, error) {
	if cfg.SigningSecret != "" || cfg.SigningSecretARN == "" {
		return cfg, nil
	}
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(cfg.SigningSecretARN)})
	if err != nil {
		return cfg, fmt.Errorf("read signing secret %s: %w", cfg.SigningSecretARN, err)
	}
	secret := strings.TrimSpace(aws.ToString(out.SecretString))
	if secret == "" {
		return cfg, errors.New("read signing secret " + cfg.SigningSecretARN + ": empty or binary secret")
	}
	cfg.SigningSecret = secret
	return cfg, nil
}

// NewSecretsManager returns the Secrets Manager client for ResolveSecret.
func NewSecretsManager(awsCfg aws.Config) SecretGetter { return secretsmanager.NewFromConfig(awsCfg) }
