// Command wsfleet is wsfleet's command line: it starts, stops and shows
// sessions through the ingest API (package apiclient; `wsfleet help`).
package main

import (
	"context"
	"os"

	"github.com/wsfleet/wsfleet/shared/cmdmain"
)

func main() {
	cmdmain.Run("wsfleet", func(ctx context.Context) error { return run(ctx) })
}

func run(ctx context.Context) error {
	return cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
}
