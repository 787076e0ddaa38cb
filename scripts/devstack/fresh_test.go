package devstack

import (
	"os"
	"path/filepath"
	"testing"
)

// --fresh forgets the sessions and the sink files but keeps the run count:
// the next run's worker ids are new (run5 after run4), so no old sink line
// mixes with the new ones.
func TestFreshKeepsTheRunCountAndClearsSinks(t *testing.T) {
	dir := t.TempDir()
	for p, v := range map[string]string{
		"data/" + runFile:          "4\n",
		"data/sessions.ldb":        "x",
		"logs/worker-1.sink.jsonl": "{}\n",
		"logs/feed.log":            "kept\n",
	} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := Fresh(dir); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"data/sessions.ldb", "logs/worker-1.sink.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s survives --fresh: %v", gone, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "logs/feed.log")); err != nil {
		t.Errorf("a process log went: %v", err)
	}
	if n, err := nextRun(filepath.Join(dir, "data")); err != nil || n != 5 {
		t.Fatalf("the run after --fresh = %d, %v; want 5 (new worker ids)", n, err)
	}
}
