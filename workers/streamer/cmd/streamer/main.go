// Command streamer is the wsfleet worker: it claims WebSocket sessions from
// the lease table, streams each one to the configured sink while it holds
// the session's lease, and hands them off on SIGTERM.
//
// Configuration comes from the environment (docs/worker.md lists every
// variable; any other WSFLEET_ variable is a startup error):
//
//	streamer                                   # DynamoDB (WSFLEET_TABLE) + SQS (WSFLEET_QUEUE_URL)
//	                                           # sink: WSFLEET_SINK=stdout|sqs|kinesis|discard
//	streamer healthcheck                       # exit 0 when /healthz answers 200 (ECS health check)
//
// The first SIGTERM or SIGINT starts a graceful shutdown bounded by
// WSFLEET_SHUTDOWN_DEADLINE; a second one kills the process at once.
//
// Built with -tags chaos (the chaos harness only), it also reads the
// test-only lease clock offset (clock_chaos.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/rs/zerolog"
	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/cmdmain"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
	"github.com/wsfleet/wsfleet/shared/schema"
	streamer "github.com/wsfleet/wsfleet/workers/streamer"
	"github.com/wsfleet/wsfleet/workers/streamer/envconfig"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/registry"
)

// main is cmdmain's: the first SIGTERM or SIGINT cancels start's context
// (the graceful shutdown), a second one ends the process at once, and an
// error exits 1.
func main() {
	cmdmain.Run("streamer", func(ctx context.Context) error {
		return start(ctx, os.Args[1:], os.Environ(), awsBackends, os.Stdout, os.Stderr)
	})
}

// start is the process: the health check subcommand, or the worker on
// open's lease store until ctx ends. The worker's stderr is JSON lines: an
// error it ends with is its last one (and not printed again).
func start(ctx context.Context, args, environ []string, open backends, stdout, stderr io.Writer) error {
	lookup := schema.LookupIn(environ)
	if len(args) > 0 && args[0] == "healthcheck" {
		return healthcheck(lookup)
	}
	if _, ok := lookup("GOGC"); !ok {
		debug.SetGCPercent(envconfig.DefaultGCPercent)
	}
	// Log times to the millisecond: a hand-off or a claim is a few ms.
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
	if err := run(ctx, args, environ, open, stdout, stderr); err != nil {
		log := logging.New(stderr, schema.ServiceStreamer, "")
		log.Error().Err(err).Msg("exit")
		return cmdmain.Reported(err)
	}
	return nil
}

// backends opens the lease store and the work queue (nil: none) for cfg;
// loadAWS returns the AWS configuration, loaded once.
type backends func(cfg envconfig.Config, loadAWS func() (aws.Config, error)) (lease.Store, streamer.WorkQueue, error)

// awsBackends is the deployment's: DynamoDB and, when WSFLEET_QUEUE_URL is
// set, SQS.
func awsBackends(cfg envconfig.Config, loadAWS func() (aws.Config, error)) (lease.Store, streamer.WorkQueue, error) {
	ac, err := loadAWS()
	if err != nil {
		return nil, nil, err
	}
	bulk, live := dynamoClients(ac, cfg.Worker.StoreTimeout)
	store := dynamostore.New(bulk, cfg.TableName, dynamostore.WithLiveness(live))
	if cfg.QueueURL == "" {
		return store, nil, nil
	}
	return store, sqsnotify.New(sqs.NewFromConfig(ac), cfg.QueueURL, int32(cfg.QueueWait/time.Second)), nil
}

// dynamoClients are the worker's two DynamoDB clients: bulk (claims,
// checkpoints, releases, session reads) with the config's retryer and its
// own retry budget, and live (heartbeats, registration, leave, death
// declarations, the reads of worker records its trust checks and watches
// make) with awsconfig.LivenessRetryer: no retry budget, its waits inside
// one store call (storeTimeout, the lease RPCTimeout). docs/worker.md,
// "DynamoDB clients".
func dynamoClients(ac aws.Config, storeTimeout time.Duration) (bulk, live *dynamodb.Client) {
	bulk = dynamodb.NewFromConfig(ac)
	live = dynamodb.NewFromConfig(ac, func(o *dynamodb.Options) { o.Retryer = awsconfig.LivenessRetryer(storeTimeout) })
	return bulk, live
}

func run(ctx context.Context, args []string, environ []string, open backends, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q (subcommand: healthcheck; settings come from the environment)", args)
	}
	cfg, err := envconfig.FromEnv(environ, chaosEnv()...)
	if err != nil {
		return err
	}
	cfg.MemoryLimit = envconfig.DetectMemoryLimit()
	var zoneErr error
	if cfg.Worker.Zone == "" {
		cfg.Worker.Zone, zoneErr = envconfig.ZoneFromECS(ctx, schema.LookupIn(environ), nil)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.Resolved()
	log := logging.New(stderr, schema.ServiceStreamer, cfg.Worker.LogLevel)
	if zoneErr != nil && !errors.Is(zoneErr, envconfig.ErrNoTaskMetadata) {
		log.Warn().Err(zoneErr).Msg("availability zone unknown: standbys are placed without it")
	}
	clk, err := chaosClock(schema.LookupIn(environ), &log)
	if err != nil {
		return err
	}

	// loadAWS is also called from the sessions' dials (the secret
	// resolver, at its first reference): hence the lock.
	var awsMu sync.Mutex
	var awsCfg *aws.Config
	loadAWS := func() (aws.Config, error) {
		awsMu.Lock()
		defer awsMu.Unlock()
		if awsCfg == nil {
			c, err := awsconfig.Load(ctx, 3)
			if err != nil {
				return aws.Config{}, err
			}
			awsCfg = &c
		}
		return *awsCfg, nil
	}

	store, queue, err := open(cfg, loadAWS)
	if err != nil {
		return err
	}
	deps := streamer.Deps{Store: store, Queue: queue, Logger: &log, Metrics: stderr, Clock: clk,
		Secrets: newSecretResolver(loadAWS, cfg.Worker.SecretCacheTTL, clk)}
	deps.Handler, err = registry.Open(cfg.Sink, registry.Env{Stdout: stdout, AWS: loadAWS, Log: log})
	if err != nil {
		return err
	}
	w, err := streamer.New(cfg.Worker, deps)
	if err != nil {
		return err
	}
	// A batched sink is the Worker's: Run starts it and stops it once the
	// sessions have flushed and released.
	return w.Run(ctx)
}

// healthcheck GETs /healthz on the admin port: nil (exit 0) on HTTP 200,
// an error (exit 1) otherwise. The image has no curl; ECS runs
// ["/streamer","healthcheck"].
func healthcheck(lookup func(string) (string, bool)) error {
	addr := streamer.DefaultConfig().AdminAddr
	if v, ok := lookup(schema.EnvAdminAddr); ok && strings.TrimSpace(v) != "" {
		addr = strings.TrimSpace(v)
	}
	u, err := healthURL(addr)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: HTTP %d", resp.StatusCode)
	}
	return nil
}

// healthURL is the /healthz URL for the admin listen address: a wildcard
// host is reached on loopback.
func healthURL(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("%s=%q: %w", schema.EnvAdminAddr, addr, err)
	}
	if port == "" || port == "0" {
		return "", errors.New(schema.EnvAdminAddr + " has no fixed port")
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}
