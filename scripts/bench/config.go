// The run's configuration: the modes and their sizes, the phases, the
// binaries, the worker defaults every lease phase runs with, and Validate.

package bench

import (
	"errors"
	"fmt"
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

// Phase names (phase.go registers the phases in the order they run).
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
	// PhaseStandbyMem: one worker's hot standbys against the bare client
	// on the same feed with the same N (issue 39's memory goal).
	PhaseStandbyMem = "standbymem"
	// PhaseTLS: a burst of claims on ws:// and wss:// (with and without
	// TLS session resumption): the handshake's CPU per session (issue 27).
	PhaseTLS      = "tls"
	PhaseDynalite = "dynalite"
	// PhaseThroughput: one session as fast as the feed pushes into each
	// sink, with 15 ms added to every sink request, and many sessions into
	// sqs batched (issue 16).
	PhaseThroughput = "throughput"
	// PhaseBill: issue 38's three workloads through the sqs, kinesis and
	// stdout sinks, counted as AWS bills them and priced per 1,000
	// sessions-month.
	PhaseBill = "bill"
)

// Binaries are the programs the driver runs.
type Binaries struct {
	Streamer    string // bin/streamer (the shipped worker: the lease phases, cost and dynalite)
	MemStreamer string // bin/memstreamer (the capacity runs' worker on the in-memory store)
	BareClient  string // bin/bareclient (the capacity runs' bare coder/websocket reference)
	Ingest      string // bin/ingest-local
	Feed        string // bin/feed (through devstack for the lease phases; on its own for the capacity runs)
	Model       string // bin/dynamodel (the DynamoDB model, for the ModelPhases' second run)
}

// CapRun is one capacity run of the memory store.
type CapRun struct {
	Sessions int     `json:"sessions"`
	Rate     float64 `json:"rate"` // messages/s per session; MaxFeedRate: as fast as the feed pushes
	// PayloadBytes pads every message (bin/feed -payload-bytes; 0: the
	// feed's ~60 B messages).
	PayloadBytes int `json:"payload_bytes,omitempty"`
	// Bare: the worker is set beside the bare reference client
	// (bin/bareclient) on the same feed with the same N, one after the
	// other, on wss and on ws (ws only with -plain-ws).
	Bare bool `json:"bare,omitempty"`
	// Env is added to the worker's environment (e.g. GOGC=50 for a lever).
	Env map[string]string `json:"env,omitempty"`
}

// AudioPayloadBytes pads the feed's messages to about 640 B (59 B of
// fields and a 5-digit seq around the pad): a 20 ms audio frame.
const AudioPayloadBytes = 576

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

	// TLSClaimSessions are the sessions of each claim burst of the tls
	// phase.
	TLSClaimSessions int

	ClaimSamples     int
	ClaimWarmup      int
	ClaimFeedRate    float64
	ReconcileSpacing time.Duration // mean gap between reconcile-path starts

	FailoverRounds, FailoverSessions int
	// The failover phase's hot standby run (handover_standby.go):
	// StandbyRounds rounds of StandbySessions sessions on sources that
	// cannot replay, half with a standby and half without (the control
	// group); StandbyCostWindow is the steady window, standbys held,
	// before each kill in which their cost is measured (0: no standby
	// run).
	StandbyRounds, StandbySessions int
	StandbyCostWindow              time.Duration
	HandoffRounds, HandoffSessions int
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

	// The standbymem run (capacity_standby.go): StandbyMemSessions
	// sessions with a hot standby on one worker, their standbys on
	// another (the holder), then the bare client with as many
	// connections; each settles StandbyMemSettle and is measured over
	// StandbyMemWindow.
	StandbyMemSessions int
	StandbyMemSettle   time.Duration
	StandbyMemWindow   time.Duration

	DynSteps  []int
	DynSettle time.Duration
	DynWindow time.Duration

	// The throughput runs: settle and window of each, and the many-session
	// run's sessions and rate.
	TPSettle, TPWindow time.Duration
	TPManySessions     int
	// BillSessions are the bill phase's sessions per workload (exchange
	// feed, transcript, market depth: BillWorkloads), on one worker;
	// BillWindow its counted window. Packs across sessions fill with the
	// messages one worker carries, so the sizes are a worker's load
	// toward what a task holds (the exchange feed 5,000 of the ~13,000 a
	// task packed as measured holds; market depth 150 of 1,000), within
	// what the engines here take unpacked.
	BillSessions [3]int
	BillWindow   time.Duration
	TPManyRate   float64
}

