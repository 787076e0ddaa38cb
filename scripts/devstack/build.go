package devstack

// Building the programs a stack runs (Binaries) from the workspace.

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// BuildBinaries builds the programs a stack runs into dir, from the
// workspace at root (the tests and drivers that bring their own stack).
// The streamer is its chaos build (-tags chaos): the harnesses' faults use
// its test-only lease clock offset, which the shipped binary refuses.
func BuildBinaries(root, dir string) (Binaries, error) {
	bins := Binaries{
		Streamer: filepath.Join(dir, "streamer"),
		Ingest:   filepath.Join(dir, "ingest-local"),
		Feed:     filepath.Join(dir, "feed"),
		Model:    filepath.Join(dir, "dynamodel"),
		// Built for a harness that turns Config.SecretsManager on.
		SecretsManager: filepath.Join(dir, "secretsmanager"),
	}
	for out, pkg := range map[string][]string{
		bins.Streamer:       {"-tags", "chaos", "./workers/streamer/cmd/streamer"},
		bins.Ingest:         {"./functions/ingest/cmd/ingest-local"},
		bins.Feed:           {"./testkit/feed/cmd/feed"},
		bins.Model:          {"./testkit/dynamodel/cmd/dynamodel"},
		bins.SecretsManager: {"./testkit/secretsmanager/cmd/secretsmanager"},
	} {
		cmd := exec.Command("go", append([]string{"build", "-o", out}, pkg...)...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
	}
	return bins, nil
}
