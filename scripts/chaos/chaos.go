// A run's configuration (Config): its defaults (`make chaos`, the short run,
// the demo) and what makes it valid.

package chaos

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// Config is one chaos run.
type Config struct {
	Stack devstack.Config
	// Plan is PlanSeeded (the schedule drawn from Seed) or PlanDemo.
	Plan     string
	Seed     int64
	Duration time.Duration // the fault schedule's length (the first round always runs whole)
	Sessions int           // sessions started at the beginning (churn adds more)
	// Gap is the range of the quiet time before each fault.
	GapMin, GapMax time.Duration
	// FeedPingEvery / FeedPingTimeout: the source's keepalive (a frozen
	// client's connection is closed), as real sources have.
	FeedPingEvery, FeedPingTimeout time.Duration
	// SwitchPolicy switches the feed from kick-older to refuse-newer half
	// way through the schedule (both one-connection policies are exercised).
	SwitchPolicy bool
	// ReconnectMax caps the workers' reconnect backoff (the source-refuse
	// fault's recovery bound derives from it).
	ReconnectMax time.Duration
	// ClockOffsetMax bounds the clock-offset fault's offset (drawn in
	// 0.6..1 × it, either sign).
	ClockOffsetMax time.Duration
	// Kinds restricts the schedule to these fault kinds (empty: all of
	// them); for focusing on one behaviour, never for the reference run.
	Kinds []string
	// PlannedEvery starts every PlannedEvery-th session (in the order of
	// their first start, offset by the seed) with planned reconnects:
	// max_connection_age PlannedAge, reconnect_on the feed's shutdown
	// notice ({"e":"serverShutdown"}) and switch_timeout PlannedSwitch, so
	// that make-before-break switches (two connections of one tenure for a
	// moment) happen throughout the run; 0: none.
	PlannedEvery  int
	PlannedAge    time.Duration
	PlannedSwitch time.Duration
	// StandbyEvery starts sessions on a source that cannot replay (by turns
	// seq_mode none, and the seq field without resume): every
	// StandbyEvery-th session (by first start, offset by the seed, a
	// planned one excepted) with a hot standby ("standby":{"enabled":true},
	// checkpoint_every the workers' checkpoint interval), every
	// 2 × StandbyEvery-th (another offset) without, the control group; the
	// feed admits standby connections (Stack.AllowStandby, set from
	// this at the run; without standby sessions, off). 0: none.
	// run_standby.go, check_standby.go.
	StandbyEvery int
	// SinkRefusalSkip starts every session with on_sink_refusal "skip" (a
	// permanently refused message is skipped, counted and logged by the
	// worker; the judge excuses exactly the logged seqs). Without it (or
	// when the API does not know the field) no permanent refusal is
	// injected: with "fail" a refused session would end FAILED.
	SinkRefusalSkip bool
	// OutDir receives result.json, report.md and timeline.svg.
	OutDir string
	// Out receives progress lines.
	Out io.Writer
}

// Fault plans (Config.Plan).
const (
	PlanSeeded = "seeded" // `make chaos` and the test's short run: drawn from the seed
	PlanDemo   = "demo"   // `make demo`: a fixed plan (demoSteps), shorter
)

