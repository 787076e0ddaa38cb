// Package devstack runs the whole of wsfleet on one machine, every part a
// separate process bound to 127.0.0.1: dynalite (DynamoDB, on disk or in
// memory) and fauxqs (SQS) through testkit/enginetest, the sessions table and
// work queues (created when absent), the demo feed (bin/feed), the ingest
// local front (bin/ingest-local) and N streamer workers (bin/streamer);
// with Config.SecretsManager also the Secrets Manager stand-in
// (bin/secretsmanager, secrets.go) the workers resolve secret references
// against.
//
// It is the library under `make dev`, `make demo`, the chaos harness and the
// benchmarks: every process (a testkit/proc.Proc) can be killed (-9),
// terminated (SIGTERM), paused (SIGSTOP), resumed and started again, and a
// worker restarted on its own after it exits (Config.RestartWorkers); the engines can be stopped and
// started on the same ports; the feed is driven through its HTTP controls
// (feed.Client) and keeps the source's own records; the workers' stdout sinks
// are parsed line by line into SinkRecords (and appended to a file per
// worker), so a harness can judge the workers from evidence they do not
// produce about themselves.
//
// With Config.Sink sqs or kinesis the workers use the batched AWS sink
// instead: a second fauxqs (the output queue, untouched by a kill of the
// work queue's engine) or kinesalite (the output stream) is the
// destination, a scripts/sinkfault proxy sits between the workers and it
// (faults on the sink's calls only), and the stack reads the destination
// continuously (Config.OnDest; destination.go).
//
// Every run on a data directory on disk has a run id of its own (run1,
// run2, ...: Stack.RunID, counted in data/devstack-run) that its workers'
// ids carry (worker-1-run2, restarted worker-1-run2.r2): a run never takes
// an id an earlier run's worker record holds, so a second run on the same
// data resumes the sessions the first left STARTED.
//
// Layout under Config.Dir (default <repo>/.dev): data/ (dynalite's LevelDB
// and devstack-run),
// logs/ (one .log per process, worker-N.sink.jsonl per worker, feed-records.jsonl,
// destination/ the destination engine's log).
package devstack

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/testkit/dynamodel"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/proc"
	"github.com/wsfleet/wsfleet/testkit/tlsca"
)

// Ports are the loopback ports of the stack; 0 picks a free one.
type Ports struct {
	Dynamo    int
	SQS       int
	API       int // the ingest local front
	Feed      int
	AdminBase int // worker n's admin server listens on AdminBase+n
	// SecretsManager is the Secrets Manager stand-in's (with
	// Config.SecretsManager).
	SecretsManager int
}

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

// Stack is a running local stack.
type Stack struct {
	cfg Config
	log zerolog.Logger

	Dynamo *enginetest.Process // dynalite (behind Model when there is one)
	// Model drives the DynamoDB model in front of Dynamo (nil without
	// Config.DynamoModel): lag episodes, throttling and error storms, its
	// meter. ModelProc is its process.
	Model     *dynamodel.Control
	ModelProc *proc.Proc
	SQS       *enginetest.Process
	// Secrets is the Secrets Manager stand-in (nil without
	// Config.SecretsManager).
	Secrets *proc.Proc
	Feed    *proc.Proc
	Ingest  *proc.Proc

	// CA is the feed's certificate authority (nil with PlainWS).
	CA *tlsca.CA
	// FeedClient drives the feed's controls and reads its records.
	FeedClient *feed.Client
	// API is a client of the ingest front.
	API *apiclient.Client
	// QueueURL is the work queue's URL.
	QueueURL string
	// AdminToken is the workers' admin token (WSFLEET_ADMIN_TOKEN), drawn
	// for this stack: every admin endpoint but /healthz and /readyz
	// requires it (AdminTokenPath holds it for people and tools).
	AdminToken string

	sinks *Sinks
	dest  *destination // an AWS sink's destination (nil: stdout)

	mu      sync.Mutex
	workers []*Worker
	added   int // workers ever added: the next one's index is added+1 (never reused)

	closing  chan struct{}  // closed by Shutdown: the readiness watches end
	watchers sync.WaitGroup // the workers' readiness watches
	closed   sync.Once
}

