// Command chaos runs wsfleet's fault-injection harness (package chaos) on a
// fresh local stack: a seeded schedule of worker crashes, zombies, rolling
// restarts, engine outages, source drops and refusals, API churn and a
// clock offset; then it judges the run from the feed's and the sinks' own
// records and writes result.json, report.md and timeline.svg. It exits 1 on
// any violation.
//
//	chaos                          # 10 minutes, a random seed (printed), out/chaos
//	chaos -seed 42 -duration 3m    # replay seed 42's schedule, 3 minutes of it
//	chaos -short                   # the test's run: one round of every fault kind
//	chaos -plan demo               # `make demo`: the fixed demo plan, shorter
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/scripts/chaos"
	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/cmdmain"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

func main() {
	cmdmain.Run("chaos", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}

// invocation is what a run's arguments ask for: the harness's config (its
// seed drawn when -seed is 0), the run's name (chaos or demo), and where it
// writes.
type invocation struct {
	cfg     chaos.Config
	name    string // chaos or demo: out/<name>, .dev/<name>
	short   bool
	dir     string // -dir
	out     string // -out
	rejudge string // -rejudge
}

func run(ctx context.Context, args []string) error {
	inv, err := parseArgs(args)
	if err != nil {
		return err
	}
	if inv.rejudge != "" {
		return rejudgeRun(inv.rejudge, inv.out)
	}
	cfg, name := inv.cfg, inv.name
	root, err := enginetest.RepoRoot()
	if err != nil {
		return err
	}
	cfg.Stack.Root = root
	cfg.Stack.Dir = inv.dir
	if cfg.Stack.Dir == "" {
		cfg.Stack.Dir = filepath.Join(root, ".dev", name)
	}
	cfg.OutDir = inv.out
	if cfg.OutDir == "" {
		cfg.OutDir = filepath.Join(root, "out", name)
	}
	if err := os.MkdirAll(cfg.Stack.Dir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	lf, err := os.Create(filepath.Join(cfg.Stack.Dir, "chaos.log"))
	if err != nil {
		return fmt.Errorf("harness log: %w", err)
	}
	defer lf.Close()
	zerolog.TimeFieldFormat = zerolog.TimeFormatUnixMs
	cfg.Stack.Log = zerolog.New(lf).With().Timestamp().Str("component", "devstack").Logger()
	fmt.Println(inv.announce())
	res, err := chaos.Run(ctx, cfg)
	if err != nil {
		return err
	}
	chaos.PrintSummary(os.Stdout, res)
	if !res.OK() {
		return errors.New("the run found violations (see the report)")
	}
	return nil
}

// parseArgs reads a run's arguments; a -seed of 0 draws the seed here, so
// the one announce prints is the one the run uses.
func parseArgs(args []string) (invocation, error) {
	cfg := chaos.DefaultConfig()
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	short := fs.Bool("short", false, "the short run of the tests: one round of every fault kind, 3 workers, 16 sessions")
	plan := fs.String("plan", chaos.PlanSeeded, "the fault plan: "+chaos.PlanSeeded+" (drawn from -seed) or "+chaos.PlanDemo+" (`make demo`: kill -9, a rolling restart, churn; 3 workers, 24 sessions)")
	seed := fs.Int64("seed", 0, "the schedule's seed (0: a random one, printed)")
	dur := fs.Duration("duration", -1, "how long the fault schedule runs (default 10m; the first round of every fault kind always runs whole)")
	workers := fs.Int("workers", 0, "worker processes (default 4; 3 with -short)")
	sessions := fs.Int("sessions", 0, "sessions started at the beginning (default 48; 16 with -short)")
	out := fs.String("out", "", "where result.json, report.md and timeline.svg go (default <repo>/out/<plan: chaos or demo>)")
	dir := fs.String("dir", "", "the stack's state folder (default <repo>/.dev/<chaos or demo>; its data/ and logs/ are deleted first)")
	mode := fs.String("feed-mode", string(cfg.Stack.FeedMode), "the feed's one-connection policy at the start: kick-older or refuse-newer")
	plainWS := fs.Bool("plain-ws", false, "serve the feed as plain ws:// (default: wss:// with a per-run CA the workers trust)")
	noSwitch := fs.Bool("no-policy-switch", false, "keep the feed's policy for the whole run (default: refuse-newer from half way)")
	only := fs.String("only", "", "only these fault kinds, comma-separated (to focus on one behaviour; the reference run has them all): "+strings.Join(chaos.AllKinds, ","))
	sinkFlag := fs.String("sink", "sqs", "the workers' sink: sqs (the batched sqs sink on a second fauxqs, a standard queue), sqs-fifo (the same on a FIFO queue), kinesis (the batched kinesis sink on kinesalite) or stdout (JSON lines; no sink faults); the judge reads the destination")
	noSkip := fs.Bool("no-skip", false, "start sessions without on_sink_refusal \"skip\" (no permanent sink refusal is injected then)")
	standby := fs.Int("standby-every", cfg.StandbyEvery, "start every Nth session (a planned one excepted) with a hot standby on a source that cannot replay (seq_mode none, or the seq field without resume), every 2N-th on such a source without (the control group); the feed admits standby connections; 0: none")
	planned := fs.Int("planned-every", cfg.PlannedEvery, "start every Nth session with planned reconnects (max_connection_age 4s, reconnect_on the feed's serverShutdown notice, switch_timeout 3s): make-before-break switches throughout the run; 0: none")
	binDir := fs.String("bin", "", "the folder of the stack's binaries (streamer, ingest-local, feed, dynamodel, secretsmanager), default <repo>/bin; -streamer overrides its streamer")
	streamerBin := fs.String("streamer", "", "the worker binary: its chaos build (go build -tags chaos; make chaos passes bin/streamer-chaos), default <repo>/bin/streamer")
	model := fs.String("dynamo-model", "aws", "the DynamoDB model's profile in front of dynalite: aws (AWS latency, index lag, stale reads, throttling, ambiguous errors, and the model's fault kinds) or dynalite (adds nothing); \"\": dynalite alone")
	rejudge := fs.String("rejudge", "", "judge and draw a past run again from its saved evidence (<dir>/"+chaos.EvidenceFile+"); runs nothing")
	if err := fs.Parse(args); err != nil {
		return invocation{}, err
	}
	if *rejudge != "" {
		return invocation{rejudge: *rejudge, out: *out}, nil
	}
	name := "chaos"
	switch {
	case *plan == chaos.PlanDemo:
		cfg, name = chaos.DemoConfig(), "demo"
	case *short:
		cfg = chaos.ShortConfig()
	}
	if *dur >= 0 {
		cfg.Duration = *dur
	}
	switch *sinkFlag {
	case "sqs", "sqs-fifo", "kinesis", "stdout":
		cfg.Stack.Sink = *sinkFlag
	default:
		return invocation{}, fmt.Errorf("-sink %q: want sqs, sqs-fifo, kinesis or stdout", *sinkFlag)
	}
	if *noSkip {
		cfg.SinkRefusalSkip = false
	}
	cfg.PlannedEvery = *planned
	cfg.StandbyEvery = *standby
	cfg.Stack.DynamoModel = *model
	if *binDir != "" {
		cfg.Stack.Bin = devstack.Binaries{Streamer: filepath.Join(*binDir, "streamer"), Ingest: filepath.Join(*binDir, "ingest-local"), Feed: filepath.Join(*binDir, "feed"),
			Model: filepath.Join(*binDir, "dynamodel"), SecretsManager: filepath.Join(*binDir, "secretsmanager")}
	}
	if *streamerBin != "" {
		cfg.Stack.Bin.Streamer = *streamerBin
	}
	if *workers > 0 {
		cfg.Stack.Workers = *workers
	}
	if *sessions > 0 {
		cfg.Sessions = *sessions
	}
	if *only != "" {
		cfg.Kinds = strings.Split(*only, ",")
	}
	m, err := feed.ParseMode(*mode)
	if err != nil {
		return invocation{}, err
	}
	cfg.Stack.FeedMode = m
	cfg.SwitchPolicy = cfg.SwitchPolicy && !*noSwitch && m == feed.ModeKickOlder
	cfg.Stack.PlainWS = *plainWS
	cfg.Seed = *seed
	if cfg.Seed == 0 {
		cfg.Seed = time.Now().UnixNano() % 1_000_000
	}
	cfg.Plan = *plan
	return invocation{cfg: cfg, name: name, short: *short, dir: *dir, out: *out}, nil
}

// announce is the run's first line: its plan, its seed, and the command
// that replays it with that seed.
func (inv invocation) announce() string {
	replay := fmt.Sprintf("make chaos SEED=%d DURATION=%s", inv.cfg.Seed, inv.cfg.Duration)
	switch {
	case inv.cfg.Plan == chaos.PlanDemo:
		replay = fmt.Sprintf("make demo DEMO_ARGS='-seed %d'", inv.cfg.Seed) // the same seed: the same sessions and draws
	case inv.short:
		replay = fmt.Sprintf("bin/chaos -short -seed %d", inv.cfg.Seed)
	}
	return fmt.Sprintf("%s: plan %s, seed %d (replay: %s)", inv.name, inv.cfg.Plan, inv.cfg.Seed, replay)
}

// rejudgeRun judges saved evidence again and writes the outputs to out
// (default: next to the evidence file).
func rejudgeRun(path, out string) error {
	saved, err := chaos.LoadEvidence(path)
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Dir(path)
	}
	res := chaos.Analyze(saved.Evidence, saved.Settings, saved.Plan)
	if err := chaos.WriteOutputs(out, res, saved.Evidence); err != nil {
		return err
	}
	chaos.PrintSummary(os.Stdout, res)
	fmt.Printf("wrote %s, %s, %s under %s\n", chaos.ResultFile, chaos.ReportFile, chaos.TimelineFile, out)
	if !res.OK() {
		return errors.New("the run found violations (see the report)")
	}
	return nil
}
