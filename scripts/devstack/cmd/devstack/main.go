// Command devstack runs the local stack (`make dev`): dynalite on disk under
// .dev/data, fauxqs, the table and queues, the demo feed, the ingest local
// front and 3 streamer workers, each a separate process on 127.0.0.1. It
// prints the endpoints and a curl that starts a session, says when a worker
// incarnation is up (worker-3-run2.r2 up (pid N, ...)) and when a process
// exits, on the terminal and in .dev/logs/devstack.log, and restarts a
// worker that did (--restart=false: not; the stack then ends with a
// non-zero status naming it), then runs until
// Ctrl-C, when it stops everything gracefully (workers first: they release
// their leases and write final checkpoints). A second Ctrl-C exits at once
// (the children die with it). Every port has a flag and an environment
// variable (WSFLEET_DEV_*); logs go to .dev/logs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/cmdmain"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/proc"
)

// main is cmdmain's: the first Ctrl-C (or SIGTERM) cancels run's context
// and the default action is back, so a second one kills us (and, by
// Pdeathsig, the children) at once.
func main() {
	// `make dev | tee`: the reader may die first on Ctrl-C; a write to it
	// must fail (and be ignored), not kill us halfway through the shutdown.
	signal.Ignore(syscall.SIGPIPE)
	cmdmain.Run("devstack", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout) })
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func run(ctx context.Context, args []string, out io.Writer) error {
	cfg := devstack.DefaultConfig()
	fs := flag.NewFlagSet("devstack", flag.ContinueOnError)
	dir := fs.String("dir", os.Getenv("WSFLEET_DEV_DIR"), "state folder: data/ and logs/ (default <repo>/.dev)")
	fresh := fs.Bool("fresh", false, "delete the data folder first (forget every session)")
	restart := fs.Bool("restart", true, "restart a worker that exits (after 1 s, backing off to 30 s if it keeps exiting), as ECS does")
	fs.IntVar(&cfg.Workers, "workers", envInt("WSFLEET_DEV_WORKERS", cfg.Workers), "streamer workers")
	fs.IntVar(&cfg.Ports.Dynamo, "dynamo-port", envInt("WSFLEET_DEV_DYNAMO_PORT", cfg.Ports.Dynamo), "DynamoDB port (dynalite's, or the model's with -dynamo-model)")
	fs.StringVar(&cfg.DynamoModel, "dynamo-model", os.Getenv("WSFLEET_DEV_DYNAMO_MODEL"), "put the DynamoDB model in front of dynalite with this profile: aws (AWS latency, index lag, stale reads, throttling, ambiguous errors; docs/references.md) or dynalite (adds nothing); empty: dynalite alone")
	fs.IntVar(&cfg.Ports.SQS, "sqs-port", envInt("WSFLEET_DEV_SQS_PORT", cfg.Ports.SQS), "fauxqs port")
	fs.IntVar(&cfg.Ports.API, "api-port", envInt("WSFLEET_DEV_API_PORT", cfg.Ports.API), "ingest API port")
	fs.IntVar(&cfg.Ports.Feed, "feed-port", envInt("WSFLEET_DEV_FEED_PORT", cfg.Ports.Feed), "demo feed port")
	fs.IntVar(&cfg.Ports.AdminBase, "admin-port-base", envInt("WSFLEET_DEV_ADMIN_PORT_BASE", cfg.Ports.AdminBase), "worker N's admin port is this + N")
	fs.Float64Var(&cfg.FeedRate, "feed-rate", cfg.FeedRate, "feed messages per second per session")
	mode := fs.String("feed-mode", string(cfg.FeedMode), "feed policy: kick-older, refuse-newer or allow")
	fs.BoolVar(&cfg.PlainWS, "plain-ws", false, "serve the feed as plain ws:// (default: wss:// with a CA the stack makes in <state>/tls, which the workers trust)")
	fs.DurationVar(&cfg.Worker.LeaseTTL, "liveness-ttl", cfg.Worker.LeaseTTL, "workers' liveness TTL (WSFLEET_LEASE_TTL): how long a heartbeat keeps a worker alive in others' eyes")
	fs.DurationVar(&cfg.Worker.LeaseTTL, "lease-ttl", cfg.Worker.LeaseTTL, "the old name of -liveness-ttl")
	fs.DurationVar(&cfg.Worker.HeartbeatEvery, "heartbeat-every", cfg.Worker.HeartbeatEvery, "workers' heartbeat interval (one write per worker)")
	fs.DurationVar(&cfg.Worker.CheckpointEvery, "checkpoint-every", cfg.Worker.CheckpointEvery, "workers' default checkpoint interval (written only when a session advanced)")
	fs.DurationVar(&cfg.Worker.ReconcileEvery, "reconcile-every", cfg.Worker.ReconcileEvery, "workers' reconcile interval")
	fs.StringVar(&cfg.Worker.LogLevel, "log-level", cfg.Worker.LogLevel, "workers' log level")
	fs.BoolVar(&cfg.SecretsManager, "secrets-manager", true, "run the Secrets Manager stand-in (bin/secretsmanager): sessions may then hold {{secret:"+devstack.SecretPrefix+"NAME}} references")
	fs.DurationVar(&cfg.Worker.SecretCacheTTL, "secret-cache-ttl", 0, "how long workers keep a resolved secret (WSFLEET_SECRET_CACHE_TTL; 0: the worker's default, 5m): shorten it to see a rotation reach the next dial")
	fs.IntVar(&cfg.Ports.SecretsManager, "secrets-manager-port", envInt("WSFLEET_DEV_SECRETS_MANAGER_PORT", 0), "Secrets Manager stand-in port (0: a free one)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := feed.ParseMode(*mode)
	if err != nil {
		return err
	}
	cfg.FeedMode = m
	root, err := enginetest.RepoRoot()
	if err != nil {
		return err
	}
	cfg.Root = root
	cfg.Dir = *dir
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(root, ".dev")
	}
	// The folder's lock comes before anything in it is touched.
	release, err := devstack.Lock(cfg.Dir)
	if err != nil {
		return err
	}
	defer release()
	if *fresh {
		// A start that would fail on a taken port forgets nothing.
		if err := cfg.Ports.CheckTaken(); err != nil {
			return err
		}
		if err := devstack.Fresh(cfg.Dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("log dir: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(cfg.Dir, "logs", "devstack.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("devstack log: %w", err)
	}
	defer lf.Close()
	zerolog.TimeFieldFormat = zerolog.TimeFormatUnixMs
	log := zerolog.New(zerolog.MultiLevelWriter(lf, os.Stderr)).With().Timestamp().Str("component", "devstack").Logger()
	cfg.Log = log
	// Sink records are in the files; do not keep them in memory for hours.
	cfg.KeepSinkRecords = false

	exits := &exitLog{out: out, file: zerolog.New(lf).With().Timestamp().Str("component", "devstack").Logger(), root: root}
	cfg.OnExit = exits.report
	cfg.OnWorker = exits.worker
	if *restart {
		cfg.RestartWorkers = &proc.Restart{Delay: time.Second, MaxDelay: 30 * time.Second}
	}
	st, err := devstack.Start(ctx, cfg)
	if err != nil {
		return startErr(root, err)
	}
	// In one write, between the worker lines (an incarnation reported up
	// after Start returned must not land inside it).
	var banner strings.Builder
	printBanner(&banner, st, root)
	exits.print(banner.String())
	<-ctx.Done() // a second Ctrl-C now kills us (cmdmain), and by Pdeathsig the children
	fmt.Fprintln(out, "\nshutting down: workers first (SIGTERM: release + final checkpoint), then ingest, feed, engines ...")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Worker.ShutdownDeadline+30*time.Second)
	defer cancel()
	if err := st.Shutdown(sctx); err != nil {
		return errors.Join(fmt.Errorf("shutdown: %w", err), exits.err())
	}
	fmt.Fprintln(out, "stopped. Sessions are kept in", rel(root, st.DataDir()), "(make dev resumes them; --fresh forgets them).")
	return exits.err()
}

// exitLog says on the terminal when a worker incarnation is up and when a
// process of the stack exits without being asked to, and remembers the ones
// that were not restarted: the stack's exit status reports them. Every
// line it says also goes to devstack.log (file), with its fields.
type exitLog struct {
	out  io.Writer
	file zerolog.Logger // devstack.log only
	root string         // log paths are said relative to it
	mu   sync.Mutex
	dead []string
}

// report is an exit of the feed, ingest or an engine.
func (l *exitLog) report(e proc.Exit) {
	if e.Stopped {
		return
	}
	line := l.say(e.String(), e.RestartIn > 0)
	l.file.Warn().Str("event", "exit").Str("process", e.Name).Int("pid", e.Pid).Str("report", line).Msg("process exited")
}

// worker is a worker incarnation up or ended.
func (l *exitLog) worker(ev devstack.WorkerEvent) {
	if ev.Exit != nil && ev.Exit.Stopped {
		return
	}
	ev.Log = rel(l.root, ev.Log)
	if ev.Exit == nil {
		l.mu.Lock()
		fmt.Fprintf(l.out, "%s %s\n", time.Now().Format("15:04:05"), ev)
		l.mu.Unlock()
		l.file.Info().Str("event", "worker").Str("worker", ev.ID).Int("slot", ev.Slot).Int("pid", ev.Pid).Str("admin", ev.Admin).Str("report", ev.String()).Msg("worker up")
		return
	}
	line := l.say(ev.String(), ev.Exit.RestartIn > 0)
	l.file.Warn().Str("event", "worker").Str("worker", ev.ID).Int("slot", ev.Slot).Int("pid", ev.Pid).Bool("before_ready", ev.BeforeReady).Dur("restart_in", ev.Exit.RestartIn).Str("report", line).Msg("worker exited")
}

// print writes text to the terminal in one piece, between the reports.
func (l *exitLog) print(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.out, text)
}

