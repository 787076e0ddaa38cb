package devstack

import (
	"context"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

// testConfig is DefaultConfig for a test: the binaries of bin/ (`make
// devstack-bins`; Start fails naming a missing one), a temporary folder,
// free ports, the engines in memory, workers workers.
func testConfig(t *testing.T, workers int) Config {
	cfg := DefaultConfig()
	cfg.Root, cfg.Dir, cfg.InMemory, cfg.Ports, cfg.Workers = enginetest.InstalledRoot(t), t.TempDir(), true, Ports{}, workers
	return cfg
}

// fastTimings are the short lease timings of the stack tests: TTL 3 s, a
// heartbeat, checkpoint and reconcile every 500 ms, the feed at 20 msg/s.
func fastTimings(cfg *Config) {
	cfg.FeedRate = 20
	cfg.Worker.LeaseTTL, cfg.Worker.HeartbeatEvery, cfg.Worker.SafetyMargin = 3*time.Second, 500*time.Millisecond, 500*time.Millisecond
	cfg.Worker.CheckpointEvery, cfg.Worker.ReconcileEvery, cfg.Worker.QueueWait = 500*time.Millisecond, 500*time.Millisecond, time.Second
	cfg.Worker.ShutdownDeadline = 5 * time.Second
}

// startStack starts cfg and shuts the stack down when t ends (an error of
// the shutdown fails t).
func startStack(ctx context.Context, t *testing.T, cfg Config) *Stack {
	t.Helper()
	st, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := st.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return st
}
