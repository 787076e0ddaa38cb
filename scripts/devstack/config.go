package devstack

// A stack's configuration: the worker settings and binaries it runs with,
// the defaults of `make dev`, filling in folders and binaries, and Validate.

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/dynamodel"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/proc"
)

// WorkerSettings are the streamer settings the stack passes to every worker
// (zero values are left to the worker's defaults).
type WorkerSettings struct {
	LeaseTTL         time.Duration // the liveness TTL
	HeartbeatEvery   time.Duration // one heartbeat per worker (a stop reaches its owner at the next one)
	CheckpointEvery  time.Duration // checkpoints, written only when a session advanced
	ReconcileEvery   time.Duration
	SafetyMargin     time.Duration
	ShutdownDeadline time.Duration
	QueueWait        time.Duration
	MaxSessions      int
	// RebalanceEvery and MinHold: the rebalancing round and the minimum
	// hold before a session may move (0: the worker's defaults).
	RebalanceEvery time.Duration
	MinHold        time.Duration
	// SecretCacheTTL is how long a worker keeps a resolved secret
	// (WSFLEET_SECRET_CACHE_TTL; 0: the worker's default, 5 minutes).
	SecretCacheTTL time.Duration
	LogLevel       string
	// Env is added to every worker's environment last (overrides).
	Env map[string]string
}

// Binaries are the programs the stack runs.
type Binaries struct {
	Streamer string
	Ingest   string // ingest-local
	Feed     string
	Model    string // dynamodel (the DynamoDB model, with Config.DynamoModel)
	// SecretsManager is the Secrets Manager stand-in (with
	// Config.SecretsManager).
	SecretsManager string
}

