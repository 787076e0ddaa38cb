//go:build chaos

package chaos_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/scripts/chaos"
	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

// shortSeed is the seed of `make test`'s run (WSFLEET_CHAOS_SEED overrides).
const shortSeed = 20261130

// TestShortChaos runs one round of every fault kind on a real stack (3
// workers, 16 sessions, about 80 s), the demo plan's steps among them (right
// after the clock offset, as `make demo` runs them), and fails on any
// violation, on a fault kind not injected, and on a fault that touched no
// session. The outputs (the report, result.json, the timeline and every
// process's log under logs/) stay in <repo>/out/chaos-test
// (WSFLEET_CHAOS_OUT overrides) to be read after the run.
func TestShortChaos(t *testing.T) {
	root, err := enginetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", ".bin", "dynalite")); err != nil {
		t.Fatalf("the local engines are not installed (run `make deps`): %v", err)
	}
	tmp := t.TempDir()
	cfg := chaos.ShortConfig()
	cfg.Seed = shortSeed
	if v := os.Getenv("WSFLEET_CHAOS_SEED"); v != "" {
		if cfg.Seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("WSFLEET_CHAOS_SEED=%q: %v", v, err)
		}
	}
	cfg.Stack.Root = root
	cfg.Stack.Dir = filepath.Join(tmp, "stack")
	cfg.Stack.Bin = buildBinaries(t, root, filepath.Join(tmp, "bin"))
	cfg.OutDir = os.Getenv("WSFLEET_CHAOS_OUT")
	if cfg.OutDir == "" {
		cfg.OutDir = filepath.Join(root, "out", "chaos-test")
	}
	var out, logs bytes.Buffer
	cfg.Out = &out
	cfg.Stack.Log = zerolog.New(&logs)
	ctx, cancel := context.WithTimeout(context.Background(), 420*time.Second) // the plan runs about 200 s; a loaded 2-core CI machine stretches it
	defer cancel()
	start := time.Now()
	res, err := chaos.Run(ctx, cfg)
	var sum bytes.Buffer
	chaos.PrintSummary(&sum, res)
	t.Logf("seed %d, %v; outputs in %s\n%s%s", cfg.Seed, time.Since(start).Round(time.Second), cfg.OutDir, out.String(), sum.String())
	keepLogs(t, cfg.Stack.Dir, cfg.OutDir)
	if err != nil {
		dumpLogs(t, cfg.Stack.Dir)
		t.Fatalf("chaos run: %v", err)
	}
	if !res.OK() {
		dumpLogs(t, cfg.Stack.Dir)
		// The violations go last, in the failure itself: a CI log that
		// keeps only the head and the tail of the output still shows them.
		t.Fatalf("%d violation(s); report: %s%s", len(res.Violations), filepath.Join(cfg.OutDir, chaos.ReportFile), violationLines(res.Violations, 10))
	}
	if len(res.Missing) > 0 {
		t.Fatalf("fault kinds not injected: %v", res.Missing)
	}
	for _, k := range res.Kinds {
		if k.Affected == 0 {
			t.Errorf("%s touched no session: the run proves nothing about it", k.Kind)
		}
	}
}

// buildBinaries builds the stack's programs into dir. It never skips: a
// binary that cannot be built fails the test.
func buildBinaries(t *testing.T, root, dir string) devstack.Binaries {
	t.Helper()
	bins, err := devstack.BuildBinaries(root, dir)
	if err != nil {
		t.Fatalf("%s needs the stack's binaries: %v", "the chaos run", err)
	}
	return bins
}

// violationLines lists at most max violations, one line each.
func violationLines(vs []chaos.Violation, max int) string {
	var b strings.Builder
	for i, v := range vs {
		if i == max {
			fmt.Fprintf(&b, "\n  … %d more", len(vs)-max)
			break
		}
		fmt.Fprintf(&b, "\n  - %s", v)
	}
	return b.String()
}

// keepLogs copies every process's log of the stack's dir (a test temp dir,
// gone once the test ends) to <outDir>/logs, beside the report, so that a
// run can be diagnosed after it, passed or failed.
func keepLogs(t *testing.T, dir, outDir string) {
	t.Helper()
	keep := filepath.Join(outDir, "logs")
	_ = os.RemoveAll(keep)
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Logf("keep the stack's logs: %v", err)
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err == nil {
			err = os.WriteFile(filepath.Join(keep, filepath.Base(l)), b, 0o644)
		}
		if err != nil {
			t.Logf("keep %s: %v", filepath.Base(l), err)
		}
	}
}

// dumpLogs prints the tail of every process's log in the stack's dir.
func dumpLogs(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		t.Logf("--- %s (tail) ---\n%s", filepath.Base(l), b)
	}
}
