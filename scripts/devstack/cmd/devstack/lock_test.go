package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/syncbuf"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// A second start on a state folder a running stack holds, with and without
// --fresh, refuses at once naming the holder's pid, and touches nothing of
// the first: its data, token, run count, log and sinks. The first stack is
// a real process holding the folder's lock as devstack does (flock on
// devstack.lock, its pid in it).
func TestSecondStartOnOneFolderRefuses(t *testing.T) {
	enginetest.InstalledRoot(t)
	dir := t.TempDir()
	holder := exec.Command("flock", "--exclusive", filepath.Join(dir, "devstack.lock"), "sleep", "300")
	if err := holder.Start(); err != nil {
		t.Fatalf("flock(1) (util-linux): %v", err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	pid := strconv.Itoa(holder.Process.Pid)
	testwait.Eventually(t, 10*time.Second, "the holder's lock", func() bool {
		f, err := os.Open(filepath.Join(dir, "devstack.lock"))
		if err != nil {
			return false
		}
		defer f.Close()
		return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
	})
	if err := os.WriteFile(filepath.Join(dir, "devstack.lock"), []byte(pid+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"data/devstack-run":        "4\n",
		"data/table.ldb":           "sessions",
		"admin-token":              "the-first-stack's-token\n",
		"logs/devstack.log":        "{\"msg\":\"engines up\"}\n",
		"logs/worker-1.sink.jsonl": "{\"seq\":1}\n",
	}
	for p, v := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, extra := range [][]string{nil, {"--fresh"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var out syncbuf.Buffer
		args := append([]string{"--dir", dir, "--dynamo-port", "0", "--sqs-port", "0", "--api-port", "0", "--feed-port", "0", "--admin-port-base", "0"}, extra...)
		err := run(ctx, args, &out)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "pid "+pid) || !strings.Contains(err.Error(), "--dir") {
			t.Errorf("%v: second start = %v, want a refusal naming pid %s and --dir", extra, err, pid)
		}
		for p, v := range files {
			if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != v {
				t.Errorf("%v: the first stack's %s = %q, %v; want %q", extra, p, b, err, v)
			}
		}
	}
}

// A misspelled flag is one error with the nearest flag, not the usage.
func TestFlagTypoSuggests(t *testing.T) {
	err := run(context.Background(), []string{"--worker=2"}, new(syncbuf.Buffer))
	if err == nil || !strings.Contains(err.Error(), "did you mean --workers?") || !strings.Contains(err.Error(), "-h") {
		t.Fatalf("--worker=2: %v", err)
	}
}
