package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// child is a process the capacity runs start directly (not through
// devstack.Proc): its stdout can go to /dev/null, so that a worker's sink
// at tens of thousands of messages per second costs only its write
// syscalls, not a pipe reader or a file.
type child struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startChild starts argv in its own process group (killed with the driver:
// Pdeathsig), stderr appended to logPath, stdout to /dev/null.
func startChild(name string, argv, env []string, dir, logPath string) (*child, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: log: %w", name, err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, null, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		null.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		logf.Close()
		null.Close()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and, after grace, SIGKILL; it returns an error when
// the process had to be killed.
func (c *child) stop(grace time.Duration) error {
	if !c.running() {
		return nil
	}
	_ = syscall.Kill(-c.pid(), syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return nil
	case <-t.C:
	}
	_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
	<-c.done
	return fmt.Errorf("%s did not stop within %s: killed", c.name, grace)
}

// cleanEnv is this process's environment without AWS_ and WSFLEET_
// variables (a developer's profile or settings must not reach the stack).
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "WSFLEET_") || strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

var probeClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// waitHTTP polls url until it answers 2xx, alive reports false, or timeout.
func waitHTTP(ctx context.Context, url string, timeout time.Duration, alive func() bool, what string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		resp, err := probeClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return nil
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		last = err
		if alive != nil && !alive() {
			return fmt.Errorf("%s exited before it was ready (last: %v)", what, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (last: %v): %w", what, timeout, last, errors.Join(ctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