// Config configures a Stack.
type Config struct {
	Root     string // repository root (default enginetest.RepoRoot())
	Dir      string // state folder: data/ and logs/ (default Root/.dev)
	Bin      Binaries
	InMemory bool // dynalite without --path (tests); otherwise on disk under Dir/data
	// DynamoModel, when set, puts the DynamoDB model (testkit/dynamodel,
	// the Bin.Model process) with this profile ("aws": DynamoDB's latency,
	// index lag, stale reads, throttling and ambiguous errors; "dynalite":
	// nothing added) between every client and dynalite: the model listens
	// on Ports.Dynamo, dynalite on a free port behind it. "": the clients
	// talk to dynalite.
	DynamoModel string
	// DynamoModelSeed seeds the model's draws (0: 1).
	DynamoModelSeed uint64
	// DynamoProxies puts a faultnet proxy between each worker slot and
	// DynamoDB (Worker.DynamoProxy): freezing it cuts that worker off from
	// the table while it still reaches its sources (the chaos partition).
	DynamoProxies bool
	Ports         Ports
	// SecretsManager runs the Secrets Manager stand-in (secrets.go): ingest
	// takes {{secret:NAME}} references under SecretPrefix and the workers
	// resolve them there. Off: no prefix, so ingest refuses references.
	SecretsManager bool
	Workers        int
	Table          string
	Queue          string // work queue name (its DLQ is Queue+"-dlq")

	Worker WorkerSettings

	FeedRate float64
	FeedMode feed.Mode
	// FeedArgs are extra bin/feed flags, appended to the stack's (e.g.
	// "-ping-every", "1s": the feed closes connections of frozen clients).
	FeedArgs []string
	// TenureHeader is the handshake header every worker names its tenure
	// in (WSFLEET_TENURE_HEADER: "<worker id>/<lease epoch>") and the feed
	// reads (-tenure-header): the two connections of a planned reconnect
	// (make-before-break, one tenure) are then a planned overlap at the
	// feed, not a violation. "": off. DefaultConfig: TenureHeader.
	TenureHeader string
	// AllowStandby makes the feed admit hot standby connections
	// (-allow-standby: a tenure "<worker id>/standby/<n>" in TenureHeader)
	// beside a session's owner, neither kicked nor refused; two owners
	// are still kicked or refused by FeedMode. Only with TenureHeader (the
	// feed tells a standby by its tenure): without one it does nothing.
	// DefaultConfig: on.
	AllowStandby bool
	// PlainWS makes the feed serve plain ws://. By default it serves
	// wss:// with a certificate from a CA the stack makes in Dir/tls
	// (testkit/tlsca; kept across runs on the same folder, renewed a day
	// before it expires), and the workers trust that CA
	// (WSFLEET_EXTRA_CA_FILE), as real sources are wss://.
	PlainWS bool

	// Sink is the workers' sink: SinkStdout ("" too: JSON lines on each
	// worker's stdout, read by the stack), SinkSQS (the batched sqs sink on
	// a second fauxqs, the destination, that the sqs-down fault does not
	// touch) or SinkKinesis (the batched kinesis sink on kinesalite). An AWS
	// sink goes through a sinkfault proxy (SinkProxy) and the stack reads
	// the destination continuously (OnDest).
	Sink string
	// SinkSeed seeds the sink proxy's draws.
	SinkSeed uint64
	// OnDest, when set, sees every record read from the destination (from
	// the readers' goroutines: keep it fast).
	OnDest func(DestRecord)

	// KeepSinkRecords keeps every sink record in memory (Sinks.Records).
	KeepSinkRecords bool
	// OnSink, when set, sees every sink record as it arrives (from the
	// worker's stdout reader: keep it fast).
	OnSink func(SinkRecord)

	// RestartWorkers, when set, restarts a worker that exits without being
	// asked to (`make dev`, the way ECS does); nil: a harness that kills
	// workers on purpose restarts them itself.
	RestartWorkers *proc.Restart
	// OnExit, when set, sees every exit of the feed, ingest or an engine,
	// and of a worker (Name its incarnation's id) unless OnWorker is set.
	OnExit func(proc.Exit)
	// OnWorker, when set, sees every worker incarnation come up (its
	// /healthz answered) and end, instead of OnExit.
	OnWorker func(WorkerEvent)

	// RunID goes into every worker id (WorkerID). "": on disk, the data
	// directory's next run (run1, run2, ...; data/devstack-run keeps the
	// count); in memory, none (worker-1, worker-1.r2).
	RunID string

	// StartTimeout bounds each process's readiness wait.
	StartTimeout time.Duration
	Log          zerolog.Logger
}

// Default ports of `make dev` (the engines' match scripts/engines/run.sh).
const (
	DefaultDynamoPort = 8000
	DefaultSQSPort    = 9324
	DefaultAPIPort    = 8787
	DefaultFeedPort   = 8790
	DefaultAdminBase  = 8800
	DefaultQueue      = "wsfleet-work"
)

// TenureHeader is DefaultConfig's Config.TenureHeader.
const TenureHeader = "X-Wsfleet-Tenure"

// DefaultConfig is `make dev`'s stack: fixed ports, 3 workers, data on disk,
// lease timings short enough to watch a failover (TTL 5 s).
func DefaultConfig() Config {
	return Config{
		Bin:     Binaries{},
		Ports:   Ports{Dynamo: DefaultDynamoPort, SQS: DefaultSQSPort, API: DefaultAPIPort, Feed: DefaultFeedPort, AdminBase: DefaultAdminBase},
		Workers: 3,
		Table:   schema.DefaultTableName,
		Queue:   DefaultQueue,
		Worker: WorkerSettings{
			LeaseTTL:         5 * time.Second,
			HeartbeatEvery:   time.Second,
			CheckpointEvery:  5 * time.Second,
			ReconcileEvery:   2 * time.Second,
			SafetyMargin:     time.Second,
			ShutdownDeadline: 10 * time.Second,
			QueueWait:        2 * time.Second,
			MaxSessions:      1000,
			LogLevel:         "info",
		},
		FeedRate:        feed.DefaultRate,
		FeedMode:        feed.ModeKickOlder,
		TenureHeader:    TenureHeader,
		AllowStandby:    true,
		KeepSinkRecords: true,
		StartTimeout:    30 * time.Second,
		Log:             zerolog.Nop(),
	}
}

