// Command dynamodel runs the DynamoDB model (package dynamodel) for the
// local stack, chaos and the bench: DynamoDB's JSON protocol on
// 127.0.0.1:PORT in front of a dynalite it starts (or -primary), under the
// -profile aws or dynalite, with the control endpoints under /dynamodel/
// (see dynamodel's control.go); -without takes behaviours out of the
// profile (e.g. -without lag,faults). It prints one line, "dynamodel listening
// at http://127.0.0.1:PORT", when it serves, and runs until SIGTERM or
// SIGINT.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/cmdmain"
	"github.com/wsfleet/wsfleet/testkit/dynamodel"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

func main() {
	cmdmain.Run("dynamodel", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dynamodel", flag.ContinueOnError)
	port := fs.Int("port", 0, "port to listen on, on 127.0.0.1 (0 picks a free one)")
	profile := fs.String("profile", "aws", "behaviour: aws (DynamoDB as documented) or dynalite (adds nothing)")
	primary := fs.String("primary", "", "endpoint of a running dynalite to front (empty: start one)")
	dataDir := fs.String("data-dir", "", "with no -primary: keep the started dynalite's data here (in memory when empty)")
	logDir := fs.String("log-dir", "", "the started dynalites' logs (a temporary directory when empty)")
	seed := fs.Uint64("seed", 1, "the model's random seed")
	without := fs.String("without", "", "comma-separated behaviours to take out of the profile: latency, lag, throttle, faults, meter")
	meter := fs.Bool("meter", false, "meter billing even when the profile does not (the dynalite profile)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prof, err := dynamodel.ProfileByName(*profile)
	if err != nil {
		return err
	}
	prof.Meter = prof.Meter || *meter
	for _, b := range strings.FieldsFunc(*without, func(r rune) bool { return r == ',' }) {
		switch strings.TrimSpace(b) {
		case "latency":
			prof.Latency = nil
		case "lag":
			prof.Lag = dynamodel.Dist{}
		case "throttle":
			prof.Throughput = dynamodel.Throughput{}
		case "faults":
			prof.Faults = dynamodel.Faults{}
		case "meter":
			prof.Meter = false
		default:
			return fmt.Errorf("-without: unknown behaviour %q (latency, lag, throttle, faults, meter)", b)
		}
	}
	p := *port
	if p == 0 {
		if p, err = enginetest.FreePort(); err != nil {
			return err
		}
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m, err := dynamodel.Start(startCtx, dynamodel.Config{
		Profile: prof,
		Primary: *primary,
		Engines: enginetest.Options{DataDir: *dataDir, LogDir: *logDir},
		Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(p)),
		Seed:    *seed,
		Log:     os.Stderr,
	})
	if err != nil {
		return err
	}
	fmt.Printf("dynamodel listening at %s (profile %s, primary %s)\n", m.Endpoint(), prof.Name, m.Primary())
	<-ctx.Done()
	return m.Close()
}
