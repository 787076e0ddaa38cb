package stacks

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// Environment names accepted by `-c env=<name>`.
const (
	EnvDev  = "dev"
	EnvProd = "prod"
)

// Sink names understood by the streamer (schema.EnvSink).
const (
	SinkStdout  = "stdout"
	SinkSQS     = "sqs"
	SinkKinesis = "kinesis"
)

// StdoutSinkWarning is the synth's warning for a deployment whose workers
// write to stdout: the awslogs driver sends every line to CloudWatch Logs,
// billed per GB ingested (docs/references.md, "What users pay").
const (
	StdoutSinkWarningID = "wsfleet:stdout-sink"
	StdoutSinkWarning   = "the stdout sink sends every message through CloudWatch Logs at its ingestion price per GB: the dearest sink at every volume the bench measured (docs/BENCHMARKS.md, the all-in bill); deploy with -c sink=sqs or -c sink=kinesis (README, Sinks)"
)

// StdoutSinkWarns says whether the synth warns about cfg's sink: stdout
// anywhere but dev (where it is the default, for trying the stack out).
func StdoutSinkWarns(cfg EnvConfig) bool { return cfg.Sink == SinkStdout && cfg.Name != EnvDev }

// Sinks are the sink names an environment may use.
var Sinks = []string{SinkStdout, SinkSQS, SinkKinesis}

// Limits the config is checked against.
const (
	// fargateMaxStopTimeout is the longest ECS stopTimeout on Fargate.
	fargateMaxStopTimeout = 120 * time.Second
	// stopTimeoutHeadroom is the least time between the worker's shutdown
	// deadline and SIGKILL.
	stopTimeoutHeadroom = 5 * time.Second
	// TableWriteLimit is DynamoDB's default table-level throughput limit
	// of an on-demand table: 40,000 write request units per second (AWS
	// docs, "Service, account, and table quotas in Amazon DynamoDB"; it can
	// be raised on request).
	TableWriteLimit = 40_000.0
	// ControlWriteShare is the share of TableWriteLimit kept for the writes
	// that are not the steady state: ingest's starts and stops (each with
	// at most one mailbox write) and request nonces, acquisitions and
	// releases when sessions move, death declarations. The steady state
	// (checkpoints and heartbeats) may use the rest.
	ControlWriteShare = 0.05
	// CPUPerThousandMsgs is the worker's CPU per 1,000 messages a second,
	// in vCPU: 1.91 % of a core at 19,000 sessions × 1 msg/s on wss
	// (docs/BENCHMARKS.md, section 5, One worker's capacity; `make bench`).
	CPUPerThousandMsgs = 0.0191
	// SteadyCPUShare is the share of a task's vCPU its sessions may use at
	// one message a second each: the rest is for claims' TLS handshakes
	// (a crash's or a deploy's wave), bursts and the GC.
	SteadyCPUShare = 0.5
	// NewTableWrites is what a new on-demand table serves at once: 4,000
	// write units/s (its warm throughput; it scales from there, throttling
	// above twice its previous peak within 30 minutes: "Understanding
	// DynamoDB warm throughput", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput.html).
	NewTableWrites = 4_000.0
	// ClaimWriteUnits is what one claim writes: the acquire (3.22 write
	// units per tenure, retries included, with the spec in its own item:
	// docs/BENCHMARKS.md section 6, per tenure). Its checkpoint is on the
	// session item, which the acquire's write fences: no second write.
	ClaimWriteUnits = 3.22
	// FleetClaimShare is the share of the table's write headroom above the
	// steady state (TableWrites − SteadyWritesAtCapacity) the fleet's
	// claims may take together (WSFLEET_FLEET_CLAIMS_PER_SECOND): the rest
	// is for the releases a move also writes, the first checkpoints of the
	// sessions claimed, ingest, and the heartbeats' share under a burst.
	FleetClaimShare = 0.5
	// CrashSpreadGoal is the longest a crashed task's full complement may
	// take to be claimed by the survivors (issue 37).
	CrashSpreadGoal = 60 * time.Second
	// DeployDrainShare is the share of ShutdownDeadline a rolling deploy's
	// wave of hand-offs may take at the fleet's claim budget: the worker
	// paces its own hand-offs to end by a third of its deadline and hands
	// off whatever is left at once at half of it (workers/streamer,
	// drain.go paceHandoffs), so a wave that the table takes within a
	// third leaves the rest of the deadline for stragglers.
	DeployDrainShare = 1.0 / 3
	// ecsMaxPercentCeiling is the largest maximumPercent this app uses:
	// ECS's default, a whole new fleet beside the old one.
	ecsMaxPercentCeiling = 200
	// maxAZs is the most AZs the VPC spans here: three, what every Region
	// offers at least (AWS Global Infrastructure, "Regions and
	// Availability Zones"). The stack names its AZs at deploy time
	// (Fn::Select over Fn::GetAZs): a fourth would fail the deploy in a
	// Region of three.
	maxAZs = 3
	// Checkpoint interval bounds (the worker's and a start's
	// checkpoint_every).
	minCheckpointEvery = time.Second
	maxCheckpointEvery = 10 * time.Minute
)

