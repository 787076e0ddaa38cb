package archtest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/wsfleet/wsfleet/"

// deps lists the packages pkgs depend on (themselves included), through the
// repository's go.work.
func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list (run in the repository, with its go.work): %v\n%s", err, out)
	}
	ds := strings.Fields(string(out))
	for _, p := range pkgs {
		root, all := strings.CutSuffix(p, "/...")
		if !slices.ContainsFunc(ds, func(d string) bool { return d == root || all && strings.HasPrefix(d, root+"/") }) {
			t.Fatalf("go list -deps %s did not list the package itself (nor, for /..., one under it):\n%s", p, out)
		}
	}
	return ds
}

// banned fails for every dependency of pkgs under one of the prefixes.
func banned(t *testing.T, what string, pkgs []string, prefixes ...string) {
	t.Helper()
	for _, p := range deps(t, pkgs...) {
		for _, b := range prefixes {
			if strings.HasPrefix(p, b) {
				t.Errorf("%s imports %s", what, p)
			}
		}
	}
}

// The ownership core (the rules, the Keeper, the in-memory store, the
// conformance suite) imports no AWS SDK: only dynamostore maps DynamoDB to
// it. Nor does it import what knows a session's source (URLs, headers).
func TestOwnershipCoreImportsNoAWSSDK(t *testing.T) {
	core := []string{mod + "shared/lease", mod + "shared/lease/memstore", mod + "shared/lease/leasetest"}
	banned(t, "the ownership core", core, "github.com/aws/", mod+"shared/source", mod+"shared/netguard", mod+"shared/sessionapi")
}

// The deployables import shared, never each other (nor the CLI or the
// harness).
func TestDeployablesImportNoOtherDeployable(t *testing.T) {
	banned(t, "the worker", []string{mod + "workers/streamer/..."}, mod+"functions/", mod+"cmd/", mod+"scripts/", mod+"infra")
	banned(t, "ingest", []string{mod + "functions/ingest/..."}, mod+"workers/", mod+"cmd/", mod+"scripts/", mod+"infra")
}

// harness is the test harness: the testkit module (the feed, the local
// engines, the process supervisor, the fault proxy, the test waits, and
// whatever is added under it) and scripts/.
var harness = []string{mod + "testkit", mod + "scripts/"}

// No shipped binary imports the test harness: not the worker, the ingest
// Lambda, the CLI or the CDK app, nor any package reachable from their mains.
func TestNoShippedBinaryImportsTheHarness(t *testing.T) {
	shipped := []string{mod + "workers/streamer/cmd/streamer", mod + "functions/ingest", mod + "cmd/wsfleet", mod + "infra"}
	for _, bin := range shipped {
		banned(t, bin, []string{bin}, harness...)
	}
	if ds := deps(t, shipped...); !slices.Contains(ds, mod+"shared/lease") {
		t.Fatal("go list -deps found none of the binaries' dependencies")
	}
}

// shared is what the deployables are built from: its packages import no
// harness; only its tests do (they are not in go list -deps).
func TestSharedImportsNoHarness(t *testing.T) {
	banned(t, "shared", []string{mod + "shared/..."}, harness...)
}
