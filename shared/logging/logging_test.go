package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		level     string
		debug     bool // a debug line is written
		infoLines int
	}{{"debug", true, 1}, {"DEBUG", true, 1}, {"info", false, 1}, {"", false, 1}, {"loud", false, 1}, {"warn", false, 0}, {"Error", false, 0}} {
		var out bytes.Buffer
		log := New(&out, "svc", tc.level)
		log.Debug().Msg("d")
		log.Info().Str("k", "v").Msg("i")
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if out.Len() == 0 {
			lines = nil
		}
		if want := tc.infoLines + map[bool]int{true: 1}[tc.debug]; len(lines) != want {
			t.Fatalf("level %q: %d lines, want %d:\n%s", tc.level, len(lines), want, out.String())
		}
		for _, l := range lines {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("level %q: not JSON: %q", tc.level, l)
			}
			if m["service"] != "svc" || m["time"] == nil || m["level"] == nil || m["message"] == nil {
				t.Fatalf("level %q: fields of %q", tc.level, l)
			}
		}
	}
}
