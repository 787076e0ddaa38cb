package spec

import (
	"testing"
	"time"
)

// storedBefore is a spec with every field, stored by a build before
// Settings (issue 41): the stored form of older sessions.
const storedBefore = `{"ws_url":"wss://feed.example/x?token=url-secret","headers":{"Authorization":"Bearer hdr-secret"},` +
	`"subprotocols":["v1"],"follow_redirects":2,"checkpoint_every":"30s","seq_path":"data.u",` +
	`"resume":{"query_param":"from","value":"last"},"standby":{"enabled":true},"open_messages":[{"text":"sub"}],` +
	`"app_ping":{"message":"ping","every":"20s"},"keepalive_reply":{"match":{"path":"t","equals":"ka"},"reply":"pong"},` +
	`"idle_timeout":"1m","on_missing_seq":"deliver","on_sink_refusal":"skip","max_connection_age":"1h0m0s",` +
	`"reconnect_on":{"match":{"path":"e","equals":"bye"}},"switch_timeout":"45s"}`

// Settings embedded in Spec keeps the stored key order: a stored spec
// decodes and encodes back to the same text, so a start of the same
// configuration compares equal to it and moves no generation.
func TestSettingsKeepTheStoredForm(t *testing.T) {
	s, err := Decode(storedBefore)
	if err != nil {
		t.Fatal(err)
	}
	if enc, err := s.Encode(); err != nil || enc != storedBefore {
		t.Fatalf("re-encoded as\n%s\nwant\n%s (%v)", enc, storedBefore, err)
	}
}

// connect_timeout_ms's accessor: the unit, the default, and a stored value
// above today's bound run capped at it (the bounds: fieldCases).
func TestConnectTimeout(t *testing.T) {
	if s, _ := parse(t, `{"ws_url":"wss://x/"}`); s.ConnectTimeout() != 0 {
		t.Errorf("omitted: %s, want 0 (the worker's)", s.ConnectTimeout())
	}
	if s, _ := parse(t, `{"ws_url":"wss://x/","connect_timeout_ms":2500}`); s.ConnectTimeout() != 2500*time.Millisecond {
		t.Errorf("2500: %s", s.ConnectTimeout())
	}
	if s, err := Decode(`{"ws_url":"wss://x/","connect_timeout_ms":9000000000000}`); err != nil || s.ConnectTimeout() != MaxDialTimeout {
		t.Errorf("stored above the bound: %s, %v; want it run at %s", s.ConnectTimeout(), err, MaxDialTimeout)
	}
}