// fargateMemoryMiB lists the memory sizes Fargate accepts for each CPU size
// (the ones this app offers; larger sizes exist).
var fargateMemoryMiB = map[int][]int{
	256:  {512, 1024, 2048},
	512:  {1024, 2048, 3072, 4096},
	1024: {2048, 3072, 4096, 5120, 6144, 7168, 8192},
	2048: {4096, 5120, 6144, 7168, 8192, 9216, 10240, 11264, 12288, 13312, 14336, 15360, 16384},
}

// maxReservedConcurrency is the most an environment may reserve for ingest:
// Lambda's default account quota (1,000 concurrent executions) less the 100
// that must stay unreserved (Lambda Developer Guide, "Configuring reserved
// concurrency").
const maxReservedConcurrency = 900

// EnvConfig is everything that differs between environments. One value per
// environment lives in environments; context options (Options) adjust it.
type EnvConfig struct {
	Name string

	// Streamer service.
	MinTasks           int
	MaxTasks           int
	TaskCPU            int // Fargate CPU units
	TaskMemoryMiB      int
	MaxSessionsPerTask int     // schema.EnvMaxSessions
	TargetUtilization  float64 // percent of MaxSessionsPerTask, autoscaling target
	// AZs is how many Availability Zones the VPC spans (a public subnet
	// in each, no NAT gateway: a zone more costs nothing); ECS spreads the
	// service's tasks evenly over them.
	AZs int
	// AZLossFrom is the fleet size (sessions at the target) from which
	// Validate requires the tasks outside the AZ that holds the most of
	// them to hold every session at the target, at every task count up to
	// MaxTasks (AZLossShortfall): the loss of an AZ then needs no new task
	// (AWS's static stability). 0: not required.
	AZLossFrom       int
	ScaleInCooldown  time.Duration
	ScaleOutCooldown time.Duration

	// Liveness and checkpoint timings handed to the worker.
	LeaseTTL            time.Duration // the worker record's liveness TTL
	HeartbeatEvery      time.Duration // one conditional write of the worker record
	CheckpointEvery     time.Duration // default per-session checkpoint interval (a start may override it)
	MaxConcurrentWrites int           // checkpoints in flight per worker
	SafetyMargin        time.Duration // a worker stops delivering this long before its liveness TTL runs out
	ShutdownDeadline    time.Duration // the worker's graceful-shutdown deadline
	StopTimeout         time.Duration // ECS SIGTERM → SIGKILL; must exceed ShutdownDeadline
	// DeployMaxPercent is the service's maximumPercent (its
	// minimumHealthyPercent is 100): a rolling deploy starts
	// ⌊tasks × DeployMaxPercent ÷ 100⌋ − tasks new tasks at a time and
	// stops as many old ones once those are healthy, so it sets how many
	// sessions move at once (DeployWaveDrain).
	DeployMaxPercent int

	Sink     string // stdout | sqs | kinesis; sqs creates the output queue, kinesis the output stream
	LogLevel string

	// Ingest.
	IngestReservedConcurrency int  // reserved (and so maximum) concurrent ingest invocations
	AllowAuthNone             bool // -c auth=none accepted (an API without authorization); never in prod
	IngestMemoryMiB           int
	IngestTimeout             time.Duration
	APIRateLimit              float64 // requests/s on the $default stage
	APIBurstLimit             float64
	WorkQueueVisible          time.Duration // work-queue visibility timeout
	MaxReceiveCount           int           // work queue → DLQ after this many receives

	// Data.
	TableCMK bool // the table and its PITR backups encrypted with a customer-managed KMS key
	// TableWarmWrites pre-warms the table to this many write units/s
	// (its warm throughput, billed once when raised; it never comes down);
	// 0 leaves a new on-demand table's NewTableWrites. The fleet's claim
	// budget is sized from it (FleetClaimsPerSecond).
	TableWarmWrites float64

	// Operations.
	LogRetentionDays int
	Retain           bool // RETAIN data and logs, deletion protection on the table
	// SecretPrefix is the Secrets Manager name prefix a session's secret
	// references must be under (ingest's WSFLEET_SECRET_PREFIX); the
	// streamer task role may read the secrets under it, and no others.
	SecretPrefix string
	// SecretKMSKeyARN names the customer-managed KMS key the session
	// secrets are encrypted with (a key ARN, arn:<partition>:kms:<region>:
	// <account>:key/<key-id>); the task role may then kms:Decrypt with it,
	// only through Secrets Manager and only for secrets under SecretPrefix.
	// Empty (the default): the secrets use the AWS managed key
	// aws/secretsmanager, which needs no grant. -c secretKmsKeyArn= sets it.
	SecretKMSKeyARN    string
	OrphanAlarmMinutes int // OrphansSeen > 0 for this many consecutive minutes
	AliveAlarmMinutes  int // AliveWorkers < MinTasks for this many consecutive minutes
	LeaseLostPer5Min   float64
	FailedPer5Min      float64 // SessionsFailed alarm threshold
	Ingest5xxPer5Min   float64
}

