package spec

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/source"
)

// parse decodes body as ingest does (encoding/json, then Check on the keys
// the body gave).
func parse(t *testing.T, body string) (Spec, *source.FieldError) {
	t.Helper()
	var s Spec
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("unmarshal %s: %v", body, err)
	}
	given, err := CheckKeys([]byte(body), reflect.TypeFor[Spec]())
	if err != nil {
		t.Fatal(err)
	}
	return s, s.Check(given)
}

func encoded(t *testing.T, body string) string {
	t.Helper()
	s, fe := parse(t, body)
	if fe != nil {
		t.Fatalf("%s: %v", body, fe)
	}
	enc, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// TestSameConfigurationEncodesTheSame: what a start compares to decide
// whether the generation moves. Aliases, spelled-out defaults, empty lists
// and duration spellings encode like their canonical form; a real change
// does not.
func TestSameConfigurationEncodesTheSame(t *testing.T) {
	base := `{"ws_url":"wss://feed.example/a"}`
	same := []string{
		`{"ws_url":"wss://feed.example/a","seq_field":"seq"}`,
		`{"ws_url":"wss://feed.example/a","seq_path":"seq","seq_mode":"field","on_missing_seq":"drop"}`,
		`{"ws_url":"wss://feed.example/a","on_sink_refusal":"fail","headers":{},"subprotocols":[],"open_messages":[]}`,
		`{"ws_url":"wss://feed.example/a","resume":{"value":"next"}}`,
		`{"ws_url":"wss://feed.example/a","follow_redirects":0,"resume":null,"headers":null}`,
	}
	want := encoded(t, base)
	for _, b := range same {
		if got := encoded(t, b); got != want {
			t.Errorf("%s encodes to %s, want %s", b, got, want)
		}
	}
	if a, b := encoded(t, `{"ws_url":"wss://x/","resume_query_param":"from"}`), encoded(t, `{"ws_url":"wss://x/","resume":{"query_param":"from","value":"next"}}`); a != b {
		t.Errorf("resume alias: %s != %s", a, b)
	}
	if a, b := encoded(t, `{"ws_url":"wss://x/","checkpoint_every":"120s"}`), encoded(t, `{"ws_url":"wss://x/","checkpoint_every":"2m"}`); a != b {
		t.Errorf("checkpoint_every spellings: %s != %s", a, b)
	}
	differ := []string{
		`{"ws_url":"wss://feed.example/b"}`,
		`{"ws_url":"wss://feed.example/a","headers":{"X-Key":"k"}}`,
		`{"ws_url":"wss://feed.example/a","seq_path":"data.u"}`,
		`{"ws_url":"wss://feed.example/a","subprotocols":["v1"]}`,
		`{"ws_url":"wss://feed.example/a","follow_redirects":1}`,
		`{"ws_url":"wss://feed.example/a","checkpoint_every":"30s"}`,
		`{"ws_url":"wss://feed.example/a","resume":{"value":"last"}}`,
		`{"ws_url":"wss://feed.example/a","on_sink_refusal":"skip"}`,
		`{"ws_url":"wss://feed.example/a","idle_timeout":"30s"}`,
	}
	seen := map[string]string{want: base}
	for _, b := range differ {
		got := encoded(t, b)
		if prev, dup := seen[got]; dup {
			t.Errorf("%s encodes like %s: %s", b, prev, got)
		}
		seen[got] = b
	}
}

// TestCheckNamesTheField: each refusal names its field, and its code is
// the API's.
func TestCheckNamesTheField(t *testing.T) {
	cases := []struct{ body, field, code, why string }{
		{`{}`, "ws_url", "invalid_ws_url", "required"},
		{`{"ws_url":"wss://x/","headers":{"Host":"h"}}`, "headers", "invalid_header", "WebSocket handshake"},
		{`{"ws_url":"wss://x/","headers":{"X-K":" v"}}`, "headers", "invalid_header", "whitespace"},
		{`{"ws_url":"wss://x/","seq_field":"a..b"}`, "seq_field", "invalid_seq_field", "empty segment"},
		{`{"ws_url":"wss://x/","seq_field":"a","seq_path":"b"}`, "seq_path", "invalid_seq_path", "differ"},
		{`{"ws_url":"wss://x/","seq_mode":"none","seq_path":"b"}`, "seq_path", "invalid_seq_path", `"field" only`},
		{`{"ws_url":"wss://x/","resume_query_param":"a b"}`, "resume_query_param", "invalid_resume_query_param", "must match"},
		{`{"ws_url":"wss://x/","resume":{"value":"first"}}`, "resume", "invalid_resume", `"next" or "last"`},
		{`{"ws_url":"wss://x/","seq_mode":"none","resume":{"value":"last"}}`, "resume", "invalid_resume", `"field" only`},
		{`{"ws_url":"wss://x/","on_sink_refusal":""}`, "on_sink_refusal", "invalid_on_sink_refusal", "omit it"},
		{`{"ws_url":"wss://x/","idle_timeout":""}`, "idle_timeout", "invalid_idle_timeout", "omit it"},
		{`{"ws_url":"wss://x/","seq_mode":"auto"}`, "seq_mode", "invalid_seq_mode", "field"},
		{`{"ws_url":"wss://x/","open_messages":[{}]}`, "open_messages", "invalid_open_messages", "exactly one"},
	}
	for _, c := range cases {
		_, fe := parse(t, c.body)
		if fe == nil {
			t.Errorf("%s: accepted", c.body)
			continue
		}
		if fe.Field != c.field || fe.Code() != c.code || !strings.Contains(fe.Error(), c.why) {
			t.Errorf("%s: %s %s %q, want %s %s %q", c.body, fe.Field, fe.Code(), fe.Error(), c.field, c.code, c.why)
		}
	}
}

// TestEncodeDoesNotEscapeHTML: <, > and & are stored as one byte each, not
// six (the stored size is what DynamoDB bills and caps).
func TestEncodeDoesNotEscapeHTML(t *testing.T) {
	text := strings.Repeat("<&>", 1000)
	s := Spec{WSURL: "wss://x/", Config: source.Config{OpenMessages: []source.OpenMessage{{Text: &text}}}}
	if fe := s.Check(nil); fe != nil {
		t.Fatal(fe)
	}
	enc, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) > len(text)+200 {
		t.Fatalf("stored %d bytes for a %d-byte open message", len(enc), len(text))
	}
}

