package devstack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Proc is one child process of the stack (a worker, the ingest front, the
// feed). It can be started again after it ended, signalled (kill -9, SIGTERM,
// SIGSTOP, SIGCONT) and waited for. Its stderr is appended to LogPath; its
// stdout too, unless OnLine is set: then every complete stdout line is
// appended to StdoutPath and handed to OnLine (a line cut short by a crash is
// dropped and counted in Truncated).
//
// The child runs in its own process group (a Ctrl-C at the terminal reaches
// only the stack, which then stops the children in order) and is killed if
// the stack's process dies (Pdeathsig).
type Proc struct {
	Name       string
	Argv       []string
	Env        []string
	Dir        string
	LogPath    string
	StdoutPath string
	OnLine     func(line []byte)

	mu        sync.Mutex
	cmd       *exec.Cmd
	done      chan struct{}
	exitErr   error
	starts    int
	truncated int
}

// Start launches the process. It is an error to start a running one.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("start %s: already running (pid %d)", p.Name, p.cmd.Process.Pid)
		}
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: log: %w", p.Name, err)
	}
	cmd := exec.Command(p.Argv[0], p.Argv[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = p.Env
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var pr, pw *os.File
	var outf *os.File
	if p.OnLine != nil {
		if outf, err = os.OpenFile(p.StdoutPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			logf.Close()
			return fmt.Errorf("start %s: stdout file: %w", p.Name, err)
		}
		if pr, pw, err = os.Pipe(); err != nil {
			logf.Close()
			outf.Close()
			return fmt.Errorf("start %s: pipe: %w", p.Name, err)
		}
		cmd.Stdout = pw
	} else {
		cmd.Stdout = logf
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		if pr != nil {
			pr.Close()
			pw.Close()
			outf.Close()
		}
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	pumped := make(chan struct{})
	if pr != nil {
		pw.Close() // the child holds the write end now
		go func() {
			defer close(pumped)
			defer outf.Close()
			defer pr.Close()
			p.pump(pr, outf)
		}()
	} else {
		close(pumped)
	}
	p.cmd, p.done, p.exitErr = cmd, done, nil
	p.starts++
	go func() {
		err := cmd.Wait()
		<-pumped
		logf.Close()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
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

// Pid is the running process's id (0 when not started).
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
	if p.cmd == nil {
		return fmt.Errorf("%s: not started", p.Name)
	}
	select {
	case <-p.done:
		return fmt.Errorf("%s: not running", p.Name)
	default:
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("signal %s %v: %w", p.Name, sig, err)
	}
	return nil
}

// Kill sends SIGKILL (a crash) and waits for the process to end.
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

// Stop ends the process gracefully: SIGCONT (in case it is paused), SIGTERM,
// then SIGKILL if it has not ended after grace. It returns the exit error of
// a process that had to be killed.
func (p *Proc) Stop(grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = p.Signal(syscall.SIGCONT)
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.Done():
		return nil
	case <-t.C:
	}
	_ = p.Signal(syscall.SIGKILL)
	<-p.Done()
	return errors.New(p.Name + ": did not stop within " + grace.String() + ", killed")
}