// kmsKeyARN is the form of a KMS key's ARN: partition aws or aws-<name>
// (aws-cn, aws-us-gov, ...), a region, a 12-digit account and key/ with a
// key id (a UUID, or mrk- and 32 hex digits for a multi-Region key).
var kmsKeyARN = regexp.MustCompile(`^arn:aws(-[a-z]+)*:kms:[a-z]{2}(-[a-z]+)+-[0-9]+:[0-9]{12}:key/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32})$`)

// environments holds the per-environment defaults.
var environments = map[string]EnvConfig{
	EnvDev: {
		Name:                      EnvDev,
		MinTasks:                  1,
		MaxTasks:                  3,
		TaskCPU:                   256,
		TaskMemoryMiB:             512,
		MaxSessionsPerTask:        300, // small and cheap: memory would hold 4,140 (MaxSessionsByMemory)
		TargetUtilization:         schema.ScalingTargetPercent,
		AZs:                       2, // 1–3 tasks: an AZ's loss leaves the survivors short whatever the target; ECS replaces the tasks
		ScaleInCooldown:           5 * time.Minute,
		ScaleOutCooldown:          time.Minute,
		LeaseTTL:                  10 * time.Second,
		HeartbeatEvery:            time.Second,
		CheckpointEvery:           60 * time.Second,
		MaxConcurrentWrites:       64,
		SafetyMargin:              2 * time.Second,
		ShutdownDeadline:          30 * time.Second,
		StopTimeout:               40 * time.Second,
		DeployMaxPercent:          200, // ECS's default: at MinTasks 1 only 200 % starts a new task; 3 × 300 sessions take 1.5 s at the fleet's 618 claims/s
		Sink:                      SinkStdout,
		LogLevel:                  "debug",
		IngestReservedConcurrency: 10,
		AllowAuthNone:             true,
		IngestMemoryMiB:           256,
		IngestTimeout:             10 * time.Second,
		APIRateLimit:              20,
		APIBurstLimit:             50,
		WorkQueueVisible:          30 * time.Second,
		MaxReceiveCount:           5,
		LogRetentionDays:          7,
		Retain:                    false,
		SecretPrefix:              "wsfleet/dev/",
		OrphanAlarmMinutes:        5,
		AliveAlarmMinutes:         5,
		LeaseLostPer5Min:          20,
		FailedPer5Min:             1,
		Ingest5xxPer5Min:          5,
	},
	EnvProd: {
		Name:                      EnvProd,
		MinTasks:                  4,  // the least a rolling deploy at DeployMaxPercent can start a task at
		MaxTasks:                  55, // 107,250 sessions at the 65 % target (docs/infra.md, Sizing)
		TaskCPU:                   512,
		TaskMemoryMiB:             1024,
		MaxSessionsPerTask:        3000,   // memory holds 8,289; a crash's spread and CPU headroom keep it at 3,000 (docs/infra.md, Sizing)
		TableWarmWrites:           11_000, // steady 2,805 at 165,000 sessions + the largest deploy wave's 45,000 sessions handed off within a third of the shutdown deadline at the fleet's claim budget (DeployWaveDrain; docs/infra.md, Sizing)
		TargetUtilization:         schema.ScalingTargetPercent,
		AZs:                       3,
		AZLossFrom:                100_000, // from 52 tasks: 34 outside the busiest AZ hold 102,000 (AZLossShortfall; docs/infra.md, Sizing)
		ScaleInCooldown:           10 * time.Minute,
		ScaleOutCooldown:          time.Minute,
		LeaseTTL:                  15 * time.Second,
		HeartbeatEvery:            time.Second,
		CheckpointEvery:           60 * time.Second,
		MaxConcurrentWrites:       64,
		SafetyMargin:              2 * time.Second,
		ShutdownDeadline:          110 * time.Second, // a rolling deploy's wave handed off within a third of it (DeployMaxPercent)
		StopTimeout:               120 * time.Second, // Fargate's maximum
		DeployMaxPercent:          129,               // 15 of 55 tasks at a time: 45,000 sessions at 1,272 claims/s = 35.4 s, within 110 s ÷ 3 (DeployWaveDrain); 200 % would move 165,000 at once, 130 s against the table
		Sink:                      SinkSQS,
		LogLevel:                  "info",
		IngestReservedConcurrency: 100,
		IngestMemoryMiB:           256,
		TableCMK:                  true,
		IngestTimeout:             10 * time.Second,
		APIRateLimit:              100,
		APIBurstLimit:             200,
		WorkQueueVisible:          30 * time.Second,
		MaxReceiveCount:           5,
		LogRetentionDays:          90,
		Retain:                    true,
		SecretPrefix:              "wsfleet/prod/",
		OrphanAlarmMinutes:        3,
		AliveAlarmMinutes:         3,
		LeaseLostPer5Min:          10,
		FailedPer5Min:             1,
		Ingest5xxPer5Min:          1,
	},
}

