// Package bench is wsfleet's benchmark driver (`make bench`, `make
// bench-full`). It runs the real binaries on this machine and measures, in
// one report (docs/BENCHMARKS.md and docs/benchmarks.json):
//
//  1. claim latency: POST /sessions → first message at the sink, via the SQS
//     notification and via reconciliation alone (workers without a
//     consumer);
//  2. crash failover: kill -9 of the owner → first message delivered by the
//     new owner;
//  3. graceful handoff: SIGTERM of the owner → first message by the new
//     owner, with messages lost and duplicated counted from the feed's and
//     the sinks' records by the chaos harness's checks (package chaos);
//  4. one worker's capacity: sessions held, CPU per 1,000 messages/s and RSS
//     per session, with the no-I/O memory store and with dynalite (stepped
//     until dynalite is the bottleneck), with heap and CPU profiles of the
//     worker;
//  5. stop latency: POST stop → the connection closed at the source, when
//     the stop notification reaches the owner, a non-owner, or no worker
//     (the owner's mailbox alone);
//  6. DynamoDB cost: write and read units per session-hour by kind and
//     category (liveness, ownership, checkpoints, reads) as the workers'
//     stores meter them, for sessions at 1 msg/s and idle ones, the
//     on-demand cost they project, the table ceiling and the hot keys;
//  7. reads: the liveness protocol's read and write units per worker-hour
//     at 10 and 100 workers (Keepers on dynalite, no session);
//  8. throughput: one session as fast as the feed pushes into each sink
//     (discard, stdout, sqs unbatched and batched, kinesis) with 15 ms
//     added to every sink request, and 1,000 sessions × 10 msg/s into sqs
//     batched: msg/s, requests per message, lag;
//
// and runs the Go microbenchmarks of the hot paths. Figures are reported,
// never asserted. The quick mode (the default of `make bench`) fits in
// about five minutes with smaller counts; the full mode runs the sizes the
// goals are stated for.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/testkit/enginetest"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Mode is the run's size.
type Mode string

// Modes.
const (
	Quick Mode = "quick"
	Full  Mode = "full"
)

// Phase names, in the order they run.
const (
	PhaseMicro     = "micro"
	PhaseClaim     = "claim"
	PhaseFailover  = "failover"
	PhaseHandoff   = "handoff"
	PhaseStop      = "stop"
	PhaseRebalance = "rebalance"
	PhaseCost      = "cost"
	PhaseReads     = "reads"
	PhaseCapacity  = "capacity"
	PhaseDynalite  = "dynalite"
	// PhaseThroughput: one session as fast as the feed pushes into each
	// sink, with 15 ms added to every sink request, and many sessions into
	// sqs batched (issue 16).
	PhaseThroughput = "throughput"
)

// AllPhases lists every phase in run order.
var AllPhases = []string{PhaseMicro, PhaseClaim, PhaseFailover, PhaseHandoff, PhaseStop, PhaseRebalance, PhaseCost, PhaseReads, PhaseCapacity, PhaseDynalite, PhaseThroughput}

// Binaries are the programs the driver runs.
type Binaries struct {
	Streamer    string // bin/streamer (the shipped worker: the lease phases, cost and dynalite)
	MemStreamer string // bin/memstreamer (the capacity runs' worker on the in-memory store)
	Ingest      string // bin/ingest-local
	Feed        string // bin/feed (through devstack for the lease phases; on its own for the capacity runs)
}

// CapRun is one capacity run of the memory store.
type CapRun struct {
	Sessions int     `json:"sessions"`
	Rate     float64 `json:"rate"` // messages/s per session
	// Env is added to the worker's environment (e.g. GOGC=50 for a lever).
	Env map[string]string `json:"env,omitempty"`
}

// EnvMaxRenews is the worker's writes-in-flight bound (checkpoints; default
// 64). The name is kept for the bench's settings; the variable is
// WSFLEET_MAX_CONCURRENT_WRITES since issue 13.
const EnvMaxRenews = schema.EnvMaxConcurrentWrites

// Writes in flight of the runs (checkpoints; the worker's default is 64).
// The capacity runs use 64: with the no-I/O store it should bound nothing.
// The dynalite steps allow more in flight so that, as the engine slows
// down, the engine (not 64 ÷ its latency) is what saturates first.
const (
	CapMaxRenews = "64"
	DynMaxRenews = "256"
)

