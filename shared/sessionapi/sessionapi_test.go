package sessionapi

import (
	"reflect"
	"testing"

	"github.com/wsfleet/wsfleet/shared/spec"
)

// Session's own keys and its embedded spec view's are distinct: a key in
// both would silently hide the view's (encoding/json keeps the shallower
// field), as a status field named standby would hide the spec's standby.
func TestSessionKeysAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range spec.FieldNames(reflect.TypeFor[Session]()) {
		if seen[k] {
			t.Errorf("Session has the key %q twice", k)
		}
		seen[k] = true
	}
	if !seen["standby"] || !seen["standby_holder"] {
		t.Fatalf("keys %v", seen)
	}
}
