// Package enginetest owns the local AWS engines that tests and the local stack
// run against: dynalite (DynamoDB), fauxqs (SQS) and kinesalite (Kinesis Data
// Streams), all from the repository's pinned node_modules, started on free
// loopback ports with readiness checks and stopped cleanly. When
// AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL_KINESIS
// are set (or WSFLEET_ENGINES=external) it uses those instead, so the same
// tests can run against other engines or real AWS.
package enginetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/wsfleet/wsfleet/testkit/proc"
)

// RepoRoot finds the repository root: WSFLEET_ROOT, or the nearest parent of
// the working directory holding go.work.
func RepoRoot() (string, error) {
	if r := os.Getenv("WSFLEET_ROOT"); r != "" {
		return r, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repo root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repo root: no go.work above the working directory (set WSFLEET_ROOT)")
		}
		dir = parent
	}
}

// Process is one engine process on a fixed loopback port (supervised by
// testkit/proc). Stop and Start may be called repeatedly (tests kill an
// engine and bring it back on the same port).
type Process struct {
	Name string
	Port int
	proc *proc.Proc
}

// Endpoint is the engine's http URL.
func (p *Process) Endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(p.Port) }

// Pid is the engine's process id (0 before the first Start).
func (p *Process) Pid() int { return p.proc.Pid() }

// LogPath is the engine's log (stdout and stderr).
func (p *Process) LogPath() string { return p.proc.LogPath }

// Running reports whether the engine process is running.
func (p *Process) Running() bool { return p.proc.Running() }

// Start launches the process (unless it runs) and waits until its port
// accepts connections.
func (p *Process) Start() error {
	if p.proc.Running() {
		return nil
	}
	if err := p.proc.Start(); err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(p.Port)
	err := p.proc.WaitReady(context.Background(), 20*time.Second, func(context.Context) error {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		_ = p.proc.Stop(time.Second)
		return fmt.Errorf("start %s on port %d: %w", p.Name, p.Port, err)
	}
	return nil
}

// Stop ends the process: SIGTERM, then SIGKILL after two seconds.
func (p *Process) Stop() { _ = p.proc.Stop(2 * time.Second) }

// Kill ends the process with SIGKILL at once (a crash) and waits for it.
func (p *Process) Kill() { _ = p.proc.Kill(context.Background()) }

// Pause stops the process with SIGSTOP (the port stays bound but nothing answers).
func (p *Process) Pause() error { return p.proc.Pause() }

// Resume continues a paused process.
func (p *Process) Resume() error { return p.proc.Resume() }

// Options say where the engines keep their logs and data.
type Options struct {
	Root    string // repository root (default RepoRoot())
	LogDir  string // default a temp dir
	DataDir string // dynalite on disk under it when set; in memory otherwise
	Port    int    // 0 picks a free port
	// OnExit, when set, sees every exit of the engine process (see proc.Proc).
	OnExit func(proc.Exit)
}

func (o *Options) fill() error {
	if o.Root == "" {
		r, err := RepoRoot()
		if err != nil {
			return err
		}
		o.Root = r
	}
	if o.LogDir == "" {
		d, err := os.MkdirTemp("", "wsfleet-engines-")
		if err != nil {
			return fmt.Errorf("log dir: %w", err)
		}
		o.LogDir = d
	}
	if o.Port == 0 {
		p, err := FreePort()
		if err != nil {
			return err
		}
		o.Port = p
	}
	return nil
}

func newProcess(name string, o Options, argv []string) (*Process, error) {
	if _, err := os.Stat(argv[0]); err != nil && filepath.IsAbs(argv[0]) {
		return nil, fmt.Errorf("%s: %s missing (run `make deps`): %w", name, argv[0], err)
	}
	if err := os.MkdirAll(o.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("%s log dir: %w", name, err)
	}
	return &Process{Name: name, Port: o.Port, proc: &proc.Proc{
		Name: name, Argv: argv, Dir: o.Root, LogPath: filepath.Join(o.LogDir, name+".log"), OnExit: o.OnExit,
	}}, nil
}

// NewDynalite prepares (does not start) a dynalite on 127.0.0.1.
func NewDynalite(o Options) (*Process, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(o.Root, "node_modules", "dynalite")); err != nil {
		return nil, fmt.Errorf("dynalite: not installed under %s/node_modules (run `make deps`): %w", o.Root, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("dynalite: %w", err)
	}
	// scripts/engines/dynalite.mjs: dynalite on 127.0.0.1 that survives a
	// client aborting a request (dynalite's own CLI dies of it).
	argv := []string{node, filepath.Join(o.Root, "scripts", "engines", "dynalite.mjs"), strconv.Itoa(o.Port)}
	if o.DataDir != "" {
		if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("dynalite data dir: %w", err)
		}
		argv = append(argv, o.DataDir)
	}
	return newProcess("dynalite", o, argv)
}

// NewFauxqs prepares (does not start) a fauxqs on 127.0.0.1.
func NewFauxqs(o Options) (*Process, error) {
	return newNodeEngine("fauxqs", "fauxqs.mjs", o)
}

// NewKinesalite prepares (does not start) a kinesalite (Kinesis Data
// Streams) on 127.0.0.1; new streams are ACTIVE at once.
func NewKinesalite(o Options) (*Process, error) {
	return newNodeEngine("kinesalite", "kinesalite.mjs", o)
}

// newNodeEngine prepares the npm package name, started by
// scripts/engines/script with the port as its argument.
func newNodeEngine(name, script string, o Options) (*Process, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(o.Root, "node_modules", name)); err != nil {
		return nil, fmt.Errorf("%s: not installed under %s/node_modules (run `make deps`): %w", name, o.Root, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return newProcess(name, o, []string{node, filepath.Join(o.Root, "scripts", "engines", script), strconv.Itoa(o.Port)})
}

// StartDynalite prepares and starts a dynalite.
func StartDynalite(o Options) (*Process, error) {
	p, err := NewDynalite(o)
	if err != nil {
		return nil, err
	}
	return p, p.Start()
}

// StartFauxqs prepares and starts a fauxqs.
func StartFauxqs(o Options) (*Process, error) { return started(NewFauxqs(o)) }

// StartKinesalite prepares and starts a kinesalite.
func StartKinesalite(o Options) (*Process, error) { return started(NewKinesalite(o)) }

func started(p *Process, err error) (*Process, error) {
	if err != nil {
		return nil, err
	}
	return p, p.Start()
}

// SetLocalCredentials fills the AWS variables the SDK needs to talk to a
// local engine when the environment has none.
func SetLocalCredentials() {
	setDefault("AWS_REGION", "us-east-1")
	setDefault("AWS_ACCESS_KEY_ID", "local")
	setDefault("AWS_SECRET_ACCESS_KEY", "local")
	// Never let a developer's profile or IMDS be consulted for local engines.
	setDefault("AWS_EC2_METADATA_DISABLED", "true")
}

func setDefault(k, v string) {
	if os.Getenv(k) == "" {
		os.Setenv(k, v)
	}
}

// WaitContext is a helper for callers that want a context bounded by d.
func WaitContext(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
