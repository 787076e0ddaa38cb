package devstack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/shared/enginetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestProcLinesSignalsAndRestart(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var lines []string
	p := &Proc{
		Name: "sh",
		// Two complete lines, one cut short, then wait for a signal.
		Argv:       []string{"/bin/sh", "-c", `printf 'one\ntwo\npart'; trap 'exit 0' TERM; while :; do sleep 0.05; done`},
		Env:        os.Environ(),
		LogPath:    filepath.Join(dir, "sh.log"),
		StdoutPath: filepath.Join(dir, "sh.out"),
		OnLine: func(b []byte) {
			mu.Lock()
			lines = append(lines, string(b))
			mu.Unlock()
		},
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err == nil {
		t.Fatal("started twice")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(lines)
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lines %v", lines)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Running() || p.ExitErr() != nil || p.Truncated() != 1 {
		t.Fatalf("running %v exit %v truncated %d", p.Running(), p.ExitErr(), p.Truncated())
	}
	b, _ := os.ReadFile(p.StdoutPath)
	if string(b) != "one\ntwo\n" {
		t.Fatalf("stdout file %q", b)
	}
	// Restart, then crash it.
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Starts() != 2 || p.ExitErr() == nil || !strings.Contains(p.ExitErr().Error(), "killed") {
		t.Fatalf("starts %d exit %v", p.Starts(), p.ExitErr())
	}
	if err := p.Signal(syscall.SIGTERM); err == nil {
		t.Fatal("signalled a dead process")
	}
}

func TestSinks(t *testing.T) {
	var seen int
	s := newSinks(true, func(SinkRecord) { seen++ })
	s.line([]byte(`{"connection_id":"a","seq":3,"lease_epoch":2,"worker_id":"w","received_at_ms":5,"data":{"seq":3}}`))
	s.line([]byte(`not json`))
	s.line([]byte(`{"seq":4}`))
	if s.Count() != 1 || s.BadLines() != 2 || seen != 1 || len(s.Records()) != 1 || s.Last()["a"].Seq != 3 {
		t.Fatalf("count %d bad %d seen %d", s.Count(), s.BadLines(), seen)
	}
	path := filepath.Join(t.TempDir(), "sink.jsonl")
	if err := os.WriteFile(path, []byte("{\"connection_id\":\"a\",\"seq\":1,\"lease_epoch\":1,\"worker_id\":\"w\",\"received_at_ms\":1}\n{bad\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, bad, err := ReadSinkFile(path)
	if err != nil || len(recs) != 1 || bad != 1 {
		t.Fatalf("read: %v %d %v", recs, bad, err)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.Workers, c.FeedRate, c.Table = -1, 0, ""
	c.Worker.RenewEvery = c.Worker.LeaseTTL
	err := c.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"workers", "feed rate", "table", "renew"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// FeedArgs reach the feed's command line; a slot's SetEnv comes after the
// stack's environment (exec keeps the last value of a duplicated key).
func TestFeedArgsAndWorkerEnv(t *testing.T) {
	s := &Stack{cfg: DefaultConfig(), Dynamo: &enginetest.Process{Port: 1}, SQS: &enginetest.Process{Port: 2}}
	s.cfg.Bin.Feed, s.cfg.Dir = "/bin/feed", t.TempDir()
	s.cfg.FeedArgs = []string{"-ping-every", "1s"}
	argv := s.feedArgv()
	if got := strings.Join(argv[len(argv)-2:], " "); got != "-ping-every 1s" || argv[0] != "/bin/feed" {
		t.Fatalf("feed argv %q", argv)
	}
	s.cfg.Worker.Env = map[string]string{"WSFLEET_X": "stack"}
	w := &Worker{Index: 1, stack: s}
	w.SetEnv("WSFLEET_X=slot", "WSFLEET_Y=1")
	w.mu.Lock()
	extra := w.env
	w.mu.Unlock()
	env := append(s.workerEnv("worker-1", "127.0.0.1:1"), extra...)
	last := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	if last["WSFLEET_X"] != "slot" || last["WSFLEET_Y"] != "1" || last["WSFLEET_WORKER_ID"] != "worker-1" {
		t.Fatalf("env %v", env)
	}
	w.SetEnv()
	if w.env != nil && len(w.env) != 0 {
		t.Fatalf("SetEnv() kept %v", w.env)
	}
}
