package suggest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/schema"
)

func TestUnknownEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		known   []string
		want    []string
	}{
		{"none", []string{"PATH=/bin", schema.EnvLeaseTTL + "=10s"}, schema.WorkerEnv(), nil},
		{"tools are ignored", []string{schema.EnvRepoRoot + "=/r", schema.EnvAPI + "=http://x", schema.EnvEngines + "=external"}, schema.IngestEnv(), nil},
		{"a dropped letter", []string{"WSFLEET_LEASE_TT=10s"}, schema.WorkerEnv(),
			[]string{"unknown variable WSFLEET_LEASE_TT (did you mean WSFLEET_LEASE_TTL?)"}},
		{"every unknown name, sorted, once", []string{"WSFLEET_SNK=stdout", "WSFLEET_MAX_SESSION=3", "WSFLEET_SNK=x", "wsfleet_sink=lower"}, schema.WorkerEnv(),
			[]string{"unknown variable WSFLEET_MAX_SESSION (did you mean WSFLEET_MAX_SESSIONS?)", "unknown variable WSFLEET_SNK (did you mean WSFLEET_SINK?)"}},
		{"another component's variable", []string{schema.EnvSigningSecret + "=s3cr3t-value"}, schema.WorkerEnv(),
			[]string{"unknown variable WSFLEET_SIGNING_SECRET"}},
		{"a test-only variable", []string{"WSFLEET_TEST_CLOCK_OFFSET=400ms"}, schema.WorkerEnv(), []string{"unknown variable WSFLEET_TEST_CLOCK_OFFSET"}},
		{"two typos", []string{"WSFLEET_REONCILE_EVRY=1s"}, schema.WorkerEnv(), []string{"unknown variable WSFLEET_REONCILE_EVRY (did you mean WSFLEET_RECONCILE_EVERY?)"}},
		{"no known names", []string{"WSFLEET_X=1"}, nil, []string{"unknown variable WSFLEET_X"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, err := range UnknownEnv(tc.environ, tc.known) {
				got = append(got, err.Error())
				if strings.Contains(err.Error(), "s3cr3t") {
					t.Fatalf("a value leaked into %q", err)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
	if err := errors.Join(UnknownEnv([]string{"WSFLEET_A=1", "WSFLEET_B=2"}, schema.WorkerEnv())...); err == nil || strings.Count(err.Error(), "unknown variable") != 2 {
		t.Fatalf("joined: %v", err)
	}
}
