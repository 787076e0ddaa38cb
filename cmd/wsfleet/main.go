// Command wsfleet is wsfleet's command line: it starts, stops and shows
// sessions through the ingest API (package apiclient; `wsfleet help`).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "wsfleet: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	return cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
}