// SizesFor returns the sizes of mode.
func SizesFor(m Mode) Sizes {
	if m == Full {
		return Sizes{
			BenchTime:    "1s",
			ClaimSamples: 300, ClaimWarmup: 5, ClaimFeedRate: 100, ReconcileSpacing: 100 * time.Millisecond,
			FailoverRounds: 3, FailoverSessions: 100,
			StandbyRounds: 3, StandbySessions: 100, StandbyCostWindow: 65 * time.Second,
			HandoffRounds: 3, HandoffSessions: 100,
			HandoffSmallRounds: 20, HandoffSmallSessions: 10,
			LeaseFeedRate: 5, HandoffFeedRate: 50,
			StopSamples:       200,
			RebalanceSessions: 2000, RebalanceFeedRate: 2, RebalanceObserve: 30 * time.Second, RebalanceTimeout: 5 * time.Minute,
			CostSessions: 10000, CostIdleSessions: 2000, CostWorkers: 2, CostWindow: 5 * time.Minute,
			ReadsWorkers: []int{10, 100}, ReadsWindow: 2 * time.Minute,
			CapRuns: []CapRun{{Sessions: 19000, Rate: 1, Bare: true}, {Sessions: 1000, Rate: 50, PayloadBytes: AudioPayloadBytes, Bare: true},
				{Sessions: 1, Rate: MaxFeedRate, Bare: true},
				{Sessions: 19000, Rate: 1, Env: map[string]string{"GOGC": "100"}}}, // Go's default, against the binary's 50
			CapSettle: 20 * time.Second, CapWindow: 60 * time.Second, CPUProfile: 15 * time.Second,
			StandbyMemSessions: 5000, StandbyMemSettle: 5 * time.Second, StandbyMemWindow: 15 * time.Second, // ≤ 3 min (placing 5,000 standbys took 60–90 s one at a time, before the owner kept 8 placements in flight)
			TLSClaimSessions: 1000,
			DynSteps:         []int{2000, 3000, 4000, 5000, 6000, 8000, 10000, 13000, 16000, 19000},
			DynSettle:        10 * time.Second, DynWindow: 20 * time.Second,
			TPSettle: 5 * time.Second, TPWindow: 30 * time.Second, TPManySessions: 1000, TPManyRate: 10,
			BillSessions: [3]int{5000, 500, 150}, BillWindow: 30 * time.Second,
		}
	}
	return Sizes{
		BenchTime:    "100ms",
		ClaimSamples: 200, ClaimWarmup: 5, ClaimFeedRate: 100, ReconcileSpacing: 100 * time.Millisecond,
		FailoverRounds: 2, FailoverSessions: 100,
		StandbyRounds: 1, StandbySessions: 40, StandbyCostWindow: 35 * time.Second,
		HandoffRounds: 2, HandoffSessions: 100,
		LeaseFeedRate: 5, HandoffFeedRate: 50,
		StopSamples:       30,
		RebalanceSessions: 400, RebalanceFeedRate: 2, RebalanceObserve: 15 * time.Second, RebalanceTimeout: 4 * time.Minute,
		CostSessions: 1000, CostIdleSessions: 200, CostWorkers: 2, CostWindow: time.Minute,
		ReadsWorkers: []int{10, 100}, ReadsWindow: 30 * time.Second,
		CapRuns: []CapRun{{Sessions: 2000, Rate: 1, Bare: true}, {Sessions: 200, Rate: 50, PayloadBytes: AudioPayloadBytes, Bare: true},
			{Sessions: 1, Rate: MaxFeedRate, Bare: true}},
		CapSettle: 5 * time.Second, CapWindow: 12 * time.Second, CPUProfile: 5 * time.Second,
		StandbyMemSessions: 1000, StandbyMemSettle: 5 * time.Second, StandbyMemWindow: 10 * time.Second,
		TLSClaimSessions: 200,
		DynSteps:         []int{2000},
		DynSettle:        5 * time.Second, DynWindow: 15 * time.Second,
		TPSettle: 3 * time.Second, TPWindow: 10 * time.Second, TPManySessions: 1000, TPManyRate: 10,
		BillSessions: [3]int{100, 50, 10}, BillWindow: 10 * time.Second,
	}
}

