package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The CLI is a client of the ingest API: it imports shared, never a
// deployable (go.work would let such an import build).
func TestImportsNoDeployable(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || !strings.Contains(string(out), "github.com/wsfleet/wsfleet/shared/sessionapi") {
		t.Fatalf("go list -deps found no dependency on shared:\n%s", out)
	}
	for _, p := range deps {
		for _, banned := range []string{"github.com/wsfleet/wsfleet/workers/", "github.com/wsfleet/wsfleet/functions/", "github.com/wsfleet/wsfleet/scripts/"} {
			if strings.HasPrefix(p, banned) {
				t.Errorf("the CLI imports %s", p)
			}
		}
	}
}