// EnvNames returns the known environment names, sorted.
func EnvNames() []string {
	names := make([]string, 0, len(environments))
	for n := range environments {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ConfigFor returns the validated configuration of the named environment.
func ConfigFor(name string) (EnvConfig, error) {
	cfg, ok := environments[name]
	if !ok {
		return EnvConfig{}, fmt.Errorf("unknown environment %q (known: %s)", name, strings.Join(EnvNames(), ", "))
	}
	if err := cfg.Validate(); err != nil {
		return EnvConfig{}, fmt.Errorf("environment %q: %w", name, err)
	}
	return cfg, nil
}

// SteadyWritesAtCapacity is the table's steady write rate (write units/s)
// of a fleet at MaxTasks with every task holding MaxSessionsPerTask
// sessions: one checkpoint per session every CheckpointEvery (a checkpoint
// item stays below 1 KB: one unit, and only one that advanced is written,
// so this is the ceiling) plus one heartbeat per worker every
// HeartbeatEvery. Neither writes an index: the hot path has no index write.
func (c EnvConfig) SteadyWritesAtCapacity() float64 {
	return float64(c.MaxTasks*c.MaxSessionsPerTask)/c.CheckpointEvery.Seconds() +
		float64(c.MaxTasks)/c.HeartbeatEvery.Seconds()
}

// SessionCeiling is the most sessions one table carries at these settings:
// the sessions whose checkpoints, with MaxTasks workers' heartbeats, fit in
// TableWriteLimit less ControlWriteShare. At CheckpointEvery 60 s and 8
// workers heartbeating every second: (38,000 - 8) x 60 = 2,279,520. No key
// is hot on the way: every session checkpoints its own item, every worker
// heartbeats its own record (1 write/s against 1,000 per partition), and
// the indexes change only when a desired state or an owner does. Sessions
// that a start gives a shorter checkpoint_every count for more (at 1 s,
// one such session costs what 60 default ones do).
func (c EnvConfig) SessionCeiling() int {
	if c.CheckpointEvery <= 0 || c.HeartbeatEvery <= 0 {
		return 0
	}
	budget := TableWriteLimit*(1-ControlWriteShare) - float64(c.MaxTasks)/c.HeartbeatEvery.Seconds()
	if budget <= 0 {
		return 0
	}
	return int(budget * c.CheckpointEvery.Seconds())
}

// Validate checks the configuration for values AWS would reject and for
// timings that would break the one-owner-per-connection guarantee.
func (c EnvConfig) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(c.Name != "", "name is empty")
	check(c.MinTasks >= 1, "MinTasks %d < 1", c.MinTasks)
	check(c.MaxTasks >= c.MinTasks, "MaxTasks %d < MinTasks %d", c.MaxTasks, c.MinTasks)
	mems, ok := fargateMemoryMiB[c.TaskCPU]
	check(ok, "TaskCPU %d is not a Fargate CPU size", c.TaskCPU)
	check(!ok || slices.Contains(mems, c.TaskMemoryMiB), "TaskMemoryMiB %d is not valid with TaskCPU %d", c.TaskMemoryMiB, c.TaskCPU)
	check(c.MaxSessionsPerTask >= 1, "MaxSessionsPerTask %d < 1", c.MaxSessionsPerTask)
	// The worker's own memory check (workers/streamer/envconfig,
	// memoryProblems) with its defaults: a task that fails it would not
	// start.
	if lim := c.GoMemLimitMiB(); lim > 0 {
		need := c.MemoryNeedMiB()
		check(need <= float64(lim), "MaxSessionsPerTask %d × %d KiB (a session's measured memory and small-frame allowance) + an eighth, a quarter and a sixteenth of GOMEMLIMIT %d MiB (the large-frame, sink and switch budgets) = %.0f MiB exceeds GOMEMLIMIT (it holds %d): lower MaxSessionsPerTask or raise TaskMemoryMiB",
			c.MaxSessionsPerTask, schema.SessionMemory>>10, lim, need, c.MaxSessionsByMemory())
	}
	if cpu := c.SteadyCPU(); c.TaskCPU > 0 {
		check(cpu <= SteadyCPUShare*float64(c.TaskCPU)/1024, "MaxSessionsPerTask %d at 1 msg/s use %.2f vCPU (%.2f %% of a core per 1,000 msg/s), above %.0f %% of the task's %.2f vCPU: lower MaxSessionsPerTask or raise TaskCPU",
			c.MaxSessionsPerTask, cpu, CPUPerThousandMsgs*100, SteadyCPUShare*100, float64(c.TaskCPU)/1024)
	}
	check(c.TargetUtilization > 0 && c.TargetUtilization < 100, "TargetUtilization %v not in (0, 100)", c.TargetUtilization)
	errs = append(errs, c.azProblems()...)
	check(c.ScaleInCooldown >= 0 && c.ScaleOutCooldown >= 0, "negative cooldown")

	check(c.LeaseTTL > 0, "LeaseTTL must be positive")
	check(c.HeartbeatEvery > 0 && c.SafetyMargin > 0, "HeartbeatEvery and SafetyMargin must be positive")
	// A worker delivers until its last successful heartbeat + LeaseTTL -
	// SafetyMargin: at least two heartbeats must fit in that window, so
	// that one lost heartbeat does not fence every session.
	check(c.LeaseTTL-c.SafetyMargin >= 2*c.HeartbeatEvery,
		"LeaseTTL %v - SafetyMargin %v leaves no room for two heartbeats every %v", c.LeaseTTL, c.SafetyMargin, c.HeartbeatEvery)
	check(c.CheckpointEvery >= minCheckpointEvery && c.CheckpointEvery <= maxCheckpointEvery,
		"CheckpointEvery %v not in [%v, %v]", c.CheckpointEvery, minCheckpointEvery, maxCheckpointEvery)
	check(c.MaxConcurrentWrites >= 1, "MaxConcurrentWrites %d < 1", c.MaxConcurrentWrites)
	if c.CheckpointEvery > 0 && c.HeartbeatEvery > 0 {
		ceiling := c.SessionCeiling()
		check(c.MaxTasks*c.MaxSessionsPerTask <= ceiling,
			"a full fleet (%d tasks x %d sessions) is above the table's ceiling of %d sessions at a checkpoint every %v (%.0f steady writes/s against %.0f: %.0f write units/s less %.0f %% for starts, stops and takeovers): lower MaxTasks or MaxSessionsPerTask, or checkpoint less often",
			c.MaxTasks, c.MaxSessionsPerTask, ceiling, c.CheckpointEvery, c.SteadyWritesAtCapacity(),
			TableWriteLimit*(1-ControlWriteShare), TableWriteLimit, ControlWriteShare*100)
	}
	check(c.TableWarmWrites >= 0 && c.TableWarmWrites <= TableWriteLimit, "TableWarmWrites %.0f not in [0, %.0f] (the table's write quota)", c.TableWarmWrites, TableWriteLimit)
	check(c.SteadyWritesAtCapacity() <= c.TableWrites()*(1-ControlWriteShare),
		"a full fleet's steady writes (%.0f units/s) exceed %.0f %% of the table's %.0f write units/s at once (TableWarmWrites): raise TableWarmWrites or lower MaxTasks",
		c.SteadyWritesAtCapacity(), (1-ControlWriteShare)*100, c.TableWrites())
	check(c.ShutdownDeadline > 0, "ShutdownDeadline must be positive")
	check(c.StopTimeout >= c.ShutdownDeadline+stopTimeoutHeadroom,
		"StopTimeout %v must be at least ShutdownDeadline %v + %v so the worker can release its sessions before SIGKILL",
		c.StopTimeout, c.ShutdownDeadline, stopTimeoutHeadroom)
	check(c.StopTimeout <= fargateMaxStopTimeout, "StopTimeout %v exceeds the Fargate maximum %v", c.StopTimeout, fargateMaxStopTimeout)
	check(c.StopTimeout%time.Second == 0, "StopTimeout %v must be whole seconds", c.StopTimeout)
	errs = append(errs, c.deployProblems()...)

	check(slices.Contains(Sinks, c.Sink), "Sink %q is not one of %q", c.Sink, Sinks)
	check(slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel), "LogLevel %q is not debug|info|warn|error", c.LogLevel)

	check(c.IngestReservedConcurrency >= 1 && c.IngestReservedConcurrency <= maxReservedConcurrency,
		"IngestReservedConcurrency %d not in [1, %d] (an account's default concurrency is 1,000, of which 100 must stay unreserved)",
		c.IngestReservedConcurrency, maxReservedConcurrency)
	check(c.IngestMemoryMiB >= 128 && c.IngestMemoryMiB <= 10240, "IngestMemoryMiB %d not in [128, 10240]", c.IngestMemoryMiB)
	check(c.IngestTimeout > 0 && c.IngestTimeout <= 29*time.Second, "IngestTimeout %v not in (0, 29s] (the HTTP API integration limit)", c.IngestTimeout)
	check(c.APIRateLimit > 0 && c.APIBurstLimit >= 1, "API throttling must be positive")
	check(c.WorkQueueVisible > 0 && c.WorkQueueVisible <= 12*time.Hour, "WorkQueueVisible %v not in (0, 12h]", c.WorkQueueVisible)
	check(c.MaxReceiveCount >= 1 && c.MaxReceiveCount <= 1000, "MaxReceiveCount %d not in [1, 1000]", c.MaxReceiveCount)

	_, okRetention := retentionByDays[c.LogRetentionDays]
	check(okRetention, "LogRetentionDays %d is not a CloudWatch Logs retention value", c.LogRetentionDays)
	check(c.OrphanAlarmMinutes >= 1, "OrphanAlarmMinutes %d < 1", c.OrphanAlarmMinutes)
	check(c.AliveAlarmMinutes >= 1, "AliveAlarmMinutes %d < 1", c.AliveAlarmMinutes)
	check(c.LeaseLostPer5Min > 0, "LeaseLostPer5Min must be positive")
	check(c.FailedPer5Min > 0, "FailedPer5Min must be positive")
	check(c.Ingest5xxPer5Min > 0, "Ingest5xxPer5Min must be positive")
	check(c.SecretKMSKeyARN == "" || kmsKeyARN.MatchString(c.SecretKMSKeyARN),
		"SecretKMSKeyARN %q is not a KMS key ARN: want arn:<partition>:kms:<region>:<account>:key/<key-id> (an IAM policy grants a key by its key ARN, not by an alias or a bare key id)",
		c.SecretKMSKeyARN)
	return errors.Join(errs...)
}

