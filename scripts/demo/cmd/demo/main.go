// Command demo runs the scripted failover scenario (package demo) on a fresh
// local stack and prints the summary. It exits 1 on any violation. Flags
// change the scale and the timings; the stack's logs go to .dev/demo/logs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/scripts/demo"
	"github.com/wsfleet/wsfleet/shared/enginetest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	cfg := demo.DefaultConfig()
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	short := fs.Bool("short", false, "the short scenario of the tests (12 sessions, 3 stops)")
	sessions := fs.Int("sessions", 0, "sessions to start (default 50; 12 with -short)")
	stops := fs.Int("stops", -1, "sessions to stop (default 10; 3 with -short)")
	dir := fs.String("dir", "", "state folder (default <repo>/.dev/demo)")
	jsonOut := fs.String("json", "", "also write the result as JSON to this file")
	fs.DurationVar(&cfg.Stack.Worker.LeaseTTL, "lease-ttl", cfg.Stack.Worker.LeaseTTL, "workers' lease TTL")
	fs.DurationVar(&cfg.Stack.Worker.RenewEvery, "renew-every", cfg.Stack.Worker.RenewEvery, "workers' renew (and checkpoint) interval")
	fs.DurationVar(&cfg.Stack.Worker.ReconcileEvery, "reconcile-every", cfg.Stack.Worker.ReconcileEvery, "workers' reconcile interval")
	fs.Float64Var(&cfg.Stack.FeedRate, "rate", cfg.Stack.FeedRate, "feed messages per second per session")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *short {
		s := demo.ShortConfig()
		cfg.Sessions, cfg.Stops, cfg.Steady = s.Sessions, s.Stops, s.Steady
	}
	if *sessions > 0 {
		cfg.Sessions = *sessions
	}
	if *stops >= 0 {
		cfg.Stops = *stops
	}
	root, err := enginetest.RepoRoot()
	if err != nil {
		return err
	}
	cfg.Stack.Root = root
	cfg.Stack.Dir = *dir
	if cfg.Stack.Dir == "" {
		cfg.Stack.Dir = filepath.Join(root, ".dev", "demo")
	}
	// A fresh log folder per run.
	if err := os.RemoveAll(filepath.Join(cfg.Stack.Dir, "logs")); err != nil {
		return fmt.Errorf("clean logs: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(cfg.Stack.Dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("log dir: %w", err)
	}
	lf, err := os.Create(filepath.Join(cfg.Stack.Dir, "logs", "demo.log"))
	if err != nil {
		return fmt.Errorf("demo log: %w", err)
	}
	defer lf.Close()
	zerolog.TimeFieldFormat = zerolog.TimeFormatUnixMs
	cfg.Stack.Log = zerolog.New(lf).With().Timestamp().Str("component", "devstack").Logger()
	cfg.JSONPath = *jsonOut
	res, err := demo.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if !res.OK() {
		return errors.New("the demo found violations (see the summary)")
	}
	return nil
}