// Describe says what the sizes are, for the report's header.
func (s Sizes) Describe() string {
	var caps []string
	for _, c := range s.CapRuns {
		x := c.Label()
		if c.Bare {
			x += " beside the bare client"
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
	return fmt.Sprintf("claim latency %d samples per path; failover %d rounds × %d sessions, and %d × %d on sources without replay (half with a hot standby); handoff %s; stop %d samples per path; rebalance %s sessions from 2 to 4 workers; cost %s sessions at 1 msg/s and %s idle ones, %d workers each, steady window %s; reads %s workers over %s each; capacity (memory store) %s; standby memory %s standbys; dynalite steps %s sessions; throughput windows of %s, %s sessions × %g msg/s; microbenchmarks -benchtime %s",
		s.ClaimSamples, s.FailoverRounds, s.FailoverSessions, s.StandbyRounds, s.StandbySessions, handoff, s.StopSamples, thousands(s.RebalanceSessions), thousands(s.CostSessions), thousands(s.CostIdleSessions), s.CostWorkers, s.CostWindow,
		joinInts(s.ReadsWorkers, " and "), s.ReadsWindow, strings.Join(caps, ", "), thousands(s.StandbyMemSessions), strings.Join(steps, ", "), s.TPWindow, thousands(s.TPManySessions), s.TPManyRate, s.BenchTime)
}

// Label names the run: its size, its payload and its environment.
func (c CapRun) Label() string {
	x := fmt.Sprintf("%s × %g msg/s", thousands(c.Sessions), c.Rate)
	if c.Rate >= MaxFeedRate {
		x = fmt.Sprintf("%s × as fast as the feed pushes", thousands(c.Sessions))
	}
	if c.PayloadBytes > 0 {
		x += fmt.Sprintf(" of ~%d B", FeedMessageBytes(c.PayloadBytes, 5))
	}
	return x + envLabel(c.Env)
}

// FeedMessageBytes is the size of a bin/feed message to a capacity session
// ({"seq":N,"session":"cap-000123","ts":MS[,"pad":"…"]}) with a seq of
// seqDigits digits and payload bytes of padding.
func FeedMessageBytes(payload, seqDigits int) int {
	n := len(`{"seq":`) + seqDigits + len(`,"session":"`) + len("cap-000000") + len(`","ts":`) + 13 + len(`}`)
	if payload > 0 {
		n += len(`,"pad":""`) + payload
	}
	return n
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
	// BillLabel names the bill phase's pair of figures ("<label>,
	// unpacked", "<label>, packed"; "": BillUnpacked and BillPacked, the
	// pair the goals judge); a merged run with another label keeps the
	// other figures beside them.
	// BillEnv is added to the bill runs' worker environment (e.g. a
	// packing setting).
	BillLabel string
	BillEnv   map[string]string
	// Model is the DynamoDB model's profile (testkit/dynamodel) the
	// ModelPhases run on a second time ("": dynalite only).
	Model string
	// PlainWS: the capacity runs' feed and the lease phases' stacks serve
	// plain ws:// (the default is wss:// with a per-run CA, and the
	// capacity side-by-side runs on ws:// too).
	PlainWS bool
	Log     zerolog.Logger
}

// DefaultConfig returns the configuration of mode with every phase.
func DefaultConfig(m Mode) Config {
	return Config{Mode: m, Phases: AllPhases, Sizes: SizesFor(m), QuietWait: 20 * time.Minute, Model: "aws", Log: zerolog.Nop()}
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
	def(&c.Bin.BareClient, "bareclient")
	def(&c.Bin.Ingest, "ingest-local")
	def(&c.Bin.Model, "dynamodel")
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
		if r.Sessions < 1 || r.Sessions > 19500 || r.Rate <= 0 || r.Rate > MaxFeedRate {
			errs = append(errs, fmt.Errorf("capacity run %d sessions at %v/s: want 1..19,500 sessions (the open-file limit is 20,000) and a rate in (0, %d]", r.Sessions, r.Rate, MaxFeedRate))
		}
		if r.PayloadBytes < 0 || r.PayloadBytes > 1<<20 {
			errs = append(errs, fmt.Errorf("capacity run payload %d B: want 0..1 MiB", r.PayloadBytes))
		}
	}
	if s.StandbyRounds < 0 || (s.StandbyRounds > 0 && (s.StandbySessions < 2 || s.StandbyCostWindow <= 0)) {
		errs = append(errs, fmt.Errorf("failover standby run: %d rounds × %d sessions, window %s: want 0 rounds, or sessions ≥ 2 (half of them the control group) and a window > 0", s.StandbyRounds, s.StandbySessions, s.StandbyCostWindow))
	}
	if s.StandbyMemSessions < 1 || s.StandbyMemSessions > 9500 || s.StandbyMemSettle < 0 || s.StandbyMemWindow <= 0 {
		errs = append(errs, fmt.Errorf("standbymem: %d sessions, settle %s, window %s: want 1..9,500 sessions (two connections each at the one feed, whose open-file limit is 20,000), a settle ≥ 0 and a window > 0", s.StandbyMemSessions, s.StandbyMemSettle, s.StandbyMemWindow))
	}
	if !slices.IsSorted(s.DynSteps) || s.DynSteps[len(s.DynSteps)-1] > 19500 {
		errs = append(errs, errors.New("dynalite steps: want increasing counts up to 19,500"))
	}
	if s.TPManySessions < 1 || s.TPManySessions > 19500 || s.TPManyRate <= 0 {
		errs = append(errs, fmt.Errorf("throughput: %d sessions at %v/s: want 1..19,500 sessions and a positive rate", s.TPManySessions, s.TPManyRate))
	}
	for i, n := range s.BillSessions {
		if n < 1 || n > 19500 {
			errs = append(errs, fmt.Errorf("bill: %d sessions for %s: want 1..19,500", n, BillWorkloads[i].Name))
		}
	}
	if s.CapWindow <= 0 || s.DynWindow <= 0 || s.CostWindow <= 0 || s.ReadsWindow <= 0 || s.TPWindow <= 0 || s.BillWindow <= 0 {
		errs = append(errs, errors.New("measurement windows: want > 0"))
	}
	return errors.Join(errs...)
}

// defaultTimings are the worker defaults every lease phase runs with.
const defaultTimings = "defaults: liveness TTL 10 s, heartbeat every 1 s (watchers read every 500 ms), checkpoints every 60 s when advanced, safety margin 2 s, reconcile every 5 s ± 20 %, 50 claims/s per worker, long poll 20 s"

// Default lease timings (lease.DefaultConfig, streamer.DefaultConfig).
const (
	DefaultHeartbeatEvery  = time.Second
	DefaultCheckpointEvery = time.Minute
	DefaultTTL             = 10 * time.Second
	// DefaultRenewEvery is what a steady phase waits for the per-session
	// writes to reach their rate: since issue 13 one heartbeat (1 s), so
	// 2 × it is short; the cost phase waits a checkpoint interval instead.
	DefaultRenewEvery = DefaultHeartbeatEvery
	DefaultReconcile  = 5 * time.Second
	DefaultClaimRate  = 50
	// DefaultShutdownDeadline and DefaultShutdownInFlight: the graceful
	// shutdown's bound and how many sessions it hands off at once.
	DefaultShutdownDeadline = 30 * time.Second
	DefaultShutdownInFlight = 4
)