// MemoryNeedMiB is what the worker's memory check counts for a task (MiB):
// MaxSessionsPerTask × schema.SessionMemory, plus the large-frame, sink
// and switch budgets at their defaults (an eighth, a quarter and a
// sixteenth of GOMEMLIMIT: schema's LargeFrameShare, SinkBudgetShare,
// SwitchBudgetShare), as workers/streamer/envconfig.MemoryNeed.
func (c EnvConfig) MemoryNeedMiB() float64 {
	lim := float64(c.GoMemLimitMiB())
	return float64(c.MaxSessionsPerTask)*float64(schema.SessionMemory)/(1<<20) +
		lim/schema.LargeFrameShare + lim/schema.SinkBudgetShare + lim/schema.SwitchBudgetShare
}

// MaxSessionsByMemory is the most sessions the task's memory holds by the
// worker's check.
func (c EnvConfig) MaxSessionsByMemory() int {
	return int(schema.SessionRoom(float64(c.GoMemLimitMiB())) * (1 << 20) / float64(schema.SessionMemory))
}

// SteadyCPU is the vCPU a task's full complement uses at one message a
// second per session (CPUPerThousandMsgs).
func (c EnvConfig) SteadyCPU() float64 {
	return float64(c.MaxSessionsPerTask) / 1000 * CPUPerThousandMsgs
}

