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
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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
	"github.com/wsfleet/wsfleet/testkit/dynamodel"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/proc"
	"github.com/wsfleet/wsfleet/testkit/tlsca"
)

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
