package demo_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/scripts/demo"
	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/enginetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// buildBinaries builds the stack's programs into dir. It never skips: a
// binary that cannot be built fails the test.
func buildBinaries(t *testing.T, root, dir string) devstack.Binaries {
	t.Helper()
	bins, err := devstack.BuildBinaries(root, dir)
	if err != nil {
		t.Fatalf("%s needs the stack's binaries: %v", "the short demo", err)
	}
	return bins
}

// TestShortDemo runs the demo scenario on a real stack (dynalite, fauxqs,
// feed, ingest, 3 workers + 1): 12 sessions, one kill -9, one SIGTERM, a new
// worker, 3 stops, a graceful shutdown; any violation fails it.
func TestShortDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo runs a whole stack")
	}
	root, err := enginetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", ".bin", "dynalite")); err != nil {
		t.Fatalf("the local engines are not installed (run `make deps`): %v", err)
	}
	tmp := t.TempDir()
	cfg := demo.ShortConfig()
	cfg.Stack.Root = root
	cfg.Stack.Dir = filepath.Join(tmp, "stack")
	cfg.Stack.Bin = buildBinaries(t, root, filepath.Join(tmp, "bin"))
	var out bytes.Buffer
	cfg.Out = &out
	var logBuf bytes.Buffer
	cfg.Stack.Log = zerolog.New(&logBuf)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	start := time.Now()
	res, err := demo.Run(ctx, cfg)
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		dumpLogs(t, cfg.Stack.Dir)
		t.Fatalf("demo: %v", err)
	}
	if !res.OK() {
		dumpLogs(t, cfg.Stack.Dir)
		t.Fatalf("violations: %v", res.Violations)
	}
	rep := res.Report
	if rep.Lost != 0 || rep.ReplayHandoff != 0 || rep.MaxConcurrent != 1 {
		t.Fatalf("lost %d, handoff replays %d, max connections %d", rep.Lost, rep.ReplayHandoff, rep.MaxConcurrent)
	}
	if len(rep.Faults) != 2 || rep.Faults[0].Affected == 0 || rep.Faults[1].Affected == 0 {
		t.Fatalf("faults: %+v", rep.Faults)
	}
	if rep.Stops.Sessions != cfg.Stops {
		t.Fatalf("stops: %+v", rep.Stops)
	}
	t.Logf("short demo took %v", time.Since(start).Round(time.Millisecond))
}

func dumpLogs(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("--- %s (tail) ---\n%s", filepath.Base(l), b)
	}
	fmt.Fprintln(os.Stderr)
}
