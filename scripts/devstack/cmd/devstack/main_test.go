package main

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/proc"
)

// Every exit the stack did not ask for is said on the terminal; the ones not
// restarted make the stack's exit status non-zero.
func TestExitLog(t *testing.T) {
	var out bytes.Buffer
	l := &exitLog{out: &out}
	l.report(proc.Exit{Name: "worker-1", Pid: 7, Code: -1, Signal: syscall.SIGKILL, Err: errors.New("signal: killed"), RestartIn: time.Second})
	l.report(proc.Exit{Name: "worker-2", Pid: 8, Code: 0, Stopped: true})
	if err := l.err(); err != nil {
		t.Fatalf("a restarted worker and a stopped one: %v", err)
	}
	l.report(proc.Exit{Name: "worker-3", Pid: 9, Code: 0, Ran: time.Minute})
	text := out.String()
	for _, want := range []string{"worker-1 (pid 7) was killed by signal 9 (killed) after 0s; restarting in 1s", "worker-3 (pid 9) exited with code 0 after 1m0s; not restarted"} {
		if !strings.Contains(text, want) {
			t.Errorf("terminal lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "worker-2") {
		t.Errorf("a stop asked for is reported:\n%s", text)
	}
	if err := l.err(); err == nil || !strings.Contains(err.Error(), "worker-3 (pid 9) exited with code 0") || strings.Contains(err.Error(), "worker-1") {
		t.Fatalf("exit status: %v", err)
	}
}