// Sizes are the counts and durations of one mode.
type Sizes struct {
	BenchTime string // go test -benchtime

	ClaimSamples     int
	ClaimWarmup      int
	ClaimFeedRate    float64
	ReconcileSpacing time.Duration // mean gap between reconcile-path starts

	FailoverRounds, FailoverSessions int
	HandoffRounds, HandoffSessions   int
	// A second handoff run with fewer sessions per SIGTERM (0: none): the
	// gap of a handoff that does not queue behind a hundred others.
	HandoffSmallRounds, HandoffSmallSessions int
	LeaseFeedRate                            float64
	// HandoffFeedRate is the handoff rounds' feed rate: high, so that the
	// first message after a handoff does not wait long for the source to
	// produce one (at most 1/rate when the old owner delivered everything).
	HandoffFeedRate float64

	// StopSamples are the stops timed per path (reaching the owner, a
	// non-owner, no worker).
	StopSamples int

	// The rebalance run: RebalanceSessions on 2 workers, then 2 join;
	// loads observed RebalanceObserve after the fleet is balanced, or
	// until RebalanceTimeout after the join.
	RebalanceSessions int
	RebalanceFeedRate float64
	RebalanceObserve  time.Duration
	RebalanceTimeout  time.Duration
	// RebalanceMinHold and RebalanceEvery override the workers' defaults
	// (60 s, 10 s) when set (the test's shorter run; the benchmark keeps
	// the defaults).
	RebalanceMinHold time.Duration
	RebalanceEvery   time.Duration

	// The cost runs: sessions at 1 msg/s and idle ones, each on
	// CostWorkers workers, measured over CostWindow.
	CostSessions     int
	CostIdleSessions int
	CostWorkers      int
	CostWindow       time.Duration

	// The reads runs: ReadsWorkers Keepers each (one run per count) over
	// ReadsWindow.
	ReadsWorkers []int
	ReadsWindow  time.Duration

	CapRuns    []CapRun
	CapSettle  time.Duration
	CapWindow  time.Duration
	CPUProfile time.Duration

	DynSteps  []int
	DynSettle time.Duration
	DynWindow time.Duration

	// The throughput runs: settle and window of each, and the many-session
	// run's sessions and rate.
	TPSettle, TPWindow time.Duration
	TPManySessions     int
	TPManyRate         float64
}

// SizesFor returns the sizes of mode.
func SizesFor(m Mode) Sizes {
	if m == Full {
		return Sizes{
			BenchTime:    "1s",
			ClaimSamples: 300, ClaimWarmup: 5, ClaimFeedRate: 100, ReconcileSpacing: 100 * time.Millisecond,
			FailoverRounds: 3, FailoverSessions: 100,
			HandoffRounds: 3, HandoffSessions: 100,
			HandoffSmallRounds: 20, HandoffSmallSessions: 10,
			LeaseFeedRate: 5, HandoffFeedRate: 50,
			StopSamples:       200,
			RebalanceSessions: 2000, RebalanceFeedRate: 2, RebalanceObserve: 30 * time.Second, RebalanceTimeout: 5 * time.Minute,
			CostSessions: 10000, CostIdleSessions: 2000, CostWorkers: 2, CostWindow: 5 * time.Minute,
			ReadsWorkers: []int{10, 100}, ReadsWindow: 2 * time.Minute,
			CapRuns: []CapRun{{Sessions: 19000, Rate: 1}, {Sessions: 5000, Rate: 10},
				{Sessions: 19000, Rate: 1, Env: map[string]string{"GOGC": "100"}}}, // Go's default, against the binary's 50
			CapSettle: 20 * time.Second, CapWindow: 60 * time.Second, CPUProfile: 15 * time.Second,
			DynSteps:  []int{2000, 3000, 4000, 5000, 6000, 8000, 10000, 13000, 16000, 19000},
			DynSettle: 10 * time.Second, DynWindow: 20 * time.Second,
			TPSettle: 5 * time.Second, TPWindow: 30 * time.Second, TPManySessions: 1000, TPManyRate: 10,
		}
	}
	return Sizes{
		BenchTime:    "100ms",
		ClaimSamples: 200, ClaimWarmup: 5, ClaimFeedRate: 100, ReconcileSpacing: 100 * time.Millisecond,
		FailoverRounds: 2, FailoverSessions: 100,
		HandoffRounds: 2, HandoffSessions: 100,
		LeaseFeedRate: 5, HandoffFeedRate: 50,
		StopSamples:       30,
		RebalanceSessions: 400, RebalanceFeedRate: 2, RebalanceObserve: 15 * time.Second, RebalanceTimeout: 4 * time.Minute,
		CostSessions: 1000, CostIdleSessions: 200, CostWorkers: 2, CostWindow: time.Minute,
		ReadsWorkers: []int{10, 100}, ReadsWindow: 30 * time.Second,
		CapRuns:   []CapRun{{Sessions: 2000, Rate: 1}, {Sessions: 1000, Rate: 10}},
		CapSettle: 5 * time.Second, CapWindow: 12 * time.Second, CPUProfile: 5 * time.Second,
		DynSteps:  []int{2000},
		DynSettle: 5 * time.Second, DynWindow: 15 * time.Second,
		TPSettle: 3 * time.Second, TPWindow: 10 * time.Second, TPManySessions: 1000, TPManyRate: 10,
	}
}

