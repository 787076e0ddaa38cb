// Command feed runs the seq-numbered test WebSocket feed (package feed) for
// the local stack, the demo, chaos and bench: sessions at
// ws://127.0.0.1:PORT/feed/<session>?from=N (wss:// with -tls-dir), controls under /control/ (see
// feed.Server.Handler). With -records FILE it appends the
// final record of every connection to FILE as JSON lines. Logs are zerolog
// JSON on stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/cmdmain"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/tlsca"
)

func main() {
	cmdmain.Run("feed", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}

func run(ctx context.Context, args []string) error {
	var cfg feed.Config
	fs := flag.NewFlagSet("feed", flag.ContinueOnError)
	addrs := fs.String("addr", "127.0.0.1", "comma-separated addresses to bind (several loopback ones keep many connections off one address pair's port limit)")
	port := fs.Int("port", 8790, "port to bind on each (0 picks a free one)")
	fs.Float64Var(&cfg.Rate, "rate", feed.DefaultRate, "messages per second per session")
	mode := fs.String("mode", string(feed.DefaultMode), "one connection per session: kick-older, refuse-newer or allow")
	fs.IntVar(&cfg.PayloadBytes, "payload-bytes", 0, "pad every message with this many bytes")
	records := fs.String("records", "", "append every connection's final record to this JSON-lines file")
	fs.DurationVar(&cfg.PingEvery, "ping-every", 0, "ping every connection this often and close one that does not answer (0: never)")
	fs.DurationVar(&cfg.PingTimeout, "ping-timeout", feed.DefaultPingTimeout, "with -ping-every: how long a pong may take")
	shape := fs.String("shape", "flat", "message shape: flat, nested (seq at data.u), string (sequenceNumber as a string), noseq or binary")
	fs.DurationVar(&cfg.SubscribeWithin, "subscribe-within", 0, "close a connection that sends no {\"op\":\"subscribe\"} this soon (0: no subscribe needed)")
	fs.DurationVar(&cfg.KeepaliveEvery, "keepalive-every", 0, "send KEEP_ALIVE_REQ this often and close a connection that does not answer (0: never)")
	fs.DurationVar(&cfg.MaxConnAge, "max-conn-age", 0, "close every connection at this age with 1001, as Binance does after 24 h (0: never; POST /control/schedule changes it)")
	fs.DurationVar(&cfg.ShutdownNotice, "shutdown-notice", 0, "with -max-conn-age: send {\"e\":\"serverShutdown\"} this long before closing at age (0: no notice)")
	tlsDir := fs.String("tls-dir", "", "serve wss:// (and the controls over https) with the CA in this directory (testkit/tlsca: ca.pem, server.pem, server-key.pem), made there if absent (empty: plain ws://)")
	fs.StringVar(&cfg.TenureHeader, "tenure-header", "", "handshake header naming the client's tenure; overlapping connections of one tenure are planned, not violations (empty: off)")
	fs.BoolVar(&cfg.AllowStandby, "allow-standby", false, "with -tenure-header: admit standby connections (tenure <worker id>/standby/<n>) beside the owner's, neither kicked nor refused (POST /control/standby switches it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := feed.ParseMode(*mode)
	if err != nil {
		return err
	}
	cfg.Mode = m
	if cfg.Shape, err = feed.ParseShape(*shape); err != nil {
		return err
	}
	if *tlsDir != "" {
		ca, err := tlsca.LoadOrNew(*tlsDir)
		if err != nil {
			return err
		}
		cfg.TLS = ca.ServerTLS()
	}
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
		log.Info().Int64("conn", r.ID).Str("session", r.Session).Str("reason", r.Reason).Str("tenure", r.Tenure).
			Bool("standby", r.Standby).Int64("from", r.From).Int64("first_seq", r.FirstSeq).Int64("last_seq", r.LastSeq).
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
	var hostPorts []string
	for _, a := range strings.Split(*addrs, ",") {
		hostPorts = append(hostPorts, net.JoinHostPort(a, strconv.Itoa(*port)))
	}
	if err := srv.Start(hostPorts...); err != nil {
		return err
	}
	log.Info().Strs("addrs", hostPorts).Bool("tls", cfg.TLS != nil).Float64("rate", cfg.Rate).Str("mode", string(cfg.Mode)).
		Dur("max_conn_age", cfg.MaxConnAge).Dur("shutdown_notice", cfg.ShutdownNotice).Str("tenure_header", cfg.TenureHeader).
		Bool("allow_standby", cfg.AllowStandby).Msg("feed listening")
	<-ctx.Done()
	srv.Close()
	log.Info().Msg("feed stopped")
	return nil
}
