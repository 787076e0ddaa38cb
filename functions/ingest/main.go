// Command ingest is the wsfleet ingest Lambda (provided.al2023, built with
// -tags lambda.norpc as bootstrap): the start / stop / status API behind an
// API Gateway HTTP API. main only reads the configuration once, builds the
// handler and hands it to the Lambda runtime, through httpadapter
// (api.Handler.Lambda): each event is served as an HTTP request.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/app"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/cmdmain"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/schema"
)

func main() {
	cmdmain.Run("ingest", func(ctx context.Context) error { return run(ctx) })
}

// sdkMaxAttempts bounds the SDK's own retries of one DynamoDB or SQS call.
const sdkMaxAttempts = 3

func run(ctx context.Context) error {
	zerolog.TimeFieldFormat = zerolog.TimeFormatUnixMs
	cfg := config.FromOS()
	log := logging.New(os.Stdout, schema.ServiceIngest, "").With().Str("env", cfg.Environment).Logger()
	awsCfg, err := awsconfig.Load(ctx, sdkMaxAttempts)
	if err != nil {
		return err
	}
	if cfg, err = app.ResolveSecret(ctx, cfg, app.NewSecretsManager(awsCfg)); err != nil {
		return err
	}
	h, err := app.Build(cfg, awsCfg, log, os.Stdout)
	if err != nil {
		return err
	}
	log.Info().Str("table", cfg.TableName).Bool("signed", cfg.SigningSecret != "").
		Str("allow_private_ips", string(cfg.AllowPrivateIPs)).Strs("allowed_hosts", cfg.AllowedHosts).Msg("ingest ready")
	lambda.StartWithOptions(h.Lambda(), lambda.WithContext(ctx))
	return nil
}
