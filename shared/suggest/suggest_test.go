package suggest

import (
	"strings"
	"testing"
)

func TestNearest(t *testing.T) {
	fields := []string{"ws_url", "connection_id", "headers", "seq_path", "seq_field", "resume", "open_messages"}
	cases := []struct {
		name  string
		limit int
		want  string
	}{
		{"wsurl", 0, "ws_url"},
		{"WS_URL", 0, "ws_url"},
		{"connectionId", 0, "connection_id"},
		{"header", 0, "headers"},
		{"seq_pth", 0, "seq_path"},
		{"open_message", 0, "open_messages"},
		{"bogus", 0, ""},
		{"ws_url", 0, ""}, // a known name suggests nothing
		{"WSFLEET_LEASE_TT", 2, ""},
	}
	for _, c := range cases {
		if got := Nearest(c.name, fields, c.limit); got != c.want {
			t.Errorf("Nearest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	if got := Nearest("WSFLEET_LEASE_TT", []string{"WSFLEET_LEASE_TTL", "WSFLEET_TABLE"}, 2); got != "WSFLEET_LEASE_TTL" {
		t.Errorf("env: %q", got)
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"kitten", "sitting", 3}, {"LEASE_TT", "LEASE_TTL", 1}, {"ab", "ba", 1}, {"abc", "acb", 1}, {"ca", "abc", 3}, {"ws_url", "wsurl", 1}} {
		if got := Distance(c.a, c.b); got != c.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

// A name far longer than every known one gets no suggestion, and the
// search does not build an edit-distance table per known name for it
// (finding 9 of issue 35: a 256 KiB unknown JSON key cost ~0.8 s of CPU).
// The work is counted in allocations (Distance allocates a row per byte of
// its first string), not timed.
func TestNearestSkipsNamesFarLongerThanEveryKnownOne(t *testing.T) {
	fields := []string{"ws_url", "connection_id", "headers", "seq_path", "seq_field", "resume", "open_messages"}
	long := strings.Repeat("connection_id", 256<<10/13)
	var got string
	allocs := testing.AllocsPerRun(1, func() { got = Nearest(long, fields, 0) })
	if got != "" {
		t.Fatalf("a %d-byte name suggests %q", len(long), got)
	}
	if allocs > 50 {
		t.Fatalf("Nearest on a %d-byte name made %.0f allocations: it measured the distance to names it cannot be near", len(long), allocs)
	}
	// The bound is exact: a name within limit edits of a known one by
	// length is still measured.
	if got := Nearest("connection_idxx", fields, 0); got != "connection_id" {
		t.Fatalf("Nearest(connection_idxx) = %q", got)
	}
}

// DistanceAtMost is Distance, or limit+1 when the lengths alone exceed it.
func TestDistanceAtMost(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		limit int
		want  int
	}{{"abcdef", "ab", 3, 4}, {"abcdef", "ab", 4, 4}, {"ab", "abcdef", 1, 2}, {"kitten", "sitting", 3, 3}} {
		if got := DistanceAtMost(c.a, c.b, c.limit); got != c.want {
			t.Errorf("DistanceAtMost(%q, %q, %d) = %d, want %d", c.a, c.b, c.limit, got, c.want)
		}
	}
}
