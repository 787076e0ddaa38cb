// Command bench runs wsfleet's benchmarks and writes docs/BENCHMARKS.md and
// docs/benchmarks.json (package bench has the details):
//
//	bench [-mode quick|full] [-only claim,failover,...] [-wait-quiet 0.5] [-out FILE] [-json FILE] [-work DIR] [-merge] [-plain-ws]
//
// `make bench` runs the quick mode (about five minutes), `make bench-full`
// the full one.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/scripts/bench"
	"github.com/wsfleet/wsfleet/shared/cmdmain"
)

func main() {
	cmdmain.Run("bench", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stderr) })
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", string(bench.Quick), "quick (≤ 5 min, smaller counts) or full")
	only := fs.String("only", "", "comma-separated phases to run (default all): "+strings.Join(bench.AllPhases, ","))
	quiet := fs.Float64("wait-quiet", 0, "wait until the 1-minute load average is below this before starting (0: do not wait)")
	quietFor := fs.Duration("wait-quiet-max", 20*time.Minute, "longest wait for a quiet machine")
	out := fs.String("out", "", "report path (default docs/BENCHMARKS.md; - for none)")
	js := fs.String("json", "", "figures path (default docs/benchmarks.json; - for none)")
	work := fs.String("work", "", "logs and profiles (default out/bench)")
	model := fs.String("dynamo-model", "aws", "the DynamoDB model's profile the claim, failover, handoff, stop, rebalance and cost phases also run on, beside dynalite (\"\": dynalite only)")
	rerender := fs.Bool("rerender", false, "write the report (-out) again from the figures (-json) with this build's renderer; runs nothing")
	merge := fs.Bool("merge", false, "replace only the phases run now in the existing report (-json, -out) instead of writing a new one")
	plainWS := fs.Bool("plain-ws", false, "the capacity runs' feed and the lease phases' stacks serve plain ws:// (default: wss:// with a per-run CA, the capacity side-by-side runs on ws:// too)")
	billLabel := fs.String("bill-label", "", "the bill phase's pair of figures (packing off and on) is filed under \"<label>, unpacked\" and \"<label>, packed\" (default \"unpacked\" and \"packed\", the pair the goals judge; a merged run with another label keeps both pairs)")
	billEnv := fs.String("bill-env", "", "comma-separated KEY=VALUE added to the bill runs' worker environment (e.g. a packing setting)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *rerender {
		return bench.Rerender(*js, *out)
	}
	cfg := bench.DefaultConfig(bench.Mode(*mode))
	if *only != "" {
		cfg.Phases = strings.Split(*only, ",")
	}
	cfg.QuietLoad, cfg.QuietWait = *quiet, *quietFor
	cfg.BillLabel = *billLabel
	if *billEnv != "" {
		cfg.BillEnv = map[string]string{}
		for _, kv := range strings.Split(*billEnv, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("-bill-env %q: want KEY=VALUE[,KEY=VALUE…]", kv)
			}
			cfg.BillEnv[k] = v
		}
	}
	cfg.OutMD, cfg.OutJSON, cfg.WorkDir, cfg.Merge, cfg.Model, cfg.PlainWS = *out, *js, *work, *merge, *model, *plainWS
	cfg.Invocation = "bin/bench " + strings.Join(args, " ")
	if len(args) == 0 {
		cfg.Invocation = "bin/bench"
	}
	zerolog.TimeFieldFormat = time.RFC3339
	cfg.Log = zerolog.New(zerolog.ConsoleWriter{Out: stderr, TimeFormat: "15:04:05"}).With().Timestamp().Logger()
	rep, err := bench.Run(ctx, cfg)
	if rep != nil {
		printGoals(stderr, "", bench.Goals(rep))
		if m := rep.OnModel; m != nil {
			printGoals(stderr, "[model "+m.Profile+"] ", bench.Goals(m.Report(rep.Mode)))
		}
	}
	return err
}

// printGoals writes one line per goal, its figure prefixed.
func printGoals(w io.Writer, prefix string, gs []bench.Goal) {
	for _, g := range gs {
		met := "met"
		if !g.Met {
			met = "MISSED " + g.Miss
		}
		fmt.Fprintf(w, "%-75s %-14s goal %-14s %s\n", prefix+g.Figure, g.Measured, g.Goal, met)
	}
}
