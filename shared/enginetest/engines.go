// Package enginetest owns the local AWS engines that tests and the local stack
// run against: dynalite (DynamoDB) and fauxqs (SQS), both from the repository's
// pinned node_modules, started on free loopback ports with readiness checks
// and stopped cleanly. When AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_SQS
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
	"sync"
	"syscall"
	"time"
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

// FreePort returns a currently free TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Process is one engine process on a fixed loopback port. Stop and Start may
// be called repeatedly (tests kill an engine and bring it back on the same
// port).
type Process struct {
	Name string
	Port int
	argv []string
	dir  string
	log  *os.File

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Endpoint is the engine's http URL.
func (p *Process) Endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(p.Port) }

// Start launches the process and waits until its port accepts connections.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return nil
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir = p.dir
	cmd.Stdout = p.log
	cmd.Stderr = p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p.Port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			return fmt.Errorf("start %s: exited before listening (log: %s)", p.Name, p.log.Name())
		default:
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			return fmt.Errorf("start %s: port %d not open after 20s (log: %s)", p.Name, p.Port, p.log.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.cmd, p.done = cmd, done
	return nil
}

// Stop ends the process: SIGTERM, then SIGKILL after two seconds.
func (p *Process) Stop() { p.signal(syscall.SIGTERM) }

// Kill ends the process with SIGKILL at once (a crash).
func (p *Process) Kill() { p.signal(syscall.SIGKILL) }

func (p *Process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	p.cmd, p.done = nil, nil
}

// Pause stops the process with SIGSTOP (the port stays bound but nothing answers).
func (p *Process) Pause() error { return p.kill(syscall.SIGSTOP) }

// Resume continues a paused process.
func (p *Process) Resume() error { return p.kill(syscall.SIGCONT) }

func (p *Process) kill(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s: not running", p.Name)
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Options say where the engines keep their logs and data.
type Options struct {
	Root    string // repository root (default RepoRoot())
	LogDir  string // default a temp dir
	DataDir string // dynalite on disk under it when set; in memory otherwise
	Port    int    // 0 picks a free port
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
	f, err := os.OpenFile(filepath.Join(o.LogDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	return &Process{Name: name, Port: o.Port, argv: argv, dir: o.Root, log: f}, nil
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
	if err := o.fill(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(o.Root, "node_modules", "fauxqs")); err != nil {
		return nil, fmt.Errorf("fauxqs: not installed under %s/node_modules (run `make deps`): %w", o.Root, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("fauxqs: %w", err)
	}
	return newProcess("fauxqs", o, []string{node, filepath.Join(o.Root, "scripts", "engines", "fauxqs.mjs"), strconv.Itoa(o.Port)})
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
func StartFauxqs(o Options) (*Process, error) {
	p, err := NewFauxqs(o)
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