// TasksAtTarget is how many tasks the scaling target keeps for n sessions
// (each at TargetUtilization % of MaxSessionsPerTask); 0 when the
// settings cannot say.
func (c EnvConfig) TasksAtTarget(n int) int {
	per := float64(c.MaxSessionsPerTask) * c.TargetUtilization / 100
	if per <= 0 {
		return 0
	}
	return int(math.Ceil(float64(n) / per))
}

// AZLossShortfall is how many of the sessions n tasks hold at the scaling
// target find no room on the tasks left when the AZ holding the most of
// them is lost: n × the target's share of MaxSessionsPerTask, less what
// the n − ⌈n ÷ AZs⌉ others hold at MaxSessionsPerTask. ECS spreads a
// service's tasks evenly over its AZs (Amazon ECS Developer Guide, "How
// Amazon ECS places tasks": a service's tasks are spread by
// attribute:ecs.availability-zone), so the busiest AZ holds ⌈n ÷ AZs⌉.
// Zero or less: the survivors hold them all and the loss needs no new
// task; above zero, that many wait for ECS to launch replacements.
func (c EnvConfig) AZLossShortfall(n int) int {
	return int(math.Ceil(c.heldAtTarget(n))) - (n-c.busiestAZ(n))*c.MaxSessionsPerTask
}

