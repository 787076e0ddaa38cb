package devstack

// Run ids: counting the runs on a data directory so that a run's worker ids
// are never an earlier run's.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// runFile counts the runs on a data directory (one decimal number).
const runFile = "devstack-run"

// nextRun takes the data directory's next run number (1 when it has none)
// and records it, before any worker starts. A count it cannot read is an
// error, never a restart from 1 (that would reuse worker ids).
func nextRun(dataDir string) (int, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return 0, fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dataDir, runFile)
	n := 0
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if n, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || n < 0 {
			return 0, fmt.Errorf("run count %s: %q is not a count (delete the data folder, or --fresh)", path, b)
		}
	case !errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("run count: %w", err)
	}
	n++
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("run count: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("run count: %w", err)
	}
	return n, nil
}
