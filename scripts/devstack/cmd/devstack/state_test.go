package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// earlierRun is a state folder as a stopped (or running) stack leaves it:
// its data (the run counter, a table file), the admin token, its log and a
// sink file.
var earlierRun = map[string]string{
	"data/devstack-run":        "4\n",
	"data/table.ldb":           "sessions",
	"admin-token":              "the-first-stack's-token\n",
	"logs/devstack.log":        "{\"msg\":\"engines up\"}\n",
	"logs/worker-1.sink.jsonl": "{\"seq\":1}\n",
}

// writeState writes files (path under dir: content) into dir.
func writeState(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, v := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// checkState fails t (saying what was done) unless every file is still in
// dir as written; a log (logs/*.log) may only have grown.
func checkState(t *testing.T, what, dir string, files map[string]string) {
	t.Helper()
	for p, v := range files {
		b, err := os.ReadFile(filepath.Join(dir, p))
		grown := strings.HasSuffix(p, ".log") && strings.HasPrefix(string(b), v)
		if err != nil || (string(b) != v && !grown) {
			t.Errorf("%s: %s = %q, %v; want %q", what, p, b, err, v)
		}
	}
}