// Start brings the stack up in order (engines, table and queues, feed,
// ingest, workers) and returns when every part is ready. On error it stops
// what it had started.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("devstack config: %w", err)
	}
	bins := []string{cfg.Bin.Streamer, cfg.Bin.Ingest, cfg.Bin.Feed}
	if cfg.DynamoModel != "" {
		bins = append(bins, cfg.Bin.Model)
	}
	if cfg.SecretsManager {
		bins = append(bins, cfg.Bin.SecretsManager)
	}
	for _, b := range bins {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("devstack: %s missing (run `make dev`, or build it: see mk/devstack.mk): %w", b, err)
		}
	}
	s := &Stack{cfg: cfg, log: cfg.Log, sinks: newSinks(cfg.KeepSinkRecords, cfg.OnSink), closing: make(chan struct{})}
	if err := s.start(ctx); err != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
		return nil, err
	}
	return s, nil
}

// Config is the stack's resolved configuration (ports filled in).
func (s *Stack) Config() Config { return s.cfg }

// RunID is the run id in this stack's worker ids ("" in memory, unless
// Config.RunID).
func (s *Stack) RunID() string { return s.cfg.RunID }

// runFile counts the runs on a data directory (one decimal number).
const runFile = "devstack-run"

// nextRun takes the data directory's next run number (1 when it has none)
// and records it, before any worker starts. A count it cannot read is an
// error, never a restart from 1 (that would reuse worker ids).
func nextRun(dataDir string) (int, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return 0, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dataDir, runFile)
	n := 0
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if n, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || n < 0 {
			return 0, fmt.Errorf("run count %s: %q is not a count (delete the data folder, or --fresh)", path, b)
		}
	case !errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("run count: %w", err)
	}
	n++
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("run count: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("run count: %w", err)
	}
	return n, nil
}

// AdminTokenPath is the file holding the workers' admin token (mode 0600):
// curl -H "Authorization: Bearer $(cat <it>)" http://<worker>/status.
func (s *Stack) AdminTokenPath() string { return filepath.Join(s.cfg.Dir, "admin-token") }

// LogDir is where every process's log goes.
func (s *Stack) LogDir() string { return filepath.Join(s.cfg.Dir, "logs") }

// DataDir is dynalite's data folder ("" when in memory).
func (s *Stack) DataDir() string {
	if s.cfg.InMemory {
		return ""
	}
	return filepath.Join(s.cfg.Dir, "data")
}

// APIURL is the ingest front's base URL.
func (s *Stack) APIURL() string { return "http://127.0.0.1:" + strconv.Itoa(s.cfg.Ports.API) }

// FeedURL is the feed's HTTP base URL (feed.URL(FeedURL(), session) is a
// session's WebSocket URL).
func (s *Stack) FeedURL() string {
	scheme := "https"
	if s.cfg.PlainWS {
		scheme = "http"
	}
	return scheme + "://127.0.0.1:" + strconv.Itoa(s.cfg.Ports.Feed)
}

// TLSDir is where the feed's CA lives (Dir/tls; its ca.pem is what the
// workers trust).
func (s *Stack) TLSDir() string { return filepath.Join(s.cfg.Dir, "tls") }

// CAFile is the feed's CA certificate ("" with PlainWS).
func (s *Stack) CAFile() string {
	if s.CA == nil {
		return ""
	}
	return s.CA.CertFile
}

// Sinks are the workers' sink records.
func (s *Stack) Sinks() *Sinks { return s.sinks }

func pickPort(p *int, what string) error {
	if *p == 0 {
		free, err := enginetest.FreePort()
		if err != nil {
			return err
		}
		*p = free
		return nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*p))
	if err != nil {
		return fmt.Errorf("%s port %d is taken (another stack running? a second stack needs its own --dir and other ports, or 0 for free ones): %w", what, *p, err)
	}
	return l.Close()
}

// namedPort is a port of the stack with the name its errors give it.
type namedPort struct {
	p    *int
	what string
}

// fixed are the ports Start checks (or picks, when 0) before it starts
// anything.
func (p *Ports) fixed() []namedPort {
	return []namedPort{{&p.Dynamo, "dynamo"}, {&p.SQS, "sqs"}, {&p.API, "ingest api"}, {&p.Feed, "feed"}}
}

