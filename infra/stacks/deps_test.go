package stacks

import (
	"os/exec"
	"strings"
	"testing"
)

// The CDK app imports only the names of shared/schema from the rest of the
// repository (docs/architecture.md): never a deployable, never another
// shared package but shared/cmdmain, how every wsfleet command starts and
// exits (its main is one cmdmain.Run). cmdmain imports the standard library
// only, and go list -deps lists what it imports too: were it to import
// another package of the repository, this test would name it.
func TestImportsOnlySchemaNames(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/wsfleet/wsfleet/infra/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := false
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == "github.com/wsfleet/wsfleet/shared/schema":
			seen = true
		case p == "github.com/wsfleet/wsfleet/shared/cmdmain":
		case strings.HasPrefix(p, "github.com/wsfleet/wsfleet/") && !strings.HasPrefix(p, "github.com/wsfleet/wsfleet/infra"):
			t.Errorf("infra imports %s", p)
		}
	}
	if !seen {
		t.Fatalf("go list -deps found no import of shared/schema:\n%s", out)
	}
}
