package enginetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Needs says which engines a test binary uses.
type Needs struct {
	Dynamo  bool
	SQS     bool
	Kinesis bool
}

// Env is what Main started (or found).
type Env struct {
	Dynamo  *Process // nil when external
	SQS     *Process // nil when external
	Kinesis *Process // nil when external
}

var (
	current    *Env
	missingErr error
)

// Main is for TestMain: it starts the engines a package needs (unless the
// environment points at others), exports AWS_ENDPOINT_URL_* so the SDK finds
// them, runs the tests and stops the engines. When an engine cannot be had,
// tests calling Require fail under CI=true and skip otherwise.
func Main(m *testing.M, needs Needs) int {
	env, err := Setup(needs)
	if err != nil {
		missingErr = err
		fmt.Fprintf(os.Stderr, "enginetest: engines unavailable: %v\n", err)
	}
	current = env
	code := m.Run()
	env.Stop()
	return code
}

// Setup starts or finds the engines. The returned Env is never nil.
func Setup(needs Needs) (*Env, error) {
	env := &Env{}
	SetLocalCredentials()
	external := os.Getenv("WSFLEET_ENGINES") == "external"
	if needs.Dynamo && !external && os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		p, err := StartDynalite(Options{})
		if err != nil {
			return env, err
		}
		env.Dynamo = p
		os.Setenv("AWS_ENDPOINT_URL_DYNAMODB", p.Endpoint())
	}
	if needs.SQS && !external && os.Getenv("AWS_ENDPOINT_URL_SQS") == "" {
		p, err := StartFauxqs(Options{})
		if err != nil {
			return env, err
		}
		env.SQS = p
		os.Setenv("AWS_ENDPOINT_URL_SQS", p.Endpoint())
	}
	if needs.Kinesis && !external && os.Getenv("AWS_ENDPOINT_URL_KINESIS") == "" {
		p, err := StartKinesalite(Options{})
		if err != nil {
			return env, err
		}
		env.Kinesis = p
		os.Setenv("AWS_ENDPOINT_URL_KINESIS", p.Endpoint())
	}
	return env, nil
}

// Stop stops what Setup started.
func (e *Env) Stop() {
	if e == nil {
		return
	}
	if e.Dynamo != nil {
		e.Dynamo.Stop()
	}
	if e.SQS != nil {
		e.SQS.Stop()
	}
	if e.Kinesis != nil {
		e.Kinesis.Stop()
	}
}

// Current is the Env of this test binary (set by Main).
func Current() *Env { return current }

// Require fails the test (under CI=true) or skips it (elsewhere) when Main
// could not start the engines. Integration tests call it first.
func Require(t testing.TB) {
	t.Helper()
	if missingErr == nil && current != nil {
		return
	}
	err := missingErr
	if err == nil {
		err = fmt.Errorf("enginetest.Main was not called from TestMain")
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("integration engines required under CI=true: %v", err)
	}
	t.Skipf("integration engines unavailable (run `make deps`): %v", err)
}

// InstalledRoot is the repository root for a test that starts engines of its
// own (a whole local stack): it fails the test when the root cannot be found
// or the engines are not installed (never skips).
func InstalledRoot(t testing.TB) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", ".bin", "dynalite")); err != nil {
		t.Fatalf("the local engines are not installed (run `make deps`): %v", err)
	}
	return root
}