// heldAtTarget is what n tasks hold at the scaling target: n × the
// target's share of MaxSessionsPerTask.
func (c EnvConfig) heldAtTarget(n int) float64 {
	return float64(n) * float64(c.MaxSessionsPerTask) * c.TargetUtilization / 100
}

// busiestAZ is how many of n tasks the AZ holding the most of them holds:
// ⌈n ÷ AZs⌉ (ECS's spread), all n with fewer than two AZs.
func (c EnvConfig) busiestAZ(n int) int {
	if c.AZs < 2 {
		return n
	}
	return (n + c.AZs - 1) / c.AZs
}

// AZLossHeldFrom is the fewest tasks from which every fleet size up to
// MaxTasks loses an AZ with no shortfall (AZLossShortfall ≤ 0); 0 when
// even MaxTasks has one.
func (c EnvConfig) AZLossHeldFrom() int {
	from := 0
	for n := c.MaxTasks; n >= 1 && c.AZLossShortfall(n) <= 0; n-- {
		from = n
	}
	return from
}

// azProblems checks the VPC's AZs and, with AZLossFrom set, that an AZ's
// loss needs no new task from AZLossFrom sessions up to MaxTasks.
func (c EnvConfig) azProblems() []error {
	if c.AZs < 1 || c.AZs > maxAZs {
		return []error{fmt.Errorf("AZs %d not in [1, %d]", c.AZs, maxAZs)}
	}
	if c.AZLossFrom <= 0 {
		return nil
	}
	first := c.TasksAtTarget(c.AZLossFrom)
	if first > c.MaxTasks {
		return []error{fmt.Errorf("AZLossFrom %d sessions take %d tasks at the %.0f %% target, above MaxTasks %d", c.AZLossFrom, first, c.TargetUtilization, c.MaxTasks)}
	}
	for n := first; n <= c.MaxTasks; n++ {
		if short := c.AZLossShortfall(n); short > 0 {
			return []error{fmt.Errorf("the loss of an AZ at %d tasks (%d sessions at the %.0f %% target, at least AZLossFrom %d) leaves %d sessions without room on the %d tasks of the other AZs (%d AZs): they wait for ECS to launch replacements; lower TargetUtilization (%d AZs hold an AZ's loss below %.1f %%) or add AZs",
				n, int(c.heldAtTarget(n)), c.TargetUtilization, c.AZLossFrom, short, n-c.busiestAZ(n), c.AZs, c.AZs, 100*float64(c.AZs-1)/float64(c.AZs))}
		}
	}
	return nil
}

// SessionsAtTarget is what the fleet holds at the scaling target with
// MaxTasks tasks.
func (c EnvConfig) SessionsAtTarget() int {
	return int(c.heldAtTarget(c.MaxTasks))
}

// TableWrites is the write units/s the table serves at once: its warm
// throughput.
func (c EnvConfig) TableWrites() float64 {
	if c.TableWarmWrites > 0 {
		return c.TableWarmWrites
	}
	return NewTableWrites
}

// FleetClaimsPerSecond is the fleet's claim budget the workers share
// (WSFLEET_FLEET_CLAIMS_PER_SECOND): FleetClaimShare of the table's write
// headroom above the steady state at capacity, at ClaimWriteUnits a
// claim, rounded down; at least 1.
func (c EnvConfig) FleetClaimsPerSecond() float64 {
	head := c.TableWrites() - c.SteadyWritesAtCapacity()
	return max(1, math.Floor(head*FleetClaimShare/ClaimWriteUnits))
}

// claimRate is one survivor's claims per second in a fleet of n tasks: its
// share of the fleet's budget, at most schema.DefaultClaimsPerSecond.
func (c EnvConfig) claimRate(n int) float64 {
	return min(schema.DefaultClaimsPerSecond, c.FleetClaimsPerSecond()/float64(max(n, 1)))
}

