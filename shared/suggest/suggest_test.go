package suggest

import "testing"

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
