package archtest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestWorkerDrawsOnlyFromItsSource fails when a package of the worker
// (workers/streamer/...) imports math/rand or math/rand/v2 itself: its
// draws (jitters, the reconciler's shuffle, back-off delays) come from
// streamer.Deps.Rand's streams (shared/draw), so that a seed replays them in
// the fleet simulator; a nil Deps.Rand draws from the global source there.
// Tests are not checked.
func TestWorkerDrawsOnlyFromItsSource(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "fleetsim", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", mod+"workers/streamer/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list (run in the repository, with its go.work): %v\n%s", err, out)
	}
	pkgs := 0
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		path, imports, _ := strings.Cut(strings.TrimSpace(line), "\t")
		pkgs++
		for _, banned := range []string{"math/rand", "math/rand/v2"} {
			if slices.Contains(strings.Fields(imports), banned) {
				t.Errorf("%s imports %s: draw from the worker's source (streamer.Deps.Rand, shared/draw) instead", path, banned)
			}
		}
	}
	if pkgs < 4 { // streamer, claim, session, backoff at least
		t.Fatalf("go list listed %d packages of the worker:\n%s", pkgs, out)
	}
}
