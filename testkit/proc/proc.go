// Package proc owns the child processes of the repository's harnesses: the
// local stack (scripts/devstack, `make dev`), the benchmarks, the chaos
// harness and the test engines (testkit/enginetest). A Proc starts a program
// in its own process group (a Ctrl-C at the terminal reaches only the
// harness, which stops its children in order) that is killed when the
// harness dies (Pdeathsig); it can be signalled, stopped with a grace period
// then killed, waited for, started again, and restarted on its own after it
// exits (Restart) with every exit reported (OnExit).
//
// No shipped binary imports this package: it is harness code, in the
// testkit module with the rest of the harness (shared/archtest checks).
package proc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Restart is a restart policy, the way ECS restarts a task: after an exit
// that Stop did not ask for, the process is started again after Delay. Each
// run that ends within StableAfter of its start doubles the delay of the
// next restart, up to MaxDelay; a run that lasted longer resets it.
type Restart struct {
	Delay       time.Duration // default 1 s
	MaxDelay    time.Duration // default 30 s
	StableAfter time.Duration // default 10 s
}

func (r Restart) withDefaults() Restart {
	if r.Delay <= 0 {
		r.Delay = time.Second
	}
	if r.MaxDelay < r.Delay {
		r.MaxDelay = max(30*time.Second, r.Delay)
	}
	if r.StableAfter <= 0 {
		r.StableAfter = 10 * time.Second
	}
	return r
}

// Exit is one run's end, or a restart that could not start.
type Exit struct {
	Name   string
	Pid    int            // 0 when it could not start
	Code   int            // exit code; -1 when a signal ended it or it could not start
	Signal syscall.Signal // the signal that ended it (0: it exited)
	Err    error          // the wait error (nil: exit code 0), or why it could not start
	Ran    time.Duration
	// Stopped: Stop ended it (an expected end, never restarted).
	Stopped bool
	// RestartIn is the delay after which it is started again (0: it is not).
	RestartIn time.Duration
}

// String says what happened, for a terminal: "worker-1 (pid 42) was killed
// by signal 9 (killed) after 3s; restarting in 1s".
func (e Exit) String() string {
	var what string
	switch {
	case e.Pid == 0:
		what = fmt.Sprintf("%s could not start: %v", e.Name, e.Err)
	case e.Signal != 0:
		what = fmt.Sprintf("%s (pid %d) was killed by signal %d (%v) after %v", e.Name, e.Pid, int(e.Signal), e.Signal, e.Ran.Round(time.Millisecond))
	default:
		what = fmt.Sprintf("%s (pid %d) exited with code %d after %v", e.Name, e.Pid, e.Code, e.Ran.Round(time.Millisecond))
	}
	if e.RestartIn > 0 {
		what += fmt.Sprintf("; restarting in %v", e.RestartIn)
	}
	return what
}

// Proc is one supervised child process. Set the fields before the first
// Start and do not change them afterwards. Stderr is appended to LogPath;
// stdout goes to LogPath too, or to /dev/null (DiscardStdout: a hot sink
// then costs only its write syscalls), or, when OnLine is set, every
// complete stdout line is appended to StdoutPath (when set) and handed to
// OnLine (a line cut short by the process ending is dropped and counted in
// Truncated).
type Proc struct {
	Name          string
	Argv          []string
	Env           []string
	Dir           string
	LogPath       string
	DiscardStdout bool
	StdoutPath    string
	OnLine        func(line []byte)
	// NextEnv, when set, is called before every start (the first, a manual
	// one and a restart) and gives that run's environment instead of Env.
	// It runs under the Proc's lock: it must not call the Proc's methods.
	NextEnv func() []string
	// Restart, when set, starts the process again after an exit Stop did
	// not ask for. nil: never.
	Restart *Restart
	// OnExit, when set, sees every exit and every restart that could not
	// start (from the process's own goroutine: keep it short).
	OnExit func(Exit)

	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{}
	exitErr   error
	starts    int
	truncated int
	stopping  bool          // Stop was called and no Start since
	pending   *time.Timer   // a scheduled restart
	delay     time.Duration // the last restart delay (the backoff doubles it)
}