func TestDecodeReadsTheStoredForm(t *testing.T) {
	enc := encoded(t, `{"ws_url":"wss://x/?token=t","headers":{"Authorization":"Bearer b"},"seq_path":"data.u","resume_query_param":"from","checkpoint_every":"30s"}`)
	s, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if s.Seq() != "data.u" || s.ResumeParam() != "from" || s.ResumesLast() || s.CheckpointInterval().Seconds() != 30 || s.Headers["Authorization"] != "Bearer b" {
		t.Fatalf("decoded %+v", s)
	}
	if again, _ := s.Encode(); again != enc {
		t.Fatalf("re-encoded %s, stored %s", again, enc)
	}
	for _, stored := range []string{"", "not json", `{"seq_mode":"none"}`, `{"ws_url":"wss://x/","seq_mode":"sometimes"}`} {
		if _, err := Decode(stored); err == nil {
			t.Errorf("Decode(%q) accepted", stored)
		}
	}
}

func TestViewRedacts(t *testing.T) {
	s, fe := parse(t, `{"ws_url":"wss://u:p@x/feed?token=secret&flag#frag","headers":{"X-B":"b","Authorization":"a"},"open_messages":[{"text":"{\"key\":\"secret\"}"},{"binary_b64":"AAEC"}],"resume":{"value":"last"},`+
		`"app_ping":{"message":"{\"ping\":\"secret\"}","every":"20s","pong":"secret-pong"},"keepalive_reply":{"match":{"path":"t","equals":"\"ka\""},"reply":"{\"ka\":\"secret\"}"}}`)
	if fe != nil {
		t.Fatal(fe)
	}
	v := s.View()
	raw, _ := json.Marshal(v)
	if strings.Contains(string(raw), "secret") || strings.Contains(string(raw), "u:p") || strings.Contains(string(raw), `"a"`) {
		t.Fatalf("view leaks: %s", raw)
	}
	if v.WSURL != "wss://x/feed?token=REDACTED&REDACTED" || !slices.Equal(v.HeaderNames, []string{"Authorization", "X-B"}) {
		t.Fatalf("view %+v", v)
	}
	if len(v.OpenMessages) != 2 || v.OpenMessages[0].Kind != "text" || v.OpenMessages[1].Kind != "binary" || v.OpenMessages[1].Bytes != 3 {
		t.Fatalf("open messages %+v", v.OpenMessages)
	}
	if p := v.AppPing; p == nil || p.Kind != "text" || p.Bytes != len(`{"ping":"secret"}`) || p.Every != "20s" || p.PongBytes != len("secret-pong") {
		t.Fatalf("app_ping %+v", v.AppPing)
	}
	if k := v.KeepaliveReply; k == nil || k.ReplyKind != "text" || k.ReplyBytes != len(`{"ka":"secret"}`) || k.Match.Path != "t" {
		t.Fatalf("keepalive_reply %+v", v.KeepaliveReply)
	}
	if v.SeqField != "seq" || v.SeqMode != "field" || v.OnMissingSeq != "drop" || v.OnSinkRefusal != "fail" || v.Resume == nil || v.Resume.Value != "last" {
		t.Fatalf("defaults not spelled out: %+v", v)
	}
}

