package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The test-only switches exist in the chaos build only: the binary built
// without tags contains neither the clock offset's variable name nor its
// log line, the one built with -tags chaos contains both (so the check can
// fail).
func TestDefaultBuildHasNoChaosHooks(t *testing.T) {
	markers := []string{"WSFLEET_TEST_CLOCK_OFFSET", "TEST ONLY: the lease clock is offset"}
	dir := t.TempDir()
	for _, tags := range []string{"", "chaos"} {
		out := filepath.Join(dir, "streamer-"+tags)
		cmd := exec.Command("go", "build", "-tags", tags, "-o", out, ".")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build -tags %q: %v\n%s", tags, err, b)
		}
		bin, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range markers {
			if has := bytes.Contains(bin, []byte(m)); has != (tags == "chaos") {
				t.Errorf("build -tags %q: contains %q = %v", tags, m, has)
			}
		}
	}
}
