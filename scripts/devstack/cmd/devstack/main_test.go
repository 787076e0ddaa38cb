package main

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/testkit/proc"
)

// Every exit the stack did not ask for is said on the terminal; the ones not
// restarted make the stack's exit status non-zero. Worker lines name the
// incarnation; an exit before readiness says so, with the log, and is not
// "restarting"; the other processes' exits also go to the file log.
func TestExitLog(t *testing.T) {
	var out, file bytes.Buffer
	l := &exitLog{out: &out, file: zerolog.New(&file), root: "/repo"}
	l.worker(devstack.WorkerEvent{ID: "worker-1-run2", Slot: 1, Pid: 6, Admin: "127.0.0.1:8801", Log: "/repo/.dev/logs/worker-1.log"})
	l.worker(devstack.WorkerEvent{ID: "worker-1-run2", Slot: 1, Pid: 7, Log: "/repo/.dev/logs/worker-1.log",
		Exit: &proc.Exit{Name: "worker-1-run2", Pid: 7, Code: -1, Signal: syscall.SIGKILL, Err: errors.New("signal: killed"), RestartIn: time.Second}})
	l.worker(devstack.WorkerEvent{ID: "worker-2-run2", Slot: 2, Pid: 8, Exit: &proc.Exit{Name: "worker-2-run2", Pid: 8, Code: 0, Stopped: true}})
	if err := l.err(); err != nil {
		t.Fatalf("a restarted worker and a stopped one: %v", err)
	}
	l.worker(devstack.WorkerEvent{ID: "worker-3-run2.r2", Slot: 3, Pid: 9, Log: "/repo/.dev/logs/worker-3.log", Exit: &proc.Exit{Name: "worker-3-run2.r2", Pid: 9, Code: 0, Ran: time.Minute}})
	l.worker(devstack.WorkerEvent{ID: "worker-4-run2", Slot: 4, Pid: 10, Log: "/repo/.dev/logs/worker-4.log", BeforeReady: true,
		Exit: &proc.Exit{Name: "worker-4-run2", Pid: 10, Code: 1, Err: errors.New("exit status 1"), Ran: 12 * time.Millisecond}})
	l.report(proc.Exit{Name: "feed", Pid: 11, Code: 2, Err: errors.New("exit status 2"), Ran: time.Second})
	text := out.String()
	for _, want := range []string{
		"worker-1-run2 up (pid 6, admin 127.0.0.1:8801)",
		"worker-1-run2 (pid 7) was killed by signal 9 (killed) after 0s; restarting in 1s",
		"worker-3-run2.r2 (pid 9) exited with code 0 after 1m0s; not restarted",
		"worker-4-run2 (pid 10) exited with code 1 after 12ms before it was ready; see .dev/logs/worker-4.log; not restarted",
		"feed (pid 11) exited with code 2 after 1s; not restarted",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("terminal lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "worker-2") || strings.Contains(text, "worker-4-run2 (pid 10) exited with code 1 after 12ms before it was ready; see .dev/logs/worker-4.log; restarting") {
		t.Errorf("a stop asked for is reported, or an exit before readiness restarts:\n%s", text)
	}
	for _, want := range []string{`"report":"worker-1-run2 up (pid 6, admin 127.0.0.1:8801)"`, `"report":"worker-1-run2 (pid 7) was killed by signal 9 (killed) after 0s; restarting in 1s"`,
		`"report":"worker-4-run2 (pid 10) exited with code 1 after 12ms before it was ready; see .dev/logs/worker-4.log; not restarted"`, `"report":"feed (pid 11) exited with code 2 after 1s; not restarted"`} {
		if !strings.Contains(file.String(), want) {
			t.Errorf("file log lacks %s:\n%s", want, file.String())
		}
	}
	err := l.err()
	if err == nil || !strings.Contains(err.Error(), "worker-3-run2.r2 (pid 9) exited with code 0") || strings.Contains(err.Error(), "worker-1") {
		t.Fatalf("exit status: %v", err)
	}
}
