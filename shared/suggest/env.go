package suggest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// UnknownEnv returns one error per variable of environ (KEY=VALUE pairs,
// os.Environ()) that starts with schema.EnvPrefix and is neither in known nor in
// ToolEnv, sorted by name. Each error names the closest known variable (by
// edit distance) when it is close enough to be the one meant, e.g. "unknown
// variable WSFLEET_LEASE_TT (did you mean WSFLEET_LEASE_TTL?)". Values are
// never part of the error.
func UnknownEnv(environ, known []string) []error {
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, schema.EnvPrefix) || slices.Contains(known, name) || slices.Contains(schema.ToolEnv(), name) {
			continue
		}
		if !slices.Contains(unknown, name) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	var errs []error
	for _, name := range unknown {
		if near := closest(name, known); near != "" {
			errs = append(errs, fmt.Errorf("unknown variable %s (did you mean %s?)", name, near))
		} else {
			errs = append(errs, fmt.Errorf("unknown variable %s", name))
		}
	}
	return errs
}

// closest is the name of known nearest to name , or ""
// when none is within a third of the name's length after the prefix (at
// least 2 edits): a name that far off is not a typo of a known one.
func closest(name string, known []string) string {
	return Nearest(name, known, max(2, len(strings.TrimPrefix(name, schema.EnvPrefix))/3))
}
