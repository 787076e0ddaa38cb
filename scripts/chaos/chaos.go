// A run's configuration (Config), the fault kinds, and the Settings and
// Bounds the checks hold it to.

package chaos

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/lease"
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

// Fault kinds (the schedule's steps).
const (
	KindKill        = "kill-9"
	KindZombie      = "zombie"
	KindRolling     = "rolling-restart"
	KindDynamoDown  = "dynamodb-down"
	KindSQSDown     = "sqs-down"
	KindSourceDrop  = "source-drop"
	KindRefuse      = "source-refuse"
	KindSchedule    = "source-schedule" // the source ends connections at a max age, a shutdown notice 1 s before
	KindChurn       = "churn"
	KindClockOffset = "clock-offset"
	KindPartition   = "dynamodb-partition" // one worker reaches its sources but not DynamoDB
	KindScaleOut    = "scale-out"          // one more worker joins: the fleet rebalances toward it
	KindScaleIn     = "scale-in"           // one worker leaves for good (SIGTERM, not restarted)
	KindPolicy      = "feed-policy"        // not a fault: the source's policy switch

	// Sink faults (the sink fault proxy, scripts/sinkfault; an AWS sink only).
	KindSinkLatency      = "sink-latency"         // latency spikes on the sink's requests (held requests, held answers)
	KindSinkRefuse       = "sink-refuse"          // a share of the sink's entries refused, transient and permanent
	KindSinkFreeze       = "sink-freeze"          // every sink request held for 2 × TTL (connections open)
	KindSinkFreezeDynamo = "sink-freeze+dynamodb" // one worker's sink and DynamoDB path frozen past the crash bound: declared dead
	KindSinkRefuseDynamo = "sink-refuse+dynamodb" // refusals while every worker's DynamoDB path is frozen past TTL − margin: trust lapses, then heartbeats succeed again
	KindSourcePoison     = "source-poison"        // some sessions' sources send invalid UTF-8 and characters SQS refuses for a while (judged at the destination)

	// DynamoDB model faults (testkit/dynamodel's controls; a stack on the
	// model only).
	KindIndexLag  = "dynamodb-index-lag" // the indexes (and eventually consistent reads) held a lag behind, and a kill -9 during it
	KindThrottle  = "dynamodb-throttle"  // the table held at a small fraction of its throughput, one session's key hot
	KindAmbiguous = "dynamodb-ambiguous" // a storm of writes answered 500 before or after applying, or their replies dropped
)

// ModelKinds are the fault kinds that need the DynamoDB model.
var ModelKinds = []string{KindIndexLag, KindThrottle, KindAmbiguous}

// isModelKind reports whether k is one of ModelKinds.
func isModelKind(k string) bool { return slices.Contains(ModelKinds, k) }

// SinkKinds are the fault kinds that need an AWS sink (its fault proxy, or
// the destination read back: source-poison's payloads).
var SinkKinds = []string{KindSinkLatency, KindSinkRefuse, KindSinkFreeze, KindSinkFreezeDynamo, KindSinkRefuseDynamo, KindSourcePoison}

// isSinkKind reports whether k is one of SinkKinds.
func isSinkKind(k string) bool { return slices.Contains(SinkKinds, k) }

// AllKinds are the fault kinds, in the order the report lists them.
var AllKinds = []string{KindKill, KindZombie, KindRolling, KindDynamoDown, KindPartition, KindSQSDown, KindSourceDrop, KindRefuse, KindSchedule, KindChurn, KindClockOffset, KindScaleOut, KindScaleIn,
	KindSinkLatency, KindSinkRefuse, KindSinkFreeze, KindSinkFreezeDynamo, KindSinkRefuseDynamo, KindSourcePoison,
	KindIndexLag, KindThrottle, KindAmbiguous}