// Describe says what the sizes are, for the report's header.
func (s Sizes) Describe() string {
	var caps []string
	for _, c := range s.CapRuns {
		x := fmt.Sprintf("%s × %g msg/s", thousands(c.Sessions), c.Rate)
		if len(c.Env) > 0 {
			x += envLabel(c.Env)
		}
		caps = append(caps, x)
	}
	var steps []string
	for _, n := range s.DynSteps {
		steps = append(steps, thousands(n))
	}
	handoff := fmt.Sprintf("%d rounds × %d sessions", s.HandoffRounds, s.HandoffSessions)
	if s.HandoffSmallRounds > 0 {
		handoff += fmt.Sprintf(", and %d rounds × %d", s.HandoffSmallRounds, s.HandoffSmallSessions)
	}
	return fmt.Sprintf("claim latency %d samples per path; failover %d rounds × %d sessions; handoff %s; stop %d samples per path; rebalance %s sessions from 2 to 4 workers; cost %s sessions at 1 msg/s and %s idle ones, %d workers each, steady window %s; reads %s workers over %s each; capacity (memory store) %s; dynalite steps %s sessions; throughput windows of %s, %s sessions × %g msg/s; microbenchmarks -benchtime %s",
		s.ClaimSamples, s.FailoverRounds, s.FailoverSessions, handoff, s.StopSamples, thousands(s.RebalanceSessions), thousands(s.CostSessions), thousands(s.CostIdleSessions), s.CostWorkers, s.CostWindow,
		joinInts(s.ReadsWorkers, " and "), s.ReadsWindow, strings.Join(caps, ", "), strings.Join(steps, ", "), s.TPWindow, thousands(s.TPManySessions), s.TPManyRate, s.BenchTime)
}

// Config configures a run.
type Config struct {
	Mode    Mode
	Root    string // repository root (default enginetest.RepoRoot())
	WorkDir string // logs and profiles (default Root/out/bench)
	OutMD   string // the report (default Root/docs/BENCHMARKS.md; "-" = none)
	OutJSON string // the figures (default Root/docs/benchmarks.json; "-" = none)
	Phases  []string
	Bin     Binaries
	// QuietLoad > 0: wait (at most QuietWait) for the 1-minute load average
	// to drop below it before starting.
	QuietLoad float64
	QuietWait time.Duration
	Sizes     Sizes
	// Invocation is the command line reported with every figure.
	Invocation string
	// Merge: start from the report in OutJSON and replace only the phases
	// run now (the report says which phases were re-run, when, and at
	// which commit).
	Merge bool
	Log   zerolog.Logger
}

// DefaultConfig returns the configuration of mode with every phase.
func DefaultConfig(m Mode) Config {
	return Config{Mode: m, Phases: AllPhases, Sizes: SizesFor(m), QuietWait: 20 * time.Minute, Log: zerolog.Nop()}
}

func (c *Config) fill() error {
	if c.Root == "" {
		r, err := enginetest.RepoRoot()
		if err != nil {
			return err
		}
		c.Root = r
	}
	if c.WorkDir == "" {
		c.WorkDir = filepath.Join(c.Root, "out", "bench")
	}
	if c.OutMD == "" {
		c.OutMD = filepath.Join(c.Root, "docs", "BENCHMARKS.md")
	}
	if c.OutJSON == "" {
		c.OutJSON = filepath.Join(c.Root, "docs", "benchmarks.json")
	}
	bin := filepath.Join(c.Root, "bin")
	def := func(p *string, name string) {
		if *p == "" {
			*p = filepath.Join(bin, name)
		}
	}
	def(&c.Bin.Streamer, "streamer")
	def(&c.Bin.MemStreamer, "memstreamer")
	def(&c.Bin.Ingest, "ingest-local")
	def(&c.Bin.Feed, "feed")
	if c.Invocation == "" {
		c.Invocation = "bin/bench -mode " + string(c.Mode)
	}
	return nil
}

