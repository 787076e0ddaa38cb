// Command wsfleet starts, stops and shows wsfleet sessions through the ingest
// API (see package wsfleet and `wsfleet help`).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/wsfleet/wsfleet/scripts/wsfleet"
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
	return wsfleet.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
}