// Start launches the process. It is an error to start a running one.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopping = false
	return p.startLocked()
}

func (p *Proc) runningLocked() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *Proc) startLocked() error {
	if p.runningLocked() {
		return fmt.Errorf("start %s: already running (pid %d)", p.Name, p.cmd.Process.Pid)
	}
	if p.pending != nil {
		p.pending.Stop()
		p.pending = nil
	}
	env := p.Env
	if p.NextEnv != nil {
		env = p.NextEnv()
	}
	var closers []io.Closer
	closeAll := func() {
		for _, c := range closers {
			c.Close()
		}
	}
	open := func(path string, flag int) (*os.File, error) {
		f, err := os.OpenFile(path, flag, 0o644)
		if err == nil {
			closers = append(closers, f)
		}
		return f, err
	}
	logf, err := open(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	if err != nil {
		return fmt.Errorf("start %s: log: %w", p.Name, err)
	}
	cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = p.Dir, env, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var pr, pw *os.File
	var outf io.Writer = io.Discard
	switch {
	case p.OnLine != nil:
		if p.StdoutPath != "" {
			if outf, err = open(p.StdoutPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND); err != nil {
				closeAll()
				return fmt.Errorf("start %s: stdout file: %w", p.Name, err)
			}
		}
		if pr, pw, err = os.Pipe(); err != nil {
			closeAll()
			return fmt.Errorf("start %s: pipe: %w", p.Name, err)
		}
		closers = append(closers, pr)
		cmd.Stdout = pw
	case p.DiscardStdout:
		if cmd.Stdout, err = open(os.DevNull, os.O_WRONLY); err != nil {
			closeAll()
			return fmt.Errorf("start %s: %w", p.Name, err)
		}
	}
	if err := cmd.Start(); err != nil {
		if pw != nil {
			pw.Close()
		}
		closeAll()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	pumped := make(chan struct{})
	if pr != nil {
		pw.Close() // the child holds the write end now
		go func() {
			defer close(pumped)
			p.pump(pr, outf)
		}()
	} else {
		close(pumped)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.exitErr = cmd, done, nil
	p.starts++
	started := time.Now()
	go func() {
		err := cmd.Wait()
		<-pumped
		closeAll()
		p.ended(cmd, done, err, time.Since(started))
	}()
	return nil
}

// ended records a run's end, reports it and schedules a restart.
func (p *Proc) ended(cmd *exec.Cmd, done chan struct{}, err error, ran time.Duration) {
	e := Exit{Name: p.Name, Pid: cmd.Process.Pid, Code: cmd.ProcessState.ExitCode(), Err: err, Ran: ran}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal()
	}
	p.mu.Lock()
	p.exitErr = err
	close(done)
	e.Stopped = p.stopping
	if !e.Stopped && p.Restart != nil {
		e.RestartIn = p.nextDelayLocked(ran)
	}
	p.mu.Unlock()
	p.report(e)
}

// nextDelayLocked is the delay before the restart after a run of ran.
func (p *Proc) nextDelayLocked(ran time.Duration) time.Duration {
	r := p.Restart.withDefaults()
	switch {
	case ran >= r.StableAfter || p.delay == 0:
		p.delay = r.Delay
	default:
		p.delay = min(2*p.delay, r.MaxDelay)
	}
	return p.delay
}

// report hands e to OnExit, then schedules the restart e announces (unless
// Stop or Start came in between).
func (p *Proc) report(e Exit) {
	if p.OnExit != nil {
		p.OnExit(e)
	}
	if e.RestartIn == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping || p.runningLocked() {
		return
	}
	p.pending = time.AfterFunc(e.RestartIn, p.restart)
}

func (p *Proc) restart() {
	p.mu.Lock()
	if p.stopping || p.runningLocked() {
		p.mu.Unlock()
		return
	}
	p.pending = nil
	err := p.startLocked()
	var e Exit
	if err != nil {
		e = Exit{Name: p.Name, Code: -1, Err: err, RestartIn: p.nextDelayLocked(0)}
	}
	p.mu.Unlock()
	if err != nil {
		p.report(e)
	}
}

func (p *Proc) pump(r io.Reader, out io.Writer) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line) > 0 || (err == bufio.ErrBufferFull) {
			line = append(line, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if len(line) > 0 || len(chunk) > 0 {
				p.mu.Lock()
				p.truncated++
				p.mu.Unlock()
			}
			return
		}
		full := chunk
		if len(line) > 0 {
			full = line
		}
		_, _ = out.Write(full)
		p.OnLine(bytes.TrimRight(full, "\r\n"))
		line = line[:0]
	}
}