// Validate reports every invalid setting.
func (c Config) Validate() error {
	var errs []error
	if c.Mode != Quick && c.Mode != Full {
		errs = append(errs, fmt.Errorf("mode %q: want quick or full", c.Mode))
	}
	if len(c.Phases) == 0 {
		errs = append(errs, errors.New("no phase selected"))
	}
	for _, p := range c.Phases {
		if !slices.Contains(AllPhases, p) {
			errs = append(errs, fmt.Errorf("phase %q: want one of %s", p, strings.Join(AllPhases, ", ")))
		}
	}
	if c.QuietLoad < 0 || c.QuietWait < 0 {
		errs = append(errs, errors.New("quiet load and wait: want ≥ 0"))
	}
	s := c.Sizes
	if s.ClaimSamples < 1 || s.FailoverRounds < 1 || s.FailoverSessions < 1 || s.HandoffRounds < 1 || s.HandoffSessions < 1 ||
		s.CostSessions < 1 || s.CostIdleSessions < 1 || s.CostWorkers < 1 || s.StopSamples < 1 || s.RebalanceSessions < 2 || s.RebalanceFeedRate <= 0 || s.RebalanceTimeout <= 0 || len(s.ReadsWorkers) == 0 || len(s.CapRuns) == 0 || len(s.DynSteps) == 0 {
		errs = append(errs, errors.New("sizes: every count must be positive"))
	}
	for _, r := range s.CapRuns {
		if r.Sessions < 1 || r.Sessions > 19500 || r.Rate <= 0 {
			errs = append(errs, fmt.Errorf("capacity run %d sessions at %v/s: want 1..19,500 sessions (the open-file limit is 20,000) and a positive rate", r.Sessions, r.Rate))
		}
	}
	if !slices.IsSorted(s.DynSteps) || s.DynSteps[len(s.DynSteps)-1] > 19500 {
		errs = append(errs, errors.New("dynalite steps: want increasing counts up to 19,500"))
	}
	if s.TPManySessions < 1 || s.TPManySessions > 19500 || s.TPManyRate <= 0 {
		errs = append(errs, fmt.Errorf("throughput: %d sessions at %v/s: want 1..19,500 sessions and a positive rate", s.TPManySessions, s.TPManyRate))
	}
	if s.CapWindow <= 0 || s.DynWindow <= 0 || s.CostWindow <= 0 || s.ReadsWindow <= 0 || s.TPWindow <= 0 {
		errs = append(errs, errors.New("measurement windows: want > 0"))
	}
	return errors.Join(errs...)
}

// runner runs the phases of one Config.
type runner struct {
	cfg Config
	sz  Sizes
	log zerolog.Logger
	rep *Report
}

// Run runs the selected phases and writes the report. A phase that fails
// is reported as such and the others still run; Run returns an error when
// any phase failed or the report could not be written.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench config: %w", err)
	}
	for _, b := range []string{cfg.Bin.Streamer, cfg.Bin.MemStreamer, cfg.Bin.Ingest, cfg.Bin.Feed} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("bench: %s missing (make bench builds it): %w", b, err)
		}
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return nil, fmt.Errorf("bench work dir: %w", err)
	}
	r := &runner{cfg: cfg, sz: cfg.Sizes, log: cfg.Log, rep: &Report{
		Mode: cfg.Mode, Invocation: cfg.Invocation, Started: time.Now().UTC(), Errors: map[string]string{},
		Sizes: cfg.Sizes.Describe(),
	}}
	if cfg.Merge {
		prev, err := readReport(cfg.OutJSON)
		if err != nil {
			return nil, fmt.Errorf("bench -merge: %w", err)
		}
		if prev.Mode != cfg.Mode {
			return nil, fmt.Errorf("bench -merge: %s holds a %s run, not %s", cfg.OutJSON, prev.Mode, cfg.Mode)
		}
		return runMerged(ctx, r, prev)
	}
	r.rep.Machine = ReadMachine(ctx, cfg.Root)
	r.rep.LoadBefore = ReadLoad()
	if cfg.QuietLoad > 0 {
		waited, quiet := WaitQuiet(ctx, cfg.QuietLoad, cfg.QuietWait, func(f string, a ...any) { r.log.Info().Msgf(f, a...) })
		r.rep.Quiet = &QuietWait{Threshold: cfg.QuietLoad, Waited: waited.Round(time.Second).String(), Quiet: quiet}
	}
	r.rep.LoadStart = ReadLoad()
	ran, failed := r.runPhases(ctx)
	r.rep.Finished = time.Now().UTC()
	r.rep.LoadEnd = ReadLoad()
	if ran == 0 {
		// Interrupted before any phase (e.g. while waiting for a quiet
		// machine): keep the previous report.
		return r.rep, fmt.Errorf("bench interrupted before any phase: %w", ctx.Err())
	}
	if err := r.write(); err != nil {
		return r.rep, err
	}
	if ctx.Err() != nil {
		return r.rep, fmt.Errorf("bench interrupted: %w", ctx.Err())
	}
	if len(failed) > 0 {
		return r.rep, fmt.Errorf("bench: phase(s) %s failed (see the report)", strings.Join(failed, ", "))
	}
	return r.rep, nil
}