// CrashSpread bounds the time a crashed task holding its full complement
// (MaxSessionsPerTask) takes to be claimed again in a fleet of n sessions
// at the scaling target, at the survivors' claim rate: the dead worker is
// declared by a watcher at most LeaseTTL + a watch interval (half a
// heartbeat: shared/lease Config.WatchEvery) after its last heartbeat,
// which hands each survivor its part, and every survivor claims its part
// at its share of the fleet's claim budget (claimRate), at most
// schema.DefaultClaimsPerSecond. Not counted: the table's own bound
// (the dead owner's by_owner key value takes every move's index write;
// measured by the simulator's crash-big, docs/infra.md) and a source
// host's dial rate (WSFLEET_DIALS_PER_HOST per worker).
func (c EnvConfig) CrashSpread(n int) time.Duration {
	survivors := max(c.TasksAtTarget(n)-1, 1)
	part := math.Ceil(float64(c.MaxSessionsPerTask) / float64(survivors))
	claim := time.Duration(part / c.claimRate(survivors) * float64(time.Second))
	return c.LeaseTTL + c.HeartbeatEvery/2 + claim
}

// GoMemLimitMiB is the Go runtime's soft memory limit the streamer task runs
// with (GOMEMLIMIT): 90 % of the task's memory, leaving the rest for what
// the Go runtime does not count (the binary, thread stacks outside the heap,
// the kernel's socket buffers). The worker derives its sink buffer budget
// from it.
func (c EnvConfig) GoMemLimitMiB() int { return c.TaskMemoryMiB * schema.GoMemLimitPercent / 100 }

// DeployWaveTasks is how many old tasks one wave of a rolling deploy
// replaces in a service of n tasks: ECS keeps at most DeployMaxPercent of
// n RUNNING or PENDING (rounded down) and, at minimumHealthyPercent 100,
// stops old tasks only as new ones become healthy (ECS API Reference,
// DeploymentConfiguration: "This parameter enables you to define the
// deployment batch size").
func (c EnvConfig) DeployWaveTasks(n int) int {
	return n*c.DeployMaxPercent/100 - n
}

// DeployWaveDrain is how long the largest wave's hand-offs take at the
// fleet's claim budget (FleetClaimsPerSecond): DeployWaveTasks(MaxTasks)
// old tasks, each holding MaxSessionsPerTask sessions (a full fleet: a
// deploy may come before a scale-out), each hand-off one claim at the
// receiver. A wave larger than the table takes within the drain's share of
// the deadline throttles the table (heartbeats included) and leaves
// sessions to be released at the deadline instead of handed off.
func (c EnvConfig) DeployWaveDrain() time.Duration {
	sessions := c.DeployWaveTasks(c.MaxTasks) * c.MaxSessionsPerTask
	return time.Duration(float64(sessions) / c.FleetClaimsPerSecond() * float64(time.Second))
}

// deployProblems checks the rolling deploy's batch: within what ECS
// accepts here, able to start a new task at MinTasks (otherwise, at
// minimumHealthyPercent 100, a deploy of a service at its minimum could
// neither start nor stop a task), and its largest wave handed off within
// DeployDrainShare of the deadline at the fleet's claim budget.
func (c EnvConfig) deployProblems() []error {
	var errs []error
	if c.DeployMaxPercent <= 100 || c.DeployMaxPercent > ecsMaxPercentCeiling {
		return []error{fmt.Errorf("DeployMaxPercent %d not in (100, %d]", c.DeployMaxPercent, ecsMaxPercentCeiling)}
	}
	if c.MinTasks >= 1 && c.DeployWaveTasks(c.MinTasks) < 1 {
		errs = append(errs, fmt.Errorf("DeployMaxPercent %d starts no new task at MinTasks %d (⌊%d × %d %%⌋ = %d): a deploy at the minimum could neither start nor stop a task; raise DeployMaxPercent to at least %d or MinTasks",
			c.DeployMaxPercent, c.MinTasks, c.MinTasks, c.DeployMaxPercent, c.MinTasks+c.DeployWaveTasks(c.MinTasks), (100*(c.MinTasks+1)+c.MinTasks-1)/c.MinTasks))
	}
	if window := time.Duration(float64(c.ShutdownDeadline) * DeployDrainShare); c.ShutdownDeadline > 0 && c.MaxSessionsPerTask > 0 && c.DeployWaveDrain() > window {
		errs = append(errs, fmt.Errorf("a rolling deploy at DeployMaxPercent %d moves %d tasks × %d sessions at once at MaxTasks %d: %v at the fleet's %.0f claims/s, above a third of ShutdownDeadline %v (%v): lower DeployMaxPercent, raise ShutdownDeadline or TableWarmWrites",
			c.DeployMaxPercent, c.DeployWaveTasks(c.MaxTasks), c.MaxSessionsPerTask, c.MaxTasks, c.DeployWaveDrain().Round(100*time.Millisecond),
			c.FleetClaimsPerSecond(), c.ShutdownDeadline, window.Round(100*time.Millisecond)))
	}
	return errs
}