// say prints an exit report (marked "; not restarted" unless restarting)
// and returns the line.
func (l *exitLog) say(what string, restarting bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !restarting {
		what += "; not restarted"
		l.dead = append(l.dead, strings.TrimSuffix(what, "; not restarted"))
	}
	fmt.Fprintf(l.out, "%s %s\n", time.Now().Format("15:04:05"), what)
	return what
}

// err names every process that ended on its own and was not restarted.
func (l *exitLog) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.dead) == 0 {
		return nil
	}
	return fmt.Errorf("not restarted: %s", strings.Join(l.dead, "; "))
}

// startErr is the stack's failed start for the terminal: a worker that
// exited before it was ready names its log relative to root, as the exit
// report before it does.
func startErr(root string, err error) error {
	var nr *devstack.NotReadyError
	if errors.As(err, &nr) {
		nr.Log = rel(root, nr.Log)
	}
	return err
}

func rel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}

func printBanner(out io.Writer, st *devstack.Stack, root string) {
	c := st.Config()
	fmt.Fprintf(out, "\nwsfleet local stack is up (every server on 127.0.0.1)\n")
	fmt.Fprintf(out, "  ingest API   %s\n", st.APIURL())
	policy := string(c.FeedMode)
	if c.FeedAdmitsStandby() {
		policy += ", standbys admitted"
	}
	fmt.Fprintf(out, "  demo feed    %s   (%.0f msg/s per session, %s; controls %s/control/stats)\n", feed.URL(st.FeedURL(), "<session>"), c.FeedRate, policy, st.FeedURL())
	if f := st.CAFile(); f != "" {
		fmt.Fprintf(out, "  feed TLS     CA %s, trusted by the workers (WSFLEET_EXTRA_CA_FILE); curl --cacert %s %s/control/stats\n", rel(root, f), rel(root, f), st.FeedURL())
	}
	engine := "dynalite"
	if c.DynamoModel != "" {
		engine = fmt.Sprintf("the DynamoDB model, profile %s, in front of dynalite at %s; controls %s/dynamodel/", c.DynamoModel, st.Dynamo.Endpoint(), st.DynamoEndpoint())
	}
	fmt.Fprintf(out, "  DynamoDB     %s   (%s, table %s, data %s)\n", st.DynamoEndpoint(), engine, c.Table, rel(root, st.DataDir()))
	fmt.Fprintf(out, "  SQS          %s   (fauxqs, queue %s)\n", st.SQS.Endpoint(), c.Queue)
	if e := st.SecretsManagerEndpoint(); e != "" {
		fmt.Fprintf(out, "  Secrets Mgr  %s   (testkit/secretsmanager's stand-in, in memory; references under %s; %s seeded)\n", e, devstack.SecretPrefix, devstack.DemoSecret)
	}
	for _, w := range st.Workers() {
		fmt.Fprintf(out, "  %-16s http://%s/status   sink %s   log %s\n", w.ID(), w.AdminAddr, rel(root, w.SinkPath()), rel(root, w.LogPath()))
	}
	fmt.Fprintf(out, "  admin token  %s   (every worker endpoint but /healthz and /readyz: curl -H \"Authorization: Bearer $(cat %s)\" …)\n",
		rel(root, st.AdminTokenPath()), rel(root, st.AdminTokenPath()))
	if st.RunID() != "" {
		fmt.Fprintf(out, "  run %s: this run's worker ids end in -%s (a restart adds .r2, .r3, ...); the records of earlier runs stay LEFT (DEAD if that run was killed)\n", st.RunID(), st.RunID())
	}
	fmt.Fprintf(out, "  liveness TTL %v, heartbeat every %v, checkpoint every %v, reconcile every %v; logs in %s\n\n", c.Worker.LeaseTTL, c.Worker.HeartbeatEvery, c.Worker.CheckpointEvery, c.Worker.ReconcileEvery, rel(root, st.LogDir()))
	fmt.Fprintf(out, "Start a session (copy-paste):\n")
	fmt.Fprintf(out, "  curl -sS -X POST %s/sessions -H 'content-type: application/json' \\\n", st.APIURL())
	fmt.Fprintf(out, "    -d '{\"connection_id\":\"hello\",\"ws_url\":\"%s\",\"resume_query_param\":\"from\"}'\n\n", feed.URL(st.FeedURL(), "hello"))
	api := ""
	if c.Ports.API != devstack.DefaultAPIPort {
		api = " --api " + st.APIURL()
	}
	fmt.Fprintf(out, "Then:\n")
	fmt.Fprintf(out, "  bin/wsfleet%s status          # ID STATE OWNER EPOCH LAST_SEQ LAST ERROR\n", api)
	fmt.Fprintf(out, "  tail -f %s/worker-*.sink.jsonl\n", rel(root, st.LogDir()))
	fmt.Fprintf(out, "  bin/wsfleet%s stop hello\n\n", api)
	if e := st.SecretsManagerEndpoint(); e != "" {
		printSecrets(out, st, e)
	}
	if c.RestartWorkers != nil {
		fmt.Fprintf(out, "A worker that exits is reported here (and in %s/devstack.log) and restarted after %v (--restart=false: not).\n", rel(root, st.LogDir()), c.RestartWorkers.Delay)
	}
	fmt.Fprintf(out, "Ctrl-C stops everything gracefully.\n")
}