// TestViewShowsPlannedReconnects: GET shows max_connection_age and
// reconnect_on as stored, and the switch deadline spelled out.
func TestViewShowsPlannedReconnects(t *testing.T) {
	s, fe := parse(t, `{"ws_url":"wss://x/feed","max_connection_age":"23h","reconnect_on":{"match":{"path":"e","equals":"serverShutdown"}}}`)
	if fe != nil {
		t.Fatal(fe)
	}
	v := s.View()
	if v.MaxConnectionAge != "23h0m0s" || v.ReconnectOn == nil || v.ReconnectOn.Match.Path != "e" || v.SwitchTimeout != "30s" {
		t.Fatalf("view %+v", v)
	}
	s, _ = parse(t, `{"ws_url":"wss://x/feed"}`)
	if v := s.View(); v.MaxConnectionAge != "" || v.ReconnectOn != nil || v.SwitchTimeout != "" {
		t.Fatalf("a session without planned reconnects shows %+v", v)
	}
}

func TestFieldNamesIncludeTheSourceProtocol(t *testing.T) {
	names := FieldNames(reflect.TypeOf(Spec{}))
	for _, want := range []string{"ws_url", "headers", "seq_field", "seq_path", "resume", "open_messages", "app_ping", "on_sink_refusal", "checkpoint_every", "max_connection_age", "reconnect_on", "switch_timeout", "standby"} {
		if !slices.Contains(names, want) {
			t.Errorf("FieldNames lacks %s: %v", want, names)
		}
	}
	if slices.Contains(names, "Config") {
		t.Errorf("the embedded source config is a key: %v", names)
	}
}

func TestRedactURL(t *testing.T) {
	cases := map[string]string{
		"wss://h.example.com/feed?token=abc&x=1":    "wss://h.example.com/feed?token=REDACTED&x=REDACTED",
		"wss://h.example.com/feed":                  "wss://h.example.com/feed",
		"wss://h.example.com/feed?secrettoken":      "wss://h.example.com/feed?REDACTED",
		"wss://h.example.com/feed?a=1;b=2&c=":       "wss://h.example.com/feed?a=REDACTED&c=REDACTED",
		"wss://u:p@h.example.com/f?k=v#frag":        "wss://h.example.com/f?k=REDACTED",
		"ws://127.0.0.1:9000/?sig=AbC%2F%3D&empty=": "ws://127.0.0.1:9000/?sig=REDACTED&empty=REDACTED",
		"ws://a.example.com/?&":                     "ws://a.example.com/?&", // nothing to hide (found by FuzzDecodeStart)
		"%zz://bad":                                 "REDACTED",
	}
	for in, want := range cases {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
		for _, secret := range []string{"abc", "AbC", "secrettoken", ":p@", "frag"} {
			if strings.Contains(in, secret) && strings.Contains(RedactURL(in), secret) {
				t.Errorf("RedactURL(%q) leaks %q", in, secret)
			}
		}
	}
}