// DefaultConfig is `make chaos`: 10 minutes, 4 workers, 48 sessions;
// liveness TTL 4 s, heartbeat every 1 s (watchers read every 500 ms),
// checkpoints every 2 s (when advanced), reconcile every 2 s, safety margin
// 1 s, a rebalancing round every 2 s moving sessions held 10 s or more, a
// clock offset of up to 2 s; the feed at 5 messages/s per session,
// pinging its clients every 500 ms (a client silent for 750 ms is dropped),
// reading the workers' tenure header (devstack.TenureHeader: a planned
// reconnect's two connections of one tenure are no violation at the feed);
// every third session with planned reconnects (max_connection_age 4 s,
// reconnect_on the shutdown notice, switch_timeout 3 s); every fourth of
// the others with a hot standby on a source that cannot replay, every
// eighth on such a source without (the control group). Every worker slot
// reaches DynamoDB through its own proxy (the partition fault freezes one).
func DefaultConfig() Config {
	sc := devstack.DefaultConfig()
	sc.Ports = devstack.Ports{}
	sc.InMemory = false // the DynamoDB engine is stopped and started again: keep its data on disk
	sc.Workers = 4
	sc.Queue = "wsfleet-chaos"
	sc.Worker.LeaseTTL = 4 * time.Second
	sc.Worker.HeartbeatEvery = time.Second
	sc.Worker.CheckpointEvery = 2 * time.Second
	sc.Worker.ReconcileEvery = 2 * time.Second
	sc.DynamoProxies = true
	sc.Worker.SafetyMargin = time.Second
	sc.Worker.ShutdownDeadline = 10 * time.Second
	sc.Worker.QueueWait = time.Second
	sc.Worker.RebalanceEvery = 2 * time.Second
	sc.Worker.MinHold = 10 * time.Second
	sc.Worker.LogLevel = "info"
	sc.FeedRate = 5
	sc.FeedMode = feed.ModeKickOlder
	// The workers name their tenure on every dial, the feed reads it.
	sc.TenureHeader = devstack.TenureHeader
	sc.KeepSinkRecords = false // the harness keeps its own, stamped on arrival
	sc.Sink = devstack.SinkSQS // the batched sqs sink on a second fauxqs, through the sink fault proxy
	sc.DynamoModel = "aws"     // DynamoDB as it behaves (testkit/dynamodel): latency, index lag, throttling, ambiguous errors
	return Config{
		Stack: sc, Plan: PlanSeeded, Seed: 1, Duration: 10 * time.Minute, Sessions: 48,
		GapMin: 2 * time.Second, GapMax: 6 * time.Second,
		FeedPingEvery: 500 * time.Millisecond, FeedPingTimeout: 750 * time.Millisecond,
		SwitchPolicy: true, ReconnectMax: 2 * time.Second, ClockOffsetMax: 2 * time.Second,
		PlannedEvery: 3, PlannedAge: 4 * time.Second, PlannedSwitch: 3 * time.Second,
		StandbyEvery:    4,
		SinkRefusalSkip: true, Out: os.Stdout,
	}
}

// ShortConfig is the run of `make test`: one round of every fault kind with
// 3 workers and 16 sessions, shorter gaps (about 100 s in all); the demo
// plan's steps are part of it (NewPlan).
func ShortConfig() Config {
	c := DefaultConfig()
	c.Stack.Workers = 3
	c.Sessions = 16
	c.Duration = 0 // one round
	c.GapMin, c.GapMax = 1500*time.Millisecond, 3*time.Second
	return c
}

// DemoConfig is `make demo`: the demo plan on ShortConfig's stack with 24
// sessions, the feed kick-older throughout (about 45 s).
func DemoConfig() Config {
	c := ShortConfig()
	c.Plan, c.Sessions, c.SwitchPolicy = PlanDemo, 24, false
	return c
}