// CheckTaken is Start's "port is taken" error for the first of p's ports
// (those not 0) that something listens on, found without starting or
// touching anything: make dev checks before --fresh deletes.
func (p Ports) CheckTaken() error {
	for _, np := range p.fixed() {
		if *np.p != 0 {
			if err := pickPort(np.p, np.what); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Stack) start(ctx context.Context) error {
	c := &s.cfg
	for _, np := range c.Ports.fixed() {
		if err := pickPort(np.p, np.what); err != nil {
			return err
		}
	}
	if c.Ports.AdminBase == 0 {
		// Workers get free ports one by one (AddWorker).
		c.Ports.AdminBase = -1
	}
	if err := os.MkdirAll(s.LogDir(), 0o755); err != nil {
		return fmt.Errorf("log dir: %w", err)
	}
	s.AdminToken = rand.Text()
	if err := os.WriteFile(s.AdminTokenPath(), []byte(s.AdminToken+"\n"), 0o600); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	if c.RunID == "" && !c.InMemory {
		n, err := nextRun(s.DataDir())
		if err != nil {
			return err
		}
		c.RunID = "run" + strconv.Itoa(n)
	}
	var err error
	dynPort := c.Ports.Dynamo
	if c.DynamoModel != "" {
		dynPort = 0 // the model takes Ports.Dynamo
	}
	s.Dynamo, err = enginetest.NewDynalite(enginetest.Options{Root: c.Root, LogDir: s.LogDir(), DataDir: s.DataDir(), Port: dynPort, OnExit: c.OnExit})
	if err != nil {
		return err
	}
	if err := s.Dynamo.Start(); err != nil {
		return err
	}
	if c.DynamoModel != "" {
		if err := s.startModel(ctx); err != nil {
			return err
		}
	}
	s.SQS, err = enginetest.NewFauxqs(enginetest.Options{Root: c.Root, LogDir: s.LogDir(), Port: c.Ports.SQS, OnExit: c.OnExit})
	if err != nil {
		return err
	}
	if err := s.SQS.Start(); err != nil {
		return err
	}
	s.log.Info().Str("dynamo", s.DynamoEndpoint()).Str("dynamo_model", c.DynamoModel).Str("sqs", s.SQS.Endpoint()).Str("data", s.DataDir()).Str("run", c.RunID).Msg("engines up")
	if err := s.createResources(ctx); err != nil {
		return err
	}
	if c.SecretsManager {
		if err := s.startSecrets(ctx); err != nil {
			return err
		}
		s.log.Info().Str("secretsmanager", s.SecretsManagerEndpoint()).Str("prefix", SecretPrefix).Msg("secrets manager stand-in up")
	}
	if c.Sink != "" && c.Sink != SinkStdout {
		if err := s.startDestination(ctx); err != nil {
			return err
		}
	}

	s.FeedClient = feed.NewClient(s.FeedURL())
	if !c.PlainWS {
		if s.CA, err = tlsca.LoadOrNew(s.TLSDir()); err != nil {
			return err
		}
		if err := s.FeedClient.TrustCA(s.CA.CertFile); err != nil {
			return err
		}
	}
	s.Feed = &proc.Proc{
		Name: "feed", Argv: s.feedArgv(),
		Env: baseEnv(), Dir: c.Root, LogPath: filepath.Join(s.LogDir(), "feed.log"), OnExit: c.OnExit,
	}
	if err := s.Feed.Start(); err != nil {
		return err
	}
	if err := s.Feed.WaitReady(ctx, c.StartTimeout, proc.HTTPOKWith(s.FeedClient.HTTP, s.FeedURL()+"/healthz")); err != nil {
		return err
	}

	ingestEnv := append(s.awsEnv(), schema.EnvTableName+"="+c.Table, schema.EnvQueueURL+"="+s.QueueURL,
		schema.EnvAllowPrivateIPs+"=loopback", schema.EnvEnvironment+"=local")
	if s.Secrets != nil {
		ingestEnv = append(ingestEnv, schema.EnvSecretPrefix+"="+SecretPrefix, schema.EnvSecretHosts+"="+SecretHosts)
	}
	s.Ingest = &proc.Proc{
		Name: "ingest", Argv: []string{c.Bin.Ingest, "-port", strconv.Itoa(c.Ports.API)},
		Env: ingestEnv,
		Dir: c.Root, LogPath: filepath.Join(s.LogDir(), "ingest.log"), OnExit: c.OnExit,
	}
	if err := s.Ingest.Start(); err != nil {
		return err
	}
	if err := s.Ingest.WaitReady(ctx, c.StartTimeout, proc.HTTPOK(s.APIURL()+"/sessions?limit=1")); err != nil {
		return err
	}
	s.API, err = apiclient.NewClient(s.APIURL(), nil)
	if err != nil {
		return err
	}
	s.log.Info().Str("feed", s.FeedURL()).Str("api", s.APIURL()).Msg("feed and ingest up")

	for i := 0; i < c.Workers; i++ {
		if _, err := s.AddWorker(ctx); err != nil {
			return err
		}
	}
	return nil
}

// DynamoEndpoint is where the stack's clients reach DynamoDB: the model
// when there is one, else dynalite.
func (s *Stack) DynamoEndpoint() string {
	if s.Model != nil {
		return s.Model.Endpoint()
	}
	return s.Dynamo.Endpoint()
}

// startModel starts the DynamoDB model (Bin.Model) on Ports.Dynamo in front
// of the running dynalite; it logs to logs/dynamodel.log, the mirror
// dynalite it starts under logs/mirror.
func (s *Stack) startModel(ctx context.Context) error {
	c := &s.cfg
	s.ModelProc = &proc.Proc{
		Name: "dynamodel",
		Argv: []string{c.Bin.Model, "-port", strconv.Itoa(c.Ports.Dynamo), "-primary", s.Dynamo.Endpoint(), "-profile", c.DynamoModel,
			"-seed", strconv.FormatUint(max(c.DynamoModelSeed, 1), 10), "-log-dir", s.LogDir()},
		Env: baseEnv(), Dir: c.Root, LogPath: filepath.Join(s.LogDir(), "dynamodel.log"), OnExit: c.OnExit,
	}
	if err := s.ModelProc.Start(); err != nil {
		return err
	}
	s.Model = dynamodel.NewControl("http://127.0.0.1:" + strconv.Itoa(c.Ports.Dynamo))
	return s.ModelProc.WaitReady(ctx, c.StartTimeout, proc.HTTPOK(s.Model.Endpoint()+"/dynamodel/status"))
}

// feedArgv is the feed's command line.
func (s *Stack) feedArgv() []string {
	c := &s.cfg
	argv := []string{c.Bin.Feed, "-port", strconv.Itoa(c.Ports.Feed), "-rate", strconv.FormatFloat(c.FeedRate, 'f', -1, 64),
		"-mode", string(c.FeedMode), "-records", filepath.Join(s.LogDir(), "feed-records.jsonl")}
	if c.TenureHeader != "" {
		argv = append(argv, "-tenure-header", c.TenureHeader)
	}
	if c.FeedAdmitsStandby() {
		argv = append(argv, "-allow-standby")
	}
	if !c.PlainWS {
		argv = append(argv, "-tls-dir", s.TLSDir())
	}
	return append(argv, c.FeedArgs...)
}

// FeedAdmitsStandby reports whether the feed admits hot standby
// connections beside an owner's: AllowStandby, with the tenure header the
// feed tells them by.
func (c Config) FeedAdmitsStandby() bool { return c.AllowStandby && c.TenureHeader != "" }

// EngineEnv is the environment that points the AWS SDK (and the aws CLI) at
// the stack's engines.
func (s *Stack) EngineEnv() []string {
	env := []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + s.DynamoEndpoint(),
		"AWS_ENDPOINT_URL_SQS=" + s.SQS.Endpoint(),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
		"AWS_EC2_METADATA_DISABLED=true",
	}
	if e := s.SecretsManagerEndpoint(); e != "" {
		env = append(env, "AWS_ENDPOINT_URL_SECRETS_MANAGER="+e)
	}
	return env
}

func (s *Stack) awsEnv() []string { return append(baseEnv(), s.EngineEnv()...) }

// baseEnv is this process's environment without any AWS_ or WSFLEET_
// variable (a developer's profile must never reach the local stack).
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "WSFLEET_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func (s *Stack) createResources(ctx context.Context) error {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		// No idle connections (and their goroutines) left behind.
		HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(s.DynamoEndpoint()) })
	q := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(s.SQS.Endpoint()) })
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sessionitem.CreateTable(cctx, ddb, s.cfg.Table); err != nil {
		return err
	}
	qs, err := sqsnotify.CreateQueues(cctx, q, s.cfg.Queue, 30, 5)
	if err != nil {
		return err
	}
	s.QueueURL = qs.WorkURL
	s.log.Info().Str("table", s.cfg.Table).Str("queue", qs.WorkURL).Msg("table and queues ready")
	return nil
}

