package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// `make dev | tee` then Ctrl-C: tee dies first. With its stdout a pipe
// nobody reads, bin/devstack still comes up, and on SIGINT stops its worker
// gracefully (the worker says "worker stopped", and leaves: its record in
// the table is LEFT, not ALIVE or DEAD) and exits 0.
func TestBrokenStdoutDoesNotKillTheShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack")
	}
	root := enginetest.InstalledRoot(t)
	bin := installedBin(t, root, "devstack")
	dir := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone: every write to stdout is EPIPE / SIGPIPE
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--dir", dir, "--workers", "1", "--dynamo-port", "0", "--sqs-port", "0", "--api-port", "0", "--feed-port", "0",
		"--admin-port-base", "0", "--secrets-manager=false")
	cmd.Stdout, cmd.Stderr = w, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ended := false
	defer func() {
		if !ended {
			cmd.Process.Kill()
			<-done
		}
	}()
	log := func(name string) string { b, _ := os.ReadFile(filepath.Join(dir, "logs", name)); return string(b) }
	testwait.Eventually(t, time.Minute, "worker-1 up", func() bool {
		select {
		case err = <-done:
			ended = true
			return true
		default:
		}
		return strings.Contains(log("devstack.log"), `"message":"worker up"`)
	})
	if ended {
		// What is left in the table is still checked below.
		t.Errorf("devstack ended before Ctrl-C: %v\n%s\ndevstack.log:\n%s", err, stderr.String(), log("devstack.log"))
	} else {
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case err = <-done:
			ended = true
		case <-time.After(90 * time.Second):
			t.Fatalf("devstack did not end after SIGINT:\n%s", log("devstack.log"))
		}
		if err != nil {
			t.Errorf("devstack exit: %v\n%s", err, stderr.String())
		}
	}
	if l := log("worker-1.log"); !strings.Contains(l, `"message":"worker stopped"`) || strings.Contains(l, "left for the takeover") {
		t.Errorf("worker-1 did not stop gracefully:\n%s", l)
	}
	if !strings.Contains(log("devstack.log"), `"message":"stack stopped"`) {
		t.Errorf("devstack.log lacks the stack's stop:\n%s", log("devstack.log"))
	}
	// The table: the stack's dynalite ends with it, so its data folder is
	// read by a dynalite started on it again. The run's only worker left
	// (LEFT, off the alive list); a killed one would still be ALIVE there
	// (nobody left to declare it DEAD).
	ws := stoppedStackWorkers(t, root, dir)
	t.Logf("worker records after the shutdown: %v", ws)
	if len(ws) != 1 {
		t.Errorf("the table holds worker records %v; want the run's one worker", ws)
	}
	for id, w := range ws {
		if w.State != schema.WorkerLeft || w.List == schema.WorkerListAlive {
			t.Errorf("after the shutdown the table holds %s %s (list %s); want %s, off the %s list", id, w.State, w.List, schema.WorkerLeft, schema.WorkerListAlive)
		}
	}
}
