package enginetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RequireNodeModule is node's path and the repository root for a test that
// runs an npm package of package.json (a reference consumer) under node: it
// fails the test under CI=true, and skips it elsewhere, when node or the
// package is not installed.
func RequireNodeModule(t testing.TB, name string) (node, root string) {
	t.Helper()
	root, err := RepoRoot()
	if err == nil {
		_, err = os.Stat(filepath.Join(root, "node_modules", name, "package.json"))
	}
	if err == nil {
		node, err = exec.LookPath("node")
	}
	if err == nil {
		return node, root
	}
	err = fmt.Errorf("npm package %s: %w", name, err)
	if os.Getenv("CI") == "true" {
		t.Fatalf("required under CI=true: %v", err)
	}
	t.Skipf("unavailable (run `make deps`): %v", err)
	return "", ""
}
