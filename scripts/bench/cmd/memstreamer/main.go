// Command memstreamer is the capacity benchmark's worker (bench only, never
// shipped): the streamer package's Worker on an in-memory lease store
// (shared/lease/memstore) seeded with sessions, so that a run measures the
// WebSocket + parse + dedupe + sink path and the lease bookkeeping without
// DynamoDB. Settings come from the same environment variables as the
// shipped worker (bin/streamer) and are checked the same way; the sink is
// stdout or discard. The flags describe the sessions:
//
//	memstreamer -sessions 1000 \
//	  -urls 'ws://127.0.0.1:9000/feed/{id},ws://127.0.0.2:9000/feed/{id}' \
//	  -resume-param from -prefix cap-
//
// The first SIGTERM or SIGINT drains as the shipped worker does.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/scripts/bench/memseed"
	"github.com/wsfleet/wsfleet/shared/cmdmain"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/schema"
	streamer "github.com/wsfleet/wsfleet/workers/streamer"
	"github.com/wsfleet/wsfleet/workers/streamer/envconfig"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/registry"
)

func main() {
	cmdmain.Run("memstreamer", func(ctx context.Context) error {
		if _, ok := os.LookupEnv("GOGC"); !ok {
			debug.SetGCPercent(envconfig.DefaultGCPercent) // as the shipped worker: the figures are its
		}
		zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
		return run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	})
}

func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	var seed Seed
	var urls string
	fs := flag.NewFlagSet("memstreamer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&seed.Sessions, "sessions", 0, "how many sessions to create")
	fs.StringVar(&urls, "urls", "", "comma-separated ws URL patterns; {id} = connection id, {n} = index; session n uses pattern n mod count")
	fs.StringVar(&seed.ResumeParam, "resume-param", "", "the sessions' resume query parameter")
	fs.StringVar(&seed.SeqField, "seq-field", "seq", "the sessions' sequence field")
	fs.StringVar(&seed.Prefix, "prefix", "mem-", "connection id prefix")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if urls != "" {
		seed.URLs = strings.Split(urls, ",")
	}
	cfg, err := envconfig.FromEnv(environ)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if k := cfg.Sink.Kind; k != registry.Stdout && k != registry.Discard {
		return fmt.Errorf("sink %q: the memory worker writes to stdout or discard", k)
	}
	handler, err := registry.Open(cfg.Sink, registry.Env{Stdout: stdout})
	if err != nil {
		return err
	}
	store := memstore.New()
	tableBytes, err := seed.measuredPut(store)
	if err != nil {
		return err
	}
	log := logging.New(stderr, schema.ServiceStreamer, cfg.Worker.LogLevel)
	log.Info().Int("sessions", seed.Sessions).Int64(memseed.StoreBytesField, tableBytes).Msg(memseed.SeededMsg)
	w, err := streamer.New(cfg.Worker, streamer.Deps{Store: store, Handler: handler, Logger: &log, Metrics: stderr})
	if err != nil {
		return err
	}
	return w.Run(ctx)
}