// Model fault settings: the lag of an index-lag episode (a kill -9 of a
// worker at its start: its sessions must be found though the indexes lag),
// the share of the table's warm throughput a throttling storm leaves and
// of a partition's the hot key keeps, and the shares of writes an
// ambiguous storm answers 500 before applying, 500 after applying, and
// drops after applying.
const (
	modelLag = 3 * time.Second
	// 0.5 % of 4,000 write units/s is 20/s: below what the chaos fleet
	// writes (a heartbeat per worker per second, 4–7 workers, and a
	// checkpoint per session every 2 s, 48–80 sessions), above what its
	// heartbeats need once the checkpoints yield (lease.CheckpointHold).
	throttleFraction = 0.005
	// 0.01 % of a partition's 1,000 write units/s: one write every 10 s,
	// on one session's item (its checkpoint written every 2 s).
	hotKeyFraction                          = 0.0001
	stormBefore, stormAfter, stormDropShare = 0.2, 0.2, 0.1
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

// Settings are what a run states: its scale and timings, and the bounds the
// checks hold it to (all derived from the timings).
type Settings struct {
	Seed            int64   `json:"seed"`
	DurationMs      int64   `json:"duration_ms"`
	Workers         int     `json:"workers"`
	Sessions        int     `json:"sessions"`
	FeedRate        float64 `json:"feed_rate"`
	FeedMode        string  `json:"feed_mode"`
	SwitchPolicy    bool    `json:"switch_policy"`
	FeedPingMs      int64   `json:"feed_ping_every_ms"`
	FeedPingTimeout int64   `json:"feed_ping_timeout_ms"`
	LeaseTTLMs      int64   `json:"lease_ttl_ms"` // the liveness TTL
	HeartbeatMs     int64   `json:"heartbeat_every_ms"`
	WatchMs         int64   `json:"watch_every_ms"` // watchers read the records they watch every heartbeat / 2
	CheckpointMs    int64   `json:"checkpoint_every_ms"`
	ReconcileMs     int64   `json:"reconcile_every_ms"`
	ClockOffsetMax  int64   `json:"clock_offset_max_ms"`
	SafetyMarginMs  int64   `json:"safety_margin_ms"`
	ShutdownMs      int64   `json:"shutdown_deadline_ms"`
	ReconnectMaxMs  int64   `json:"reconnect_max_ms"`
	RebalanceMs     int64   `json:"rebalance_every_ms"`
	MinHoldMs       int64   `json:"min_hold_ms"`
	// Sink is the workers' sink (stdout, sqs, kinesis); with an AWS sink
	// the judge reads the destination, not the workers' stdout.
	Sink string `json:"sink"`
	// SinkRequestTimeoutMs is the sink's request timeout: the worker's
	// default, half the safety margin (WSFLEET_SINK_REQUEST_TIMEOUT).
	SinkRequestTimeoutMs int64 `json:"sink_request_timeout_ms,omitempty"`
	// SinkRefusalSkip: sessions were started with on_sink_refusal "skip".
	SinkRefusalSkip bool `json:"sink_refusal_skip,omitempty"`
	// PlannedEvery, PlannedAgeMs, PlannedSwitchMs: every PlannedEvery-th
	// session was started with planned reconnects (Config.PlannedEvery);
	// TenureHeader is the handshake header naming the tenure ("": none,
	// and no planned overlap at the feed).
	PlannedEvery    int    `json:"planned_every,omitempty"`
	PlannedAgeMs    int64  `json:"planned_age_ms,omitempty"`
	PlannedSwitchMs int64  `json:"planned_switch_ms,omitempty"`
	TenureHeader    string `json:"tenure_header,omitempty"`
	// StandbyEvery: every StandbyEvery-th session was started with a hot
	// standby on a source that cannot replay, every 2 × StandbyEvery-th
	// on such a source without (Config.StandbyEvery); StandbyOff says why
	// the sessions started without a standby after all (the API refused
	// the field), "" when they had one.
	StandbyEvery int    `json:"standby_every,omitempty"`
	StandbyOff   string `json:"standby_off,omitempty"`
	// TLS: the feed served wss:// (the stack's per-run CA); false: ws://.
	TLS bool `json:"tls"`
	// DynamoModel is the DynamoDB model's profile the stack ran on ("":
	// dynalite alone).
	DynamoModel string `json:"dynamo_model,omitempty"`
	Bounds      Bounds `json:"bounds"`
}

// destSink reports whether the deliveries were read from a destination
// (an AWS sink).
func (s Settings) destSink() bool { return isAWSSink(s.Sink) }

// Bounds are the recovery and closing deadlines the checks apply, with the
// margins they state.
type Bounds struct {
	// Crash: kill -9, SIGSTOP or a partition from DynamoDB → a newer tenure
	// delivers: TTL (the heartbeat counter stood still that long on a
	// watcher's clock) + one watch interval (the watcher's reads) +
	// CrashMargin.
	CrashMs       int64 `json:"crash_ms"`
	CrashMarginMs int64 `json:"crash_margin_ms"` // 1 s: the declaring watcher's takeover (claim, dial, first message)
	// Fence: no delivery under a tenure of a worker that cannot heartbeat
	// later than FenceMs after it lost DynamoDB (its trust deadline, last
	// successful heartbeat + TTL − safety margin, is earlier) + FenceSlack
	// (the sink line's way to the harness).
	FenceMs      int64 `json:"fence_ms"`
	FenceSlackMs int64 `json:"fence_slack_ms"`
	// Handoff: SIGTERM → another worker delivers: 1 s. A rebalancing
	// move (a graceful hand-off) is held to it too: its previous owner's
	// last delivery → the receiver's first.
	HandoffMs int64 `json:"handoff_ms"`
	// Balance: a worker joins → every running worker within ±10 % (or 2
	// sessions) of its fair share: the minimum hold (the sessions the
	// fleet claims meanwhile must age first) + 6 rounds (10 % of a
	// worker's sessions move per round) + 2 s (the joiner's start); on the
	// DynamoDB model one round more: a round plans from the fleet as the
	// by_worker_list index and eventually consistent reads show it, which
	// lag (p99 0.8 s, under a round) and may miss the joiner once.
	BalanceMs int64 `json:"balance_ms"`
	// Claim: start acknowledged → first delivery, also without SQS:
	// reconcile interval × 1.2 (its jitter) + 1 s.
	ClaimMs int64 `json:"claim_ms"`
	// Outage: DynamoDB back → every session delivers again: as Claim.
	OutageMs int64 `json:"outage_ms"`
	// Reconnect: source drop (or end of refusal, or a connection the
	// source closed at its max age) → delivering again: reconnect max +
	// 1 s.
	ReconnectMs int64 `json:"reconnect_ms"`
	// PlannedOverlap: the longest two connections of one tenure may be
	// open at once (a planned reconnect): the switch timeout (the new
	// connection is closed at it) + 1 s (its close handshake, a loaded
	// host).
	PlannedOverlapMs int64 `json:"planned_overlap_ms,omitempty"`
	// Stop: stop acknowledged → the source's connection closed, no
	// delivery after: one heartbeat interval (the owner reads its mailbox
	// on its next heartbeat, whichever worker the SQS stop reaches) +
	// 500 ms (the heartbeat call and the close handshake).
	StopMs int64 `json:"stop_ms"`
	// Replay: raw repeats one session may see across a crash or zombie
	// (what was accepted since the last checkpoint): rate × (checkpoint ×
	// 1.1 + 1 s) + 1; across a DynamoDB outage or partition (nothing can be
	// checkpointed until the worker fences itself): rate × (checkpoint ×
	// 1.1 + TTL − margin + 1 s) + 1.
	ReplayCrash  int64 `json:"replay_crash"`
	ReplayOutage int64 `json:"replay_outage"`
	// TrustDeadline: while the harness has a worker's DynamoDB path frozen
	// from F (dynalite frozen, its proxy frozen, SIGSTOP), its last
	// successful heartbeat was sent before F, so its trust deadline is
	// ≤ F + TTL − margin; a sink request ends by then + the request
	// timeout. Nothing of its tenures may reach the destination after
	// F + TrustDeadlineMs (TTL − margin + request timeout +
	// TrustTolMs: the proxy's stamp is taken when the destination's answer
	// reaches it, the engine's own stamp has 1 ms resolution).
	TrustDeadlineMs int64 `json:"trust_deadline_ms,omitempty"`
	TrustTolMs      int64 `json:"trust_tolerance_ms,omitempty"`
	// SinkRecover: a sink fault lifted → every session it hit delivers a
	// new seq: the batch's longest retry backoff (5 s, a failed entry's
	// backoff grows while the fault lasts) + the request timeout + 1 s.
	SinkRecoverMs int64 `json:"sink_recover_ms,omitempty"`
	// SinkRefuseRecover: after refusals, a record refused permanently is
	// still refused at its remaining attempts (the permanent attempts, 3,
	// less one), each after a backoff of up to 5 s, and the session's later
	// entries wait behind it: (3 − 1) × 5 s + the request timeout + 1 s.
	SinkRefuseRecoverMs int64 `json:"sink_refuse_recover_ms,omitempty"`
	// IndexLagCrash: a kill -9 while the indexes lag → a newer tenure
	// delivers: Crash + the lag (a session the worker acquired within the
	// lag is missing from its by_owner query until the lag has passed).
	IndexLagCrashMs int64 `json:"index_lag_crash_ms,omitempty"`
	// Storm: a throttling or ambiguous-error storm lifted → every session
	// delivers a new seq: Crash (a worker whose heartbeats were refused
	// for a TTL is declared dead, and its sessions taken over) + Outage.
	StormMs int64 `json:"storm_ms,omitempty"`
	// ReplayStorm: raw repeats one session may see across a tenure a storm
	// ended: as ReplayOutage, plus the longest the checkpoints yield to a
	// throttling store (lease.CheckpointHoldMax intervals).
	ReplayStorm int64 `json:"replay_storm,omitempty"`
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// Settings derives the Settings of c: the bounds the checks apply.
func (c Config) Settings() Settings {
	w := c.Stack.Worker
	crashMargin := time.Second
	watch := w.HeartbeatEvery / 2 // lease.Config.WatchEvery
	ckpt := time.Duration(float64(w.CheckpointEvery) * 1.1)
	claim := time.Duration(float64(w.ReconcileEvery)*1.2) + time.Second
	rate := c.Stack.FeedRate
	set := Settings{
		Seed: c.Seed, DurationMs: ms(c.Duration), Workers: c.Stack.Workers, Sessions: c.Sessions,
		FeedRate: rate, FeedMode: string(c.Stack.FeedMode), SwitchPolicy: c.SwitchPolicy,
		FeedPingMs: ms(c.FeedPingEvery), FeedPingTimeout: ms(c.FeedPingTimeout),
		LeaseTTLMs: ms(w.LeaseTTL), HeartbeatMs: ms(w.HeartbeatEvery), WatchMs: ms(watch), CheckpointMs: ms(w.CheckpointEvery),
		ReconcileMs: ms(w.ReconcileEvery), ClockOffsetMax: ms(c.ClockOffsetMax),
		SafetyMarginMs: ms(w.SafetyMargin), ShutdownMs: ms(w.ShutdownDeadline),
		ReconnectMaxMs: ms(c.ReconnectMax), RebalanceMs: ms(w.RebalanceEvery), MinHoldMs: ms(w.MinHold),
		Sink: sinkName(c.Stack.Sink), SinkRefusalSkip: c.awsSink() && c.SinkRefusalSkip, TenureHeader: c.Stack.TenureHeader,
		TLS: !c.Stack.PlainWS,
		Bounds: Bounds{
			CrashMs: ms(w.LeaseTTL + watch + crashMargin), CrashMarginMs: ms(crashMargin),
			FenceMs: ms(w.LeaseTTL - w.SafetyMargin), FenceSlackMs: ms(stdoutFenceSlack),
			HandoffMs:    1000,
			BalanceMs:    ms(w.MinHold + 6*w.RebalanceEvery + 2*time.Second),
			ClaimMs:      ms(claim),
			OutageMs:     ms(claim),
			ReconnectMs:  ms(c.ReconnectMax + time.Second),
			StopMs:       ms(w.HeartbeatEvery + 500*time.Millisecond),
			ReplayCrash:  int64(rate*(ckpt.Seconds()+1)) + 1,
			ReplayOutage: int64(rate*(ckpt.Seconds()+(w.LeaseTTL-w.SafetyMargin).Seconds()+1)) + 1,
		},
	}
	set.StandbyEvery = c.StandbyEvery
	if c.PlannedEvery > 0 {
		set.PlannedEvery, set.PlannedAgeMs, set.PlannedSwitchMs = c.PlannedEvery, ms(c.PlannedAge), ms(c.PlannedSwitch)
		set.Bounds.PlannedOverlapMs = ms(c.PlannedSwitch + time.Second)
	}
	if c.Stack.DynamoModel != "" {
		set.DynamoModel = c.Stack.DynamoModel
		set.Bounds.IndexLagCrashMs = set.Bounds.CrashMs + ms(modelLag)
		set.Bounds.StormMs = set.Bounds.CrashMs + set.Bounds.OutageMs
		set.Bounds.BalanceMs += ms(w.RebalanceEvery)
		hold := time.Duration(lease.CheckpointHoldMax) * w.CheckpointEvery
		set.Bounds.ReplayStorm = int64(rate*(ckpt.Seconds()+hold.Seconds()+(w.LeaseTTL-w.SafetyMargin).Seconds()+1)) + 1
	}
	if c.awsSink() {
		set.SinkRequestTimeoutMs = ms(w.SafetyMargin / 2)
		set.Bounds.TrustTolMs = 100
		set.Bounds.TrustDeadlineMs = ms(w.LeaseTTL-w.SafetyMargin) + set.SinkRequestTimeoutMs + set.Bounds.TrustTolMs
		set.Bounds.SinkRecoverMs = ms(sinkRetryMax) + set.SinkRequestTimeoutMs + 1000
		set.Bounds.SinkRefuseRecoverMs = (sinkPermanentAttempts-1)*ms(sinkRetryMax) + set.SinkRequestTimeoutMs + 1000
		// A record reaches the destination up to the request timeout after
		// the trust deadline (no request is sent that would end past it).
		set.Bounds.FenceSlackMs = set.SinkRequestTimeoutMs + set.Bounds.TrustTolMs
	}
	return set
}

// asStdout is s for evidence read from the workers' stdout: no sink
// bounds, the stdout fence slack.
func (s Settings) asStdout() Settings {
	s.Sink, s.SinkRequestTimeoutMs, s.SinkRefusalSkip = devstack.SinkStdout, 0, false
	s.Bounds.TrustDeadlineMs, s.Bounds.TrustTolMs, s.Bounds.SinkRecoverMs, s.Bounds.SinkRefuseRecoverMs = 0, 0, 0, 0
	s.Bounds.FenceSlackMs = stdoutFenceSlack.Milliseconds()
	return s
}

// stdoutFenceSlack is the fence slack for stdout lines (their way to the
// harness).
const stdoutFenceSlack = 500 * time.Millisecond

// sinkRetryMax is the batch sink's longest retry backoff
// (workers/streamer/sink/batch DefaultConfig: Retry.Max).
const sinkRetryMax = 5 * time.Second

// sinkPermanentAttempts is how many times the batch sink sends an entry
// refused permanently before it gives it up (sink/batch DefaultConfig:
// PermanentAttempts).
const sinkPermanentAttempts = 3

func sinkName(s string) string {
	if s == "" {
		return devstack.SinkStdout
	}
	return s
}
