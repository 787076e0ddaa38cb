package spec

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A standby disabled is no standby, and spelled-out defaults are dropped:
// those starts encode like their canonical form (the generation does not
// move); a real change of the standby does not.
func TestStandbySameConfigurationEncodesTheSame(t *testing.T) {
	base := `{"ws_url":"wss://x/"}`
	for _, b := range []string{
		`{"ws_url":"wss://x/","standby":{"enabled":false}}`,
		`{"ws_url":"wss://x/","standby":{"enabled":false,"window":"1m","window_bytes":65536}}`,
		`{"ws_url":"wss://x/","standby":null}`,
	} {
		if got, want := encoded(t, b), encoded(t, base); got != want {
			t.Errorf("%s encodes to %s, want %s", b, got, want)
		}
	}
	on := encoded(t, `{"ws_url":"wss://x/","standby":{"enabled":true}}`)
	if on != `{"ws_url":"wss://x/","standby":{"enabled":true}}` {
		t.Errorf("canonical standby: %s", on)
	}
	for _, b := range []string{
		`{"ws_url":"wss://x/","standby":{"enabled":true,"window":"30s"}}`,
		`{"ws_url":"wss://x/","standby":{"enabled":true,"window":"0.5m","window_bytes":1048576}}`,
		`{"ws_url":"wss://x/","standby":{"enabled":true,"window":null,"window_bytes":null}}`,
	} {
		if got := encoded(t, b); got != on {
			t.Errorf("%s encodes to %s, want %s", b, got, on)
		}
	}
	if a, b := encoded(t, `{"ws_url":"wss://x/","standby":{"enabled":true,"window":"90s"}}`), encoded(t, `{"ws_url":"wss://x/","standby":{"enabled":true,"window":"1m30s"}}`); a != b {
		t.Errorf("window spellings: %s != %s", a, b)
	}
	seen := map[string]string{encoded(t, base): base, on: "enabled"}
	for _, b := range []string{
		`{"ws_url":"wss://x/","standby":{"enabled":true,"window":"1m"}}`,
		`{"ws_url":"wss://x/","standby":{"enabled":true,"window_bytes":65536}}`,
		`{"ws_url":"wss://x/","standby":{"enabled":true,"window":"1m","window_bytes":65536}}`,
	} {
		got := encoded(t, b)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s encodes like %s: %s", b, prev, got)
		}
		seen[got] = b
	}
}

// Each refusal names standby and the key at fault, with the bounds.
func TestStandbyCheckNamesTheField(t *testing.T) {
	for _, c := range []struct{ standby, why string }{
		{`{}`, "standby.enabled: is required"},
		{`{"enabled":null}`, "standby.enabled: is required"},
		{`{"window":"30s"}`, "standby.enabled: is required"},
		{`{"enabled":true,"window":""}`, "standby.window: must be a duration from 5s to 10m0s"},
		{`{"enabled":true,"window":"4s"}`, "standby.window: must be a duration from 5s to 10m0s"},
		{`{"enabled":true,"window":"10m1s"}`, "standby.window: must be a duration"},
		{`{"enabled":true,"window":"-30s"}`, "standby.window: must be a duration"},
		{`{"enabled":true,"window":"soon"}`, "standby.window: must be a duration"},
		{`{"enabled":true,"window":"` + strings.Repeat("1", 40) + `s"}`, "standby.window: must be a duration"},
		{`{"enabled":true,"window_bytes":65535}`, "standby.window_bytes: must be 65536..16777216"},
		{`{"enabled":true,"window_bytes":16777217}`, "standby.window_bytes: must be 65536..16777216"},
		{`{"enabled":true,"window_bytes":0}`, "standby.window_bytes: must be"},
		{`{"enabled":true,"window_bytes":-1}`, "standby.window_bytes: must be"},
		// A disabled standby's bounds are still checked: the body is wrong.
		{`{"enabled":false,"window":"1s"}`, "standby.window: must be"},
	} {
		body := `{"ws_url":"wss://x/","standby":` + c.standby + `}`
		_, fe := parse(t, body)
		if fe == nil {
			t.Errorf("%s: accepted", body)
			continue
		}
		if fe.Field != "standby" || fe.Code() != "invalid_standby" || !strings.HasPrefix(fe.Error(), c.why) {
			t.Errorf("%s: %s %s %q, want standby invalid_standby %q…", body, fe.Field, fe.Code(), fe.Error(), c.why)
		}
	}
}