// fill resolves the folders and binaries.
func (c *Config) fill() error {
	if c.Root == "" {
		r, err := enginetest.RepoRoot()
		if err != nil {
			return err
		}
		c.Root = r
	}
	if c.Dir == "" {
		c.Dir = filepath.Join(c.Root, ".dev")
	}
	bin := filepath.Join(c.Root, "bin")
	if c.Bin.Streamer == "" {
		c.Bin.Streamer = filepath.Join(bin, "streamer")
	}
	if c.Bin.Ingest == "" {
		c.Bin.Ingest = filepath.Join(bin, "ingest-local")
	}
	if c.Bin.Feed == "" {
		c.Bin.Feed = filepath.Join(bin, "feed")
	}
	if c.Bin.Model == "" {
		c.Bin.Model = filepath.Join(bin, "dynamodel")
	}
	if c.Bin.SecretsManager == "" {
		c.Bin.SecretsManager = filepath.Join(bin, "secretsmanager")
	}
	return nil
}

// Validate reports every invalid setting.
func (c Config) Validate() error {
	var errs []error
	if c.Workers < 0 || c.Workers > 64 {
		errs = append(errs, fmt.Errorf("workers %d: want 0..64", c.Workers))
	}
	for name, p := range map[string]int{"dynamo": c.Ports.Dynamo, "sqs": c.Ports.SQS, "api": c.Ports.API, "feed": c.Ports.Feed, "admin base": c.Ports.AdminBase,
		"secrets manager": c.Ports.SecretsManager} {
		if p < 0 || p > 65535-64 {
			errs = append(errs, fmt.Errorf("%s port %d: want 0..65471", name, p))
		}
	}
	if c.Table == "" || c.Queue == "" {
		errs = append(errs, errors.New("table and queue names: empty"))
	}
	if c.DynamoModel != "" {
		if _, err := dynamodel.ProfileByName(c.DynamoModel); err != nil {
			errs = append(errs, fmt.Errorf("dynamo model: %w", err))
		}
	}
	if c.FeedRate <= 0 {
		errs = append(errs, fmt.Errorf("feed rate %v: want > 0", c.FeedRate))
	}
	switch c.Sink {
	case "", SinkStdout, SinkSQS, SinkSQSFIFO, SinkKinesis:
	default:
		errs = append(errs, fmt.Errorf("sink %q: want stdout, sqs, sqs-fifo or kinesis", c.Sink))
	}
	if _, err := feed.ParseMode(string(c.FeedMode)); err != nil {
		errs = append(errs, err)
	}
	if strings.ContainsAny(c.RunID, ". /\t\n") {
		errs = append(errs, fmt.Errorf("run id %q: no dots, slashes or spaces", c.RunID))
	}
	if c.StartTimeout <= 0 {
		errs = append(errs, errors.New("start timeout: want > 0"))
	}
	w := c.Worker
	if w.LeaseTTL < 0 || w.HeartbeatEvery < 0 || w.CheckpointEvery < 0 || w.ReconcileEvery < 0 || w.ShutdownDeadline < 0 || w.MaxSessions < 0 || w.SecretCacheTTL < 0 {
		errs = append(errs, errors.New("worker settings: negative value"))
	}
	if w.LeaseTTL > 0 && w.HeartbeatEvery >= w.LeaseTTL {
		errs = append(errs, fmt.Errorf("worker heartbeat every %v: want < lease TTL %v", w.HeartbeatEvery, w.LeaseTTL))
	}
	return errors.Join(errs...)
}

// FeedAdmitsStandby reports whether the feed admits hot standby
// connections beside an owner's: AllowStandby, with the tenure header the
// feed tells them by.
func (c Config) FeedAdmitsStandby() bool { return c.AllowStandby && c.TenureHeader != "" }
