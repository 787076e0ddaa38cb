package bench

import (
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig(Quick)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := DefaultConfig(Full).Validate(); err != nil {
		t.Fatal(err)
	}
	c.Phases = []string{"nope"}
	c.Mode = "medium"
	c.Sizes.CapRuns = []CapRun{{Sessions: 25000, Rate: 1}}
	c.Sizes.StandbyMemSessions, c.Sizes.StandbyMemWindow = 10000, 0
	err := c.Validate()
	for _, want := range []string{"phase \"nope\"", "mode \"medium\"", "open-file limit", "standbymem: 10000 sessions"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want an error about %s, got %v", want, err)
		}
	}
}