// Pid is the current (or last) run's process id (0 when never started).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Starts is how many times the process was started.
func (p *Proc) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Truncated is how many stdout lines were cut short by the process ending.
func (p *Proc) Truncated() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.truncated
}

// Running reports whether the process was started and has not ended.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// Done is closed when the current run ends (nil before the first Start).
func (p *Proc) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// ExitErr is the last run's exit error (nil: exited 0, or still running).
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// Signal sends sig to the process group.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return fmt.Errorf("signal %s %v: not running", p.Name, sig)
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("signal %s %v: %w", p.Name, sig, err)
	}
	return nil
}

// Kill sends SIGKILL (a crash) and waits for the run to end.
func (p *Proc) Kill(ctx context.Context) error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	return p.Wait(ctx)
}

// Term sends SIGTERM (a graceful stop) without waiting.
func (p *Proc) Term() error { return p.Signal(syscall.SIGTERM) }

// Pause sends SIGSTOP.
func (p *Proc) Pause() error { return p.Signal(syscall.SIGSTOP) }

// Resume sends SIGCONT.
func (p *Proc) Resume() error { return p.Signal(syscall.SIGCONT) }

// Wait waits for the current run to end. It returns nil when it ended,
// whatever its exit status (see ExitErr), or ctx's error.
func (p *Proc) Wait(ctx context.Context) error {
	d := p.Done()
	if d == nil {
		return nil
	}
	select {
	case <-d:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait %s: %w", p.Name, ctx.Err())
	}
}

// Stop ends the process and any scheduled restart: SIGCONT (in case it is
// paused), SIGTERM, then SIGKILL if it has not ended after grace. It returns
// an error when the process had to be killed.
func (p *Proc) Stop(grace time.Duration) error {
	p.mu.Lock()
	p.stopping = true
	if p.pending != nil {
		p.pending.Stop()
		p.pending = nil
	}
	running, done := p.runningLocked(), p.done
	p.mu.Unlock()
	if !running {
		return nil
	}
	_ = p.Signal(syscall.SIGCONT)
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	}
	_ = p.Signal(syscall.SIGKILL)
	<-done
	return errors.New(p.Name + ": did not stop within " + grace.String() + ", killed")
}

// WaitReady polls probe every 50 ms until it returns nil, the process
// exits, timeout passes or ctx ends.
func (p *Proc) WaitReady(ctx context.Context, timeout time.Duration, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil {
			last = err // not the deadline cutting the last probe short
		}
		if !p.Running() {
			return fmt.Errorf("%s exited before it was ready (%v); see %s", p.Name, p.ExitErr(), p.LogPath)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %v (last: %v); see %s", p.Name, timeout, last, p.LogPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var probeClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// HTTPOK is a WaitReady probe: a GET of url that answers 2xx.
func HTTPOK(url string) func(context.Context) error { return HTTPOKWith(probeClient, url) }

// HTTPOKWith is HTTPOK through client (an https server with a private CA:
// a client that trusts it).
func HTTPOKWith(client *http.Client, url string) func(context.Context) error {
	probeClient := client
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := probeClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
		}
		return nil
	}
}
