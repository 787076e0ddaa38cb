package bench

import (
	"strings"
	"testing"
)

// sectionHas checks that the report md holds every line of wants, and on a
// failure logs the report from its section heading on.
func sectionHas(t *testing.T, md, section string, wants ...string) {
	t.Helper()
	failed := false
	for _, want := range wants {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
			failed = true
		}
	}
	if failed {
		if i := strings.Index(md, section); i >= 0 {
			t.Log(md[i:])
		}
	}
}
