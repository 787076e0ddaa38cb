// Command feed runs the seq-numbered demo WebSocket feed (package feed) on
// 127.0.0.1: sessions at ws://127.0.0.1:PORT/feed/<session>?from=N, controls
// under /control/ (see feed.Server.Handler). With -records FILE it appends the
// final record of every connection to FILE as JSON lines. Logs are zerolog
// JSON on stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/scripts/feed"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "feed: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	cfg := feed.DefaultConfig()
	fs := flag.NewFlagSet("feed", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1", "address to bind")
	port := fs.Int("port", 8790, "port to bind (0 picks a free one)")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "messages per second per connection")
	mode := fs.String("mode", string(cfg.Mode), "one connection per session: kick-older or refuse-newer")
	fs.IntVar(&cfg.PayloadBytes, "payload-bytes", 0, "pad every message with this many bytes")
	records := fs.String("records", "", "append every connection's final record to this JSON-lines file")
	fs.DurationVar(&cfg.PingEvery, "ping-every", 0, "ping every connection this often and close one that does not answer (0: never)")
	fs.DurationVar(&cfg.PingTimeout, "ping-timeout", 2*time.Second, "with -ping-every: how long a pong may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := feed.ParseMode(*mode)
	if err != nil {
		return err
	}
	cfg.Mode = m
	zerolog.TimeFieldFormat = zerolog.TimeFormatUnixMs
	log := zerolog.New(os.Stderr).With().Timestamp().Str("component", "feed").Logger()

	var mu sync.Mutex
	var out *json.Encoder
	if *records != "" {
		f, err := os.OpenFile(*records, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("records file: %w", err)
		}
		defer f.Close()
		out = json.NewEncoder(f)
	}
	cfg.OnClose = func(r feed.ConnRecord) {
		log.Info().Int64("conn", r.ID).Str("session", r.Session).Str("reason", r.Reason).
			Int64("from", r.From).Int64("first_seq", r.FirstSeq).Int64("last_seq", r.LastSeq).
			Dur("open_for", r.ClosedAt.Sub(r.OpenedAt)).Msg("connection closed")
		if out != nil {
			mu.Lock()
			_ = out.Encode(r)
			mu.Unlock()
		}
	}
	srv, err := feed.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*addr, strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	log.Info().Str("addr", ln.Addr().String()).Float64("rate", cfg.Rate).Str("mode", string(cfg.Mode)).Msg("feed listening")
	if err := srv.Serve(ctx, ln); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info().Msg("feed stopped")
	return nil
}