// Validate reports every invalid setting.
func (c Config) Validate() error {
	var errs []error
	w := c.Stack.Worker
	if c.Stack.Workers < 3 || c.Stack.Workers > 16 {
		errs = append(errs, fmt.Errorf("workers %d: want 3..16 (a fault needs survivors)", c.Stack.Workers))
	}
	if c.Sessions < 1 || c.Sessions > 2000 {
		errs = append(errs, fmt.Errorf("sessions %d: want 1..2000", c.Sessions))
	}
	if c.Plan != PlanSeeded && c.Plan != PlanDemo {
		errs = append(errs, fmt.Errorf("plan %q: want %s or %s", c.Plan, PlanSeeded, PlanDemo))
	}
	if c.Duration < 0 {
		errs = append(errs, fmt.Errorf("duration %v: want >= 0", c.Duration))
	}
	if c.GapMin <= 0 || c.GapMax < c.GapMin {
		errs = append(errs, fmt.Errorf("gap %v..%v: want 0 < min <= max", c.GapMin, c.GapMax))
	}
	if w.LeaseTTL <= 0 || w.HeartbeatEvery <= 0 || w.CheckpointEvery <= 0 || w.ReconcileEvery <= 0 || w.SafetyMargin <= 0 || w.ShutdownDeadline <= 0 ||
		w.RebalanceEvery <= 0 || w.MinHold <= 0 {
		errs = append(errs, errors.New("the harness states every lease timing: set TTL, heartbeat, checkpoint, reconcile, safety margin, shutdown deadline, rebalancing round and minimum hold"))
	}
	if c.ClockOffsetMax < 0 {
		errs = append(errs, fmt.Errorf("clock offset max %v: want >= 0", c.ClockOffsetMax))
	}
	if !c.Stack.DynamoProxies && (len(c.Kinds) == 0 || slices.Contains(c.Kinds, KindPartition)) {
		errs = append(errs, errors.New("the partition fault needs a DynamoDB proxy per worker (Stack.DynamoProxies)"))
	}
	if c.FeedPingEvery < 0 || (c.FeedPingEvery > 0 && c.FeedPingTimeout <= 0) {
		errs = append(errs, errors.New("feed ping: every >= 0, and a timeout > 0 when pinging"))
	}
	if c.FeedPingEvery > 0 && c.FeedPingEvery+c.FeedPingTimeout >= w.LeaseTTL {
		errs = append(errs, fmt.Errorf("feed ping every %v + timeout %v: want below the liveness TTL %v (a zombie's socket must be gone before its sessions can move)",
			c.FeedPingEvery, c.FeedPingTimeout, w.LeaseTTL))
	}
	if c.PlannedEvery < 0 || (c.PlannedEvery > 0 && (c.PlannedAge < time.Second || c.PlannedSwitch < time.Second)) {
		errs = append(errs, fmt.Errorf("planned reconnects every %d session(s), age %v, switch timeout %v: want every >= 0, and with it an age and a switch timeout >= 1s", c.PlannedEvery, c.PlannedAge, c.PlannedSwitch))
	}
	if c.StandbyEvery < 0 || c.StandbyEvery == 1 {
		errs = append(errs, fmt.Errorf("standby sessions every %d session(s): want 0 (none) or >= 2 (the control group needs sessions too)", c.StandbyEvery))
	}
	if c.StandbyEvery > 0 && c.Stack.TenureHeader == "" {
		errs = append(errs, errors.New("standby sessions need the tenure header (Stack.TenureHeader): the feed tells a standby connection by it, and would take it for a second owner"))
	}
	if c.PlannedEvery > 0 && c.Stack.TenureHeader == "" {
		errs = append(errs, errors.New("planned reconnects need the tenure header (Stack.TenureHeader): the feed would take their overlaps for two owners and kick or refuse"))
	}
	if c.ReconnectMax < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("reconnect max %v: want >= 100ms", c.ReconnectMax))
	}
	for _, k := range c.Kinds {
		if !slices.Contains(AllKinds, k) {
			errs = append(errs, fmt.Errorf("fault kind %q: want one of %v", k, AllKinds))
		}
		if isSinkKind(k) && !c.awsSink() {
			errs = append(errs, fmt.Errorf("fault kind %q needs an AWS sink (sqs, sqs-fifo or kinesis), not %q", k, c.Stack.Sink))
		}
		if isModelKind(k) && c.Stack.DynamoModel == "" {
			errs = append(errs, fmt.Errorf("fault kind %q needs the DynamoDB model (Stack.DynamoModel)", k))
		}
		if (k == KindSinkFreezeDynamo || k == KindSinkRefuseDynamo) && !c.Stack.DynamoProxies {
			errs = append(errs, fmt.Errorf("fault kind %q needs a DynamoDB proxy per worker (Stack.DynamoProxies)", k))
		}
	}
	if c.Stack.InMemory {
		errs = append(errs, errors.New("the DynamoDB engine is restarted during the run: it must keep its data on disk (InMemory false)"))
	}
	if c.OutDir == "" {
		errs = append(errs, errors.New("out dir: empty"))
	}
	if c.Out == nil {
		errs = append(errs, errors.New("out: nil"))
	}
	if err := c.Stack.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// awsSink reports whether the workers sink to a destination engine (sqs,
// kinesis) rather than their stdout.
func (c Config) awsSink() bool { return isAWSSink(c.Stack.Sink) }

func isAWSSink(s string) bool {
	return s == devstack.SinkSQS || s == devstack.SinkSQSFIFO || s == devstack.SinkKinesis
}
