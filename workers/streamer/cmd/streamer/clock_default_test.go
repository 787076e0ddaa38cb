//go:build !chaos

package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// The shipped build has no clock offset: the variable is refused as unknown
// before anything starts.
func TestDefaultBuildRefusesTheClockOffset(t *testing.T) {
	if got := chaosEnv(); len(got) != 0 {
		t.Fatalf("chaos variables %q in the default build", got)
	}
	err := run(context.Background(), nil, []string{"WSFLEET_TEST_CLOCK_OFFSET=400ms"}, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "unknown variable WSFLEET_TEST_CLOCK_OFFSET") {
		t.Fatalf("run: %v, want the offset refused as an unknown variable", err)
	}
}
