package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMakeOfflineNamesLocalToolchain: `make` under a Go release that is not
// cached and cannot be downloaded (GOPROXY=off: no network) stops at once
// with a message naming `make GO_TOOLCHAIN=local`, instead of the go
// command's download error at the first recipe.
func TestMakeOfflineNamesLocalToolchain(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-n", "all", "GO_TOOLCHAIN=go1.26.99")
	cmd.Dir = "../../../.."
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOTOOLCHAIN=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make ran under an unavailable toolchain:\n%s", out)
	}
	if !strings.Contains(string(out), "make GO_TOOLCHAIN=local") || !strings.Contains(string(out), "go1.26.99") {
		t.Fatalf("make's message does not name the toolchain and make GO_TOOLCHAIN=local:\n%s", out)
	}
}
