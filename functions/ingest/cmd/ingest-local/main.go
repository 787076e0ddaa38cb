// Command ingest-local serves the ingest API over plain HTTP for the local
// stack: net/http serves the same http.Handler the Lambda runs (there behind
// httpadapter). It binds 127.0.0.1 by default. Configuration comes
// from the same environment variables as the Lambda (see docs/api.md); the
// AWS endpoints from AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_SQS.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/app"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/cmdmain"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

func main() {
	cmdmain.Run("ingest-local", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}

// DefaultPort is ingest-local's default port.
const DefaultPort = 8787

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ingest-local", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1", "address to bind (keep loopback unless you mean it)")
	port := fs.Int("port", DefaultPort, "port to bind (0 picks a free one)")
	createTable := fs.Bool("create-table", false, "create the sessions table first if it does not exist")
	createQueue := fs.String("create-queue", "", "create this work queue (and its -dlq) first and use it when WSFLEET_QUEUE_URL is unset")
	if err := fs.Parse(args); err != nil {
		return err
	}
	zerolog.TimeFieldFormat = zerolog.TimeFormatUnixMs
	cfg := config.FromOS()
	if err := cfg.UnknownEnv(); err != nil {
		return err // before creating anything
	}
	log := logging.New(os.Stdout, schema.ServiceIngest, "").With().Str("env", cfg.Environment).Logger()
	awsCfg, err := awsconfig.Load(ctx, 3)
	if err != nil {
		return err
	}
	if *createTable {
		if err := sessionitem.CreateTable(ctx, dynamodb.NewFromConfig(awsCfg), cfg.TableName); err != nil {
			return err
		}
	}
	if *createQueue != "" && cfg.QueueURL == "" {
		q, err := sqsnotify.CreateQueues(ctx, sqs.NewFromConfig(awsCfg), *createQueue, 30, 5)
		if err != nil {
			return err
		}
		cfg.QueueURL = q.WorkURL
	}
	if cfg, err = app.ResolveSecret(ctx, cfg, app.NewSecretsManager(awsCfg)); err != nil {
		return err
	}
	h, err := app.Build(cfg, awsCfg, log, os.Stdout)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*addr, strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	log.Info().Str("listen", "http://"+ln.Addr().String()).Str("table", cfg.TableName).Str("queue_url", cfg.QueueURL).
		Msg("ingest local front ready")
	return serve(ctx, ln, h, 5*time.Second)
}

// serve serves h on ln until ctx is done, then shuts down gracefully (within
// shutdownGrace) and returns nil. It returns the server's error otherwise.
func serve(ctx context.Context, ln net.Listener, h http.Handler, shutdownGrace time.Duration) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
