package feed_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The feed is test infrastructure: no shipped binary imports it (nor
// shared/enginetest). go.work lets such an import build, so this test looks.
func TestNoShippedBinaryImportsTheFeed(t *testing.T) {
	shipped := []string{"github.com/wsfleet/wsfleet/workers/streamer/cmd/streamer", "github.com/wsfleet/wsfleet/functions/ingest"}
	out, err := exec.Command("go", append([]string{"list", "-deps"}, shipped...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list (run in the repository, with its go.work): %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/wsfleet/wsfleet/shared/lease") {
		t.Fatalf("go list -deps found none of the binaries' dependencies:\n%s", out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/wsfleet/wsfleet/shared/feed") || strings.HasPrefix(p, "github.com/wsfleet/wsfleet/shared/enginetest") {
			t.Errorf("a shipped binary imports %s", p)
		}
	}
}
