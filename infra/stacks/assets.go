package stacks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Build outputs and sources the stack packages, relative to the repo root.
const (
	// IngestAssetDir holds the prebuilt ingest Lambda `bootstrap`
	// (linux/arm64, built by `make infra-assets`).
	IngestAssetDir = "bin/ingest"
	// IngestBootstrap is the executable inside IngestAssetDir.
	IngestBootstrap = "bootstrap"
	// StreamerDockerfile builds the streamer image; its build context is
	// the repo root (the image needs shared/ as well).
	StreamerDockerfile = "workers/streamer/Dockerfile"
	// StreamerBinary is the worker's path inside its image.
	StreamerBinary = "/streamer"
)

// StreamerContextExclude keeps the repo-root Docker build context to what
// the streamer image builds from (shared/, workers/streamer/ and
// testkit/go.mod, built with GOWORK=off; the same allowlist as
// workers/streamer/Dockerfile.dockerignore), so edits elsewhere do not
// change the image asset's hash. Docker ignore syntax; later patterns win.
var StreamerContextExclude = []string{
	"*",
	"!shared",
	"!workers/streamer",
	"!testkit/go.mod",
	"**/*.test",
	"**/*.prof",
	"**/node_modules",
	"**/cdk.out",
}

// RootEnv names the variable that overrides repo-root discovery (the
// Makefile exports it).
const RootEnv = "WSFLEET_ROOT"

// FindRepoRoot returns $WSFLEET_ROOT if set, otherwise the nearest directory
// at or above start that holds both cdk.json and go.work.
func FindRepoRoot(start string) (string, error) {
	if r := os.Getenv(RootEnv); r != "" {
		abs, err := filepath.Abs(r)
		if err != nil {
			return "", fmt.Errorf("resolving %s=%q: %w", RootEnv, r, err)
		}
		return abs, nil
	}
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", fmt.Errorf("resolving %q: %w", start, err)
	}
	for {
		if isFile(filepath.Join(dir, "cdk.json")) && isFile(filepath.Join(dir, "go.work")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no directory with cdk.json and go.work at or above %q (set %s)", start, RootEnv)
		}
		dir = parent
	}
}

// CheckAssets reports, with what to do about it, every build output or
// source the stack needs that is missing under root.
func CheckAssets(root string) error {
	var errs []error
	if p := filepath.Join(root, IngestAssetDir, IngestBootstrap); !isFile(p) {
		errs = append(errs, fmt.Errorf("ingest Lambda asset %s is missing: run `make infra-assets` from the repo root (cdk.json's app does)", p))
	}
	if p := filepath.Join(root, StreamerDockerfile); !isFile(p) {
		errs = append(errs, fmt.Errorf("streamer image Dockerfile %s is missing: it belongs to the streamer component (workers/streamer); the stack cannot be synthesized without it", p))
	}
	return errors.Join(errs...)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
