// Command streamer is the wsfleet worker: it claims WebSocket sessions from
// the lease table, streams each one to the configured sink while it holds
// the session's lease, and hands them off on SIGTERM.
//
// Configuration comes from the environment (docs/worker.md lists every
// variable). Flags choose the lease store:
//
//	streamer                                   # DynamoDB (WSFLEET_TABLE) + SQS (WSFLEET_QUEUE_URL)
//	streamer --store=memory --memory-sessions=1000 \
//	  --memory-urls='ws://127.0.0.1:9000/feed/{id},ws://127.0.0.2:9000/feed/{id}' \
//	  --memory-resume-param=from               # no I/O besides the WebSockets (benchmarks)
//	streamer healthcheck                       # exit 0 when /healthz answers 200 (ECS health check)
//
// The first SIGTERM or SIGINT starts a graceful shutdown bounded by
// WSFLEET_SHUTDOWN_DEADLINE; a second one kills the process at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/rs/zerolog"
	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
	"github.com/wsfleet/wsfleet/shared/schema"
	streamer "github.com/wsfleet/wsfleet/workers/streamer"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/sqssink"
)

// defaultGCPercent is the GC target when GOGC is not set: less GC headroom
// per session than Go's default 100 at a similar CPU cost (measured in
// docs/worker.md#capacity). GOGC and GOMEMLIMIT still apply.
const defaultGCPercent = 50

func main() {
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		os.Exit(healthcheck(os.LookupEnv, os.Stderr))
	}
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(defaultGCPercent)
	}
	// Log times to the millisecond: a hand-off or a claim is a few ms.
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	go func() {
		<-ctx.Done()
		stop() // the default action again: a second signal ends the process at once
	}()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "{\"level\":\"error\",\"service\":\"streamer\",\"error\":%q,\"message\":\"exit\"}\n", err.Error())
		os.Exit(1)
	}
}

// flags are the command line (the store; everything else is environment).
type flags struct {
	store        string
	memSessions  int
	memURLs      string
	memResume    string
	memSeqField  string
	memIDsPrefix string
}

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("streamer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.store, "store", "dynamo", "lease store: dynamo (the table named by "+schema.EnvTableName+") or memory (no I/O; sessions from --memory-*)")
	fs.IntVar(&f.memSessions, "memory-sessions", 0, "with --store=memory: how many sessions to create")
	fs.StringVar(&f.memURLs, "memory-urls", "", "with --store=memory: comma-separated ws URL patterns; {id} = connection id, {n} = index; session n uses pattern n mod count")
	fs.StringVar(&f.memResume, "memory-resume-param", "", "with --store=memory: the sessions' resume query parameter")
	fs.StringVar(&f.memSeqField, "memory-seq-field", "seq", "with --store=memory: the sessions' sequence field")
	fs.StringVar(&f.memIDsPrefix, "memory-prefix", "mem-", "with --store=memory: connection id prefix")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q (subcommand: healthcheck)", fs.Args())
	}
	if f.store != "dynamo" && f.store != "memory" {
		return f, fmt.Errorf("--store=%q: want dynamo or memory", f.store)
	}
	return f, nil
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	cfg, err := streamer.ConfigFromEnv(lookup)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := streamer.NewLogger(stderr, cfg.LogLevel)
	clk, offset, err := testClock(lookup)
	if err != nil {
		return err
	}

	var awsCfg *aws.Config
	loadAWS := func() (aws.Config, error) {
		if awsCfg == nil {
			c, err := awsconfig.Load(ctx, 3)
			if err != nil {
				return aws.Config{}, err
			}
			awsCfg = &c
		}
		return *awsCfg, nil
	}

	deps := streamer.Deps{Logger: &log, Metrics: stderr, Clock: clk}
	if offset != 0 {
		log.Warn().Dur("offset", offset).Str("env", EnvTestClockOffset).Msg("TEST ONLY: the lease clock is offset from the system clock")
	}
	switch f.store {
	case "memory":
		ms := memstore.New()
		seed := streamer.MemorySeed{Sessions: f.memSessions, Prefix: f.memIDsPrefix, ResumeParam: f.memResume, SeqField: f.memSeqField}
		if f.memURLs != "" {
			seed.URLs = strings.Split(f.memURLs, ",")
		}
		if _, err := seed.Seed(ms); err != nil {
			return err
		}
		deps.Store = ms
		log.Info().Int("sessions", f.memSessions).Msg("memory store seeded")
	default:
		ac, err := loadAWS()
		if err != nil {
			return err
		}
		deps.Store = dynamostore.New(dynamodb.NewFromConfig(ac), cfg.TableName)
		if cfg.QueueURL != "" {
			deps.Queue = sqsnotify.New(sqs.NewFromConfig(ac), cfg.QueueURL, int32(cfg.QueueWait/time.Second))
		}
	}
	switch cfg.Sink {
	case streamer.SinkStdout:
		deps.Handler = sink.NewWriter(stdout)
	case streamer.SinkDiscard:
		deps.Handler = sink.Discard
	case streamer.SinkSQS:
		ac, err := loadAWS()
		if err != nil {
			return err
		}
		deps.Handler = sqssink.New(sqs.NewFromConfig(ac), cfg.OutputQueueURL)
	}
	w, err := streamer.New(cfg, deps)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

// EnvTestClockOffset shifts the worker's lease clock (every wall-clock
// reading the lease protocol makes: acquire, renew and reconcile
// conditions) by a signed duration, e.g. "400ms" or "-250ms". TEST ONLY: the
// chaos harness (scripts/chaos) uses it to play a worker whose clock is off
// by up to the configured max skew. Never set it in a deployment.
const EnvTestClockOffset = "WSFLEET_TEST_CLOCK_OFFSET"

// testClock returns the lease clock: the real one, or the real one offset
// by WSFLEET_TEST_CLOCK_OFFSET (nil when unset or zero: the worker's default).
func testClock(lookup func(string) (string, bool)) (clock.Clock, time.Duration, error) {
	v, ok := lookup(EnvTestClockOffset)
	v = strings.TrimSpace(v)
	if !ok || v == "" {
		return nil, 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, 0, fmt.Errorf("%s=%q: not a duration (e.g. 400ms, -250ms)", EnvTestClockOffset, v)
	}
	if d == 0 {
		return nil, 0, nil
	}
	return clock.Offset{Base: clock.Real{}, Skew: d}, d, nil
}

// healthcheck GETs /healthz on the admin port and returns the exit code:
// 0 on HTTP 200, 1 otherwise. The image has no curl; ECS runs
// ["/streamer","healthcheck"].
func healthcheck(lookup func(string) (string, bool), stderr io.Writer) int {
	addr := streamer.DefaultConfig().AdminAddr
	if v, ok := lookup(schema.EnvAdminAddr); ok && strings.TrimSpace(v) != "" {
		addr = strings.TrimSpace(v)
	}
	u, err := healthURL(addr)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(stderr, "healthcheck: HTTP", resp.StatusCode)
		return 1
	}
	return 0
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