// runPhases runs the selected phases in order (until ctx ends), recording
// each failure in the report; it returns how many ran and which failed.
func (r *runner) runPhases(ctx context.Context) (ran int, failed []string) {
	phases := r.phases()
	for _, name := range AllPhases {
		if !slices.Contains(r.cfg.Phases, name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		delete(r.rep.Errors, name) // a merged report's earlier failure of it
		r.log.Info().Str("phase", name).Str("load", ReadLoad().String()).Msg("phase starting")
		start := time.Now()
		ran++
		if err := phases[name](ctx); err != nil {
			r.rep.Errors[name] = err.Error()
			failed = append(failed, name)
			r.log.Error().Err(err).Str("phase", name).Msg("phase failed")
		}
		r.log.Info().Str("phase", name).Dur("took", time.Since(start).Round(time.Second)).Msg("phase done")
	}
	return ran, failed
}

// phases are the phase functions by name.
func (r *runner) phases() map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		PhaseMicro: r.micro, PhaseClaim: r.claim, PhaseFailover: r.failover, PhaseHandoff: r.handoff,
		PhaseStop: r.stop, PhaseRebalance: r.rebalance, PhaseCost: r.cost, PhaseReads: r.reads, PhaseCapacity: r.capacity, PhaseDynalite: r.dynalite,
		PhaseThroughput: r.throughput,
	}
}

// runMerged runs cfg's phases into prev, a report read back, and rewrites
// it: the other phases' figures stay as they were measured.
func runMerged(ctx context.Context, r *runner, prev *Report) (*Report, error) {
	fresh := r.rep
	r.rep = prev
	if r.rep.Errors == nil {
		r.rep.Errors = map[string]string{}
	}
	m := ReadMachine(ctx, r.cfg.Root)
	rerun := Rerun{Phases: r.cfg.Phases, Invocation: fresh.Invocation, Started: fresh.Started, Commit: m.Commit}
	_, failed := r.runPhases(ctx)
	rerun.Finished = time.Now().UTC()
	// An earlier re-run of only these phases no longer stands for any figure.
	r.rep.Reruns = slices.DeleteFunc(r.rep.Reruns, func(x Rerun) bool {
		return !slices.ContainsFunc(x.Phases, func(p string) bool { return !slices.Contains(r.cfg.Phases, p) })
	})
	r.rep.Reruns = append(r.rep.Reruns, rerun)
	if err := r.write(); err != nil {
		return r.rep, err
	}
	if len(failed) > 0 {
		return r.rep, fmt.Errorf("bench: phase(s) %s failed (see the report)", strings.Join(failed, ", "))
	}
	return r.rep, ctx.Err()
}

func readReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &rep, nil
}

// phaseCommand is the command that reruns one phase.
func (r *runner) phaseCommand(name string) string {
	return fmt.Sprintf("bin/bench -mode %s -only %s", r.cfg.Mode, name)
}

// begin returns the phase header, its load and start time filled in.
func (r *runner) begin(name string, settings map[string]string) Phase {
	return Phase{Command: r.phaseCommand(name), Started: time.Now().UTC(), LoadStart: ReadLoad(), Settings: settings}
}

// end fills the phase's end.
func (p *Phase) end() {
	p.Seconds = time.Since(p.Started).Round(100 * time.Millisecond).Seconds()
	p.LoadEnd = ReadLoad()
}

func (r *runner) write() error {
	if r.cfg.OutJSON != "-" {
		b, err := json.MarshalIndent(r.rep, "", "  ")
		if err != nil {
			return fmt.Errorf("report json: %w", err)
		}
		if err := os.WriteFile(r.cfg.OutJSON, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("report json: %w", err)
		}
	}
	if r.cfg.OutMD != "-" {
		if err := os.WriteFile(r.cfg.OutMD, []byte(Render(r.rep)), 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}