// Workers returns the stack's workers (running or not), in creation order.
func (s *Stack) Workers() []*Worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Worker(nil), s.workers...)
}

// Running returns the workers whose process is running.
func (s *Stack) Running() []*Worker {
	var out []*Worker
	for _, w := range s.Workers() {
		if w.Proc.Running() {
			out = append(out, w)
		}
	}
	return out
}

// WorkerByID returns the worker whose current or any past incarnation had
// the worker id id (nil when none).
func (s *Stack) WorkerByID(id string) *Worker {
	for _, w := range s.Workers() {
		for _, past := range w.IDs() {
			if past == id {
				return w
			}
		}
	}
	return nil
}

// StartSession starts session id on the stack's feed through the API, with
// resume by the feed's "from" parameter.
func (s *Stack) StartSession(ctx context.Context, id string) (apiclient.Change, error) {
	return s.API.Start(ctx, apiclient.StartRequest{
		ConnectionID: id, Spec: spec.Spec{WSURL: feed.URL(s.FeedURL(), id), Resume: &spec.Resume{QueryParam: feed.DefaultResumeParam}},
	})
}

// Shutdown stops everything gracefully, in order: every worker SIGTERM at
// once (they release their leases and write final checkpoints; SIGKILL after
// their shutdown deadline + 5 s), then ingest, the feed and the engines. It
// returns the problems it met (a worker that had to be killed, ...).
func (s *Stack) Shutdown(ctx context.Context) error {
	var errs []error
	grace := s.cfg.Worker.ShutdownDeadline
	if grace == 0 {
		grace = 30 * time.Second
	}
	grace += 5 * time.Second
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < grace {
		grace = max(time.Until(dl), time.Second)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, w := range s.Workers() {
		if !w.Proc.Running() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := w.Proc.Stop(grace)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if e := w.Proc.ExitErr(); e != nil {
				errs = append(errs, fmt.Errorf("%s exited: %w", w.ID(), e))
			}
		}()
	}
	wg.Wait()
	s.closed.Do(func() {
		if s.closing != nil {
			close(s.closing)
		}
	})
	s.watchers.Wait()
	s.log.Info().Msg("workers stopped")
	for _, w := range s.Workers() {
		if w.DynamoProxy != nil {
			w.DynamoProxy.Close()
		}
	}
	for _, p := range []*proc.Proc{s.Ingest, s.Feed, s.Secrets} {
		if p != nil {
			if err := p.Stop(5 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if s.FeedClient != nil && s.FeedClient.HTTP != nil {
		s.FeedClient.HTTP.CloseIdleConnections()
	}
	if s.API != nil {
		s.API.CloseIdleConnections()
	}
	s.stopDestination()
	if s.SQS != nil {
		s.SQS.Stop()
	}
	if s.ModelProc != nil {
		if err := s.ModelProc.Stop(5 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Dynamo != nil {
		s.Dynamo.Stop()
	}
	s.log.Info().Msg("stack stopped")
	return errors.Join(errs...)
}

// BuildBinaries builds the programs a stack runs into dir, from the
// workspace at root (the tests and drivers that bring their own stack).
// The streamer is its chaos build (-tags chaos): the harnesses' faults use
// its test-only lease clock offset, which the shipped binary refuses.
func BuildBinaries(root, dir string) (Binaries, error) {
	bins := Binaries{
		Streamer: filepath.Join(dir, "streamer"),
		Ingest:   filepath.Join(dir, "ingest-local"),
		Feed:     filepath.Join(dir, "feed"),
		Model:    filepath.Join(dir, "dynamodel"),
		// Built for a harness that turns Config.SecretsManager on.
		SecretsManager: filepath.Join(dir, "secretsmanager"),
	}
	for out, pkg := range map[string][]string{
		bins.Streamer:       {"-tags", "chaos", "./workers/streamer/cmd/streamer"},
		bins.Ingest:         {"./functions/ingest/cmd/ingest-local"},
		bins.Feed:           {"./testkit/feed/cmd/feed"},
		bins.Model:          {"./testkit/dynamodel/cmd/dynamodel"},
		bins.SecretsManager: {"./testkit/secretsmanager/cmd/secretsmanager"},
	} {
		cmd := exec.Command("go", append([]string{"build", "-o", out}, pkg...)...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
	}
	return bins, nil
}
