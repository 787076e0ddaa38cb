package devstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/proc"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/testkit/tlsca"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
	c.Worker.HeartbeatEvery = c.Worker.LeaseTTL
	err := c.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"workers", "feed rate", "table", "heartbeat"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// FeedArgs reach the feed's command line; a slot's SetEnv comes after the
// stack's environment (exec keeps the last value of a duplicated key); the
// feed and the workers agree on the tenure header, and the feed admits
// standbys (by that header; without one, not).
func TestFeedArgsAndWorkerEnv(t *testing.T) {
	s := &Stack{cfg: DefaultConfig(), Dynamo: &enginetest.Process{Port: 1}, SQS: &enginetest.Process{Port: 2}}
	s.cfg.Bin.Feed, s.cfg.Dir = "/bin/feed", t.TempDir()
	s.cfg.FeedArgs = []string{"-ping-every", "1s"}
	argv := s.feedArgv()
	if got := strings.Join(argv[len(argv)-2:], " "); got != "-ping-every 1s" || argv[0] != "/bin/feed" {
		t.Fatalf("feed argv %q", argv)
	}
	if i := slices.Index(argv, "-tenure-header"); i < 0 || argv[i+1] != TenureHeader {
		t.Fatalf("feed argv %q: no -tenure-header %s", argv, TenureHeader)
	}
	if !slices.Contains(argv, "-allow-standby") {
		t.Fatalf("feed argv %q: make dev's feed admits no standby (-allow-standby)", argv)
	}
	off := &Stack{cfg: s.cfg}
	off.cfg.TenureHeader = ""
	if argv := off.feedArgv(); slices.Contains(argv, "-allow-standby") {
		t.Fatalf("feed argv %q without a tenure header: -allow-standby (the feed refuses it)", argv)
	}
	s.cfg.Worker.Env = map[string]string{"WSFLEET_X": "stack"}
	w := &Worker{Index: 1, stack: s}
	w.SetEnv("WSFLEET_X=slot", "WSFLEET_Y=1")
	env := w.nextIncarnation()
	last := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	if last["WSFLEET_X"] != "slot" || last["WSFLEET_Y"] != "1" || last["WSFLEET_WORKER_ID"] != "worker-1" || last[schema.EnvTenureHeader] != TenureHeader {
		t.Fatalf("env %v", env)
	}
	if env := w.nextIncarnation(); !slices.Contains(env, "WSFLEET_WORKER_ID=worker-1.r2") || w.ID() != "worker-1.r2" {
		t.Fatalf("second incarnation: id %s, env %v", w.ID(), env)
	}
	w.SetEnv()
	if len(w.env) != 0 {
		t.Fatalf("SetEnv() kept %v", w.env)
	}
}

// The feed serves wss:// by default, with the stack's CA, which the workers
// trust; -plain-ws (PlainWS) serves ws:// and the workers get no CA.
func TestWssByDefault(t *testing.T) {
	s := &Stack{cfg: DefaultConfig(), Dynamo: &enginetest.Process{Port: 1}, SQS: &enginetest.Process{Port: 2}}
	s.cfg.Bin.Feed, s.cfg.Dir = "/bin/feed", t.TempDir()
	ca, err := tlsca.LoadOrNew(s.TLSDir())
	if err != nil {
		t.Fatal(err)
	}
	s.CA = ca
	argv := s.feedArgv()
	if i := slices.Index(argv, "-tls-dir"); i < 0 || argv[i+1] != s.TLSDir() || !strings.HasPrefix(s.FeedURL(), "https://") {
		t.Fatalf("feed argv %q, URL %s: want wss with -tls-dir %s", argv, s.FeedURL(), s.TLSDir())
	}
	w := &Worker{Index: 1, stack: s}
	if env := w.nextIncarnation(); !slices.Contains(env, schema.EnvExtraCAFile+"="+ca.CertFile) {
		t.Fatalf("worker env %v: no %s", env, schema.EnvExtraCAFile)
	}
	s.cfg.PlainWS, s.CA = true, nil
	if argv := s.feedArgv(); slices.Contains(argv, "-tls-dir") || !strings.HasPrefix(s.FeedURL(), "http://") {
		t.Fatalf("plain ws: feed argv %q, URL %s", argv, s.FeedURL())
	}
	for _, kv := range w.nextIncarnation() {
		if strings.HasPrefix(kv, schema.EnvExtraCAFile+"=") {
			t.Fatalf("plain ws: the worker got %s", kv)
		}
	}
}

// Under a restart policy (`make dev`) a worker killed by a signal or ending
// on SIGTERM is reported with its signal or exit code and comes back as a
// new incarnation; Shutdown stops it for good.
func TestWorkerRestartedAfterExit(t *testing.T) {
	var mu sync.Mutex
	var exits []proc.Exit
	cfg := testConfig(t, 1)
	cfg.RestartWorkers = &proc.Restart{Delay: 100 * time.Millisecond}
	cfg.OnExit = func(e proc.Exit) {
		mu.Lock()
		defer mu.Unlock()
		exits = append(exits, e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st := startStack(ctx, t, cfg)
	w := st.Workers()[0]
	for i, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		if err := w.Proc.Signal(sig); err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("worker-1.r%d", i+2)
		testwait.Eventually(t, time.Minute, fmt.Sprintf("after %v: worker %s running again", sig, want), func() bool {
			return w.ID() == want && w.Proc.Running()
		})
		if err := w.Ready(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(exits) != 2 {
		t.Fatalf("exits %v", exits)
	}
	if e := exits[0]; e.Signal != syscall.SIGKILL || e.RestartIn != 100*time.Millisecond || e.Name != "worker-1" {
		t.Errorf("kill -9: %+v", e)
	}
	if e := exits[1]; e.Signal != 0 || e.Code != 0 || e.RestartIn == 0 {
		t.Errorf("SIGTERM (a graceful exit 0): %+v", e)
	}
}