// The worker reads the standby through StandbyEnabled and StandbyWindow,
// the defaults applied; the bounds themselves are accepted.
func TestStandbyMethods(t *testing.T) {
	for _, c := range []struct {
		standby string
		on      bool
		age     time.Duration
		bytes   int64
	}{
		{``, false, DefaultStandbyWindow, DefaultStandbyWindowBytes},
		{`,"standby":{"enabled":false,"window":"1m"}`, false, DefaultStandbyWindow, DefaultStandbyWindowBytes},
		{`,"standby":{"enabled":true}`, true, 30 * time.Second, 1 << 20},
		{`,"standby":{"enabled":true,"window":"5s","window_bytes":65536}`, true, MinStandbyWindow, MinStandbyWindowBytes},
		{`,"standby":{"enabled":true,"window":"10m","window_bytes":16777216}`, true, MaxStandbyWindow, MaxStandbyWindowBytes},
	} {
		body := `{"ws_url":"wss://x/"` + c.standby + `}`
		s, fe := parse(t, body)
		if fe != nil {
			t.Fatalf("%s: %v", body, fe)
		}
		// What the worker reads is the stored form, decoded.
		enc, err := s.Encode()
		if err != nil {
			t.Fatal(err)
		}
		s, err = Decode(enc)
		if err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		age, bytes := s.StandbyWindow()
		if s.StandbyEnabled() != c.on || age != c.age || bytes != c.bytes {
			t.Errorf("%s: enabled %v window %v %d bytes, want %v %v %d", body, s.StandbyEnabled(), age, bytes, c.on, c.age, c.bytes)
		}
	}
}

// GET shows the standby with its defaults spelled out, and nothing for a
// session without one.
func TestStandbyView(t *testing.T) {
	view := func(body string) string {
		s, fe := parse(t, body)
		if fe != nil {
			t.Fatalf("%s: %v", body, fe)
		}
		b, err := json.Marshal(s.View().Standby)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for body, want := range map[string]string{
		`{"ws_url":"wss://x/"}`:                                                                `null`,
		`{"ws_url":"wss://x/","standby":{"enabled":false}}`:                                    `null`,
		`{"ws_url":"wss://x/","standby":{"enabled":true}}`:                                     `{"enabled":true,"window":"30s","window_bytes":1048576}`,
		`{"ws_url":"wss://x/","standby":{"enabled":true,"window":"90s","window_bytes":65536}}`: `{"enabled":true,"window":"1m30s","window_bytes":65536}`,
	} {
		if got := view(body); got != want {
			t.Errorf("%s: view %s, want %s", body, got, want)
		}
	}
}

// Check makes a new Standby: a spec built in code keeps its own as given
// (Stored checks a copy of the spec, whose pointers it shares).
func TestStandbyCheckLeavesTheCallersStandby(t *testing.T) {
	sb := &Standby{Enabled: new(true), Window: new("0.5m"), WindowBytes: new(int64(DefaultStandbyWindowBytes))}
	s := Spec{WSURL: "wss://x/", Standby: sb}
	enc, err := s.Stored()
	if err != nil {
		t.Fatal(err)
	}
	if enc != `{"ws_url":"wss://x/","standby":{"enabled":true}}` {
		t.Fatalf("stored %s", enc)
	}
	if s.Standby != sb || *sb.Window != "0.5m" || *sb.WindowBytes != DefaultStandbyWindowBytes {
		t.Fatalf("the caller's standby changed: %+v", *sb)
	}
}