// printSecrets says how to start a session whose header holds a secret
// reference, and how to put (rotate) a secret in the stand-in: with the
// aws CLI when it is installed, else with curl in the JSON 1.1 protocol
// (the stand-in wants an Authorization header, not a signature).
func printSecrets(out io.Writer, st *devstack.Stack, endpoint string) {
	fmt.Fprintf(out, "A session whose credential is a secret (resolved by the workers at every dial; GET shows secret_refs, never the value):\n")
	fmt.Fprintf(out, "  curl -sS -X POST %s/sessions -H 'content-type: application/json' \\\n", st.APIURL())
	fmt.Fprintf(out, "    -d '{\"connection_id\":\"secret-demo\",\"ws_url\":\"%s\",\"resume_query_param\":\"from\",\"headers\":{\"Authorization\":\"Bearer {{secret:%s#token}}\"}}'\n",
		feed.URL(st.FeedURL(), "secret-demo"), devstack.DemoSecret)
	value := `{"token":"rotated-token"}`
	fmt.Fprintf(out, "Rotate it (new dials use it within WSFLEET_SECRET_CACHE_TTL, 5m by default):\n")
	if _, err := exec.LookPath("aws"); err == nil {
		fmt.Fprintf(out, "  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local aws --region us-east-1 --endpoint-url %s \\\n", endpoint)
		fmt.Fprintf(out, "    secretsmanager put-secret-value --secret-id %s --secret-string '%s'\n\n", devstack.DemoSecret, value)
		return
	}
	body, _ := json.Marshal(map[string]string{"SecretId": devstack.DemoSecret, "SecretString": value})
	fmt.Fprintf(out, "  curl -sS -X POST %s/ -H 'Content-Type: application/x-amz-json-1.1' -H 'X-Amz-Target: secretsmanager.PutSecretValue' \\\n", endpoint)
	fmt.Fprintf(out, "    -H 'Authorization: local' -d '%s'\n\n", body)
}
