package source

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/secretref"
)

func ptr(s string) *string { return &s }

func TestValidate(t *testing.T) {
	big := strings.Repeat("x", MaxOpenMessageBytes)
	cases := []struct {
		name  string
		c     Config
		field string // "" = valid
		why   string
	}{
		{"zero", Config{}, "", ""},
		{"subscribe with ack", Config{OpenMessages: []OpenMessage{{Text: ptr(`{"type":"subscribe","from":"{{resume_from}}","id":"{{connection_id}}","g":{{generation}},"l":"{{last_seq}}"}`),
			WaitFor: &Match{Path: "type", Equals: json.RawMessage(`"subscriptions"`), Timeout: "2s"}}}}, "", ""},
		{"binary", Config{OpenMessages: []OpenMessage{{BinaryB64: ptr(base64.StdEncoding.EncodeToString([]byte{0, 1, 2}))}}}, "", ""},
		{"okx ping", Config{AppPing: &AppPing{Message: "ping", Every: "20s", Pong: "pong"}}, "", ""},
		{"zoom keepalive", Config{KeepaliveReply: &KeepaliveReply{Match: Match{Path: "msg_type", Equals: json.RawMessage(`"KEEP_ALIVE_REQ"`)},
			Reply: `{"msg_type":"KEEP_ALIVE_RESP"}`}}, "", ""},
		{"none", Config{SeqMode: SeqNone, IdleTimeout: "30s"}, "", ""},
		{"deliver", Config{OnMissingSeq: MissingDeliver}, "", ""},
		{"skip refused", Config{OnSinkRefusal: RefusalSkip}, "", ""},
		{"unknown placeholder", Config{OpenMessages: []OpenMessage{{Text: ptr(`{"t":"{{token}}"}`)}}}, "open_messages", "unknown placeholder"},
		{"too many", Config{OpenMessages: make([]OpenMessage, MaxOpenMessages+1)}, "open_messages", "at most 16"},
		{"neither", Config{OpenMessages: []OpenMessage{{}}}, "open_messages", "exactly one of text and binary_b64"},
		{"both", Config{OpenMessages: []OpenMessage{{Text: ptr("a"), BinaryB64: ptr("YQ==")}}}, "open_messages", "exactly one"},
		{"empty text", Config{OpenMessages: []OpenMessage{{Text: ptr("")}}}, "open_messages", "1..65536 bytes"},
		{"oversize", Config{OpenMessages: []OpenMessage{{Text: ptr(big + "x")}}}, "open_messages", "1..65536 bytes"},
		{"total", Config{OpenMessages: []OpenMessage{{Text: &big}, {Text: &big}, {Text: ptr("x")}}}, "open_messages", "in all"},
		{"bad base64", Config{OpenMessages: []OpenMessage{{BinaryB64: ptr("not base64!")}}}, "open_messages", "base64"},
		{"wait_for empty segment", Config{OpenMessages: []OpenMessage{{Text: ptr("a"), WaitFor: &Match{Path: "a..b", Equals: json.RawMessage(`1`)}}}}, "open_messages", "empty segment"},
		{"wait_for object", Config{OpenMessages: []OpenMessage{{Text: ptr("a"), WaitFor: &Match{Path: "a", Equals: json.RawMessage(`{}`)}}}}, "open_messages", "string, number"},
		{"wait_for no equals", Config{OpenMessages: []OpenMessage{{Text: ptr("a"), WaitFor: &Match{Path: "a"}}}}, "open_messages", "equals is required"},
		{"wait_for timeout", Config{OpenMessages: []OpenMessage{{Text: ptr("a"), WaitFor: &Match{Path: "a", Equals: json.RawMessage(`1`), Timeout: "5m"}}}}, "open_messages", "timeout"},
		{"ping too often", Config{AppPing: &AppPing{Message: "ping", Every: "500ms"}}, "app_ping", "every"},
		{"ping no message", Config{AppPing: &AppPing{Every: "5s"}}, "app_ping", "message"},
		{"keepalive no reply", Config{KeepaliveReply: &KeepaliveReply{Match: Match{Path: "t", Equals: json.RawMessage(`"x"`)}}}, "keepalive_reply", "reply"},
		{"keepalive timeout", Config{KeepaliveReply: &KeepaliveReply{Match: Match{Path: "t", Equals: json.RawMessage(`"x"`), Timeout: "1s"}, Reply: "r"}}, "keepalive_reply", "wait_for only"},
		{"idle", Config{IdleTimeout: "0s"}, "idle_timeout", "duration"},
		{"seq mode", Config{SeqMode: "auto"}, "seq_mode", "field"},
		{"missing under none", Config{SeqMode: SeqNone, OnMissingSeq: MissingDeliver}, "on_missing_seq", "field"},
		{"missing value", Config{OnMissingSeq: "keep"}, "on_missing_seq", "deliver"},
		{"sink refusal value", Config{OnSinkRefusal: "ignore"}, "on_sink_refusal", "skip"},
		{"seq placeholder under none", Config{SeqMode: SeqNone, OpenMessages: []OpenMessage{{Text: ptr("{{resume_from}}")}}}, "open_messages", "seq_mode"},
		{"planned by age", Config{MaxConnectionAge: "23h", SwitchTimeout: "1m"}, "", ""},
		{"planned on notice", Config{ReconnectOn: &ReconnectOn{Match: Match{Path: "e", Equals: json.RawMessage(`"serverShutdown"`)}, Deliver: true}}, "", ""},
		{"age too short", Config{MaxConnectionAge: "500ms"}, "max_connection_age", "duration from 1s"},
		{"age too long", Config{MaxConnectionAge: "800h"}, "max_connection_age", "duration"},
		{"age not a duration", Config{MaxConnectionAge: "1 day"}, "max_connection_age", "duration"},
		{"reconnect_on no equals", Config{ReconnectOn: &ReconnectOn{Match: Match{Path: "e"}}}, "reconnect_on", "equals is required"},
		{"reconnect_on timeout", Config{ReconnectOn: &ReconnectOn{Match: Match{Path: "e", Equals: json.RawMessage(`1`), Timeout: "1s"}}}, "reconnect_on", "wait_for only"},
		{"switch_timeout alone", Config{SwitchTimeout: "10s"}, "switch_timeout", "max_connection_age or reconnect_on"},
		{"switch_timeout too long", Config{MaxConnectionAge: "1h", SwitchTimeout: "1h"}, "switch_timeout", "duration"},
	}
	for _, c := range cases {
		fe := c.c.Validate()
		switch {
		case c.field == "" && fe != nil:
			t.Errorf("%s: %v, want valid", c.name, fe)
		case c.field != "" && fe == nil:
			t.Errorf("%s: valid, want a %s error", c.name, c.field)
		case c.field != "" && (fe.Field != c.field || !strings.Contains(fe.Message, c.why)):
			t.Errorf("%s: %s: %s, want field %s and %q", c.name, fe.Field, fe.Message, c.field, c.why)
		}
	}
}

// TestNormalizePlanned: the planned reconnect's durations are stored in
// Go's own form, and a switch_timeout equal to the default is dropped.
func TestNormalizePlanned(t *testing.T) {
	c := Config{MaxConnectionAge: "1380m", SwitchTimeout: "30000ms"}
	c.Normalize()
	if c.MaxConnectionAge != "23h0m0s" || c.SwitchTimeout != "" {
		t.Fatalf("normalized %q, %q", c.MaxConnectionAge, c.SwitchTimeout)
	}
	if c.SwitchDeadline() != DefaultSwitchTimeout || !c.Planned() {
		t.Fatalf("deadline %v, planned %v", c.SwitchDeadline(), c.Planned())
	}
	c = Config{ReconnectOn: &ReconnectOn{}, SwitchTimeout: "90s"}
	c.Normalize()
	if c.SwitchTimeout != "1m30s" || c.SwitchDeadline() != 90*time.Second {
		t.Fatalf("switch timeout %q", c.SwitchTimeout)
	}
}

func TestRender(t *testing.T) {
	tmpl := `{"from":"{{resume_from}}","last":"{{last_seq}}","id":"{{connection_id}}","gen":{{generation}}}`
	cases := []struct {
		v    Vars
		want string
	}{
		{Vars{LastSeq: 41, ConnectionID: "c1", Generation: 3}, `{"from":"42","last":"41","id":"c1","gen":3}`},
		{Vars{LastSeq: 41, ResumeLast: true, ConnectionID: "c1", Generation: 3}, `{"from":"41","last":"41","id":"c1","gen":3}`},
		{Vars{LastSeq: -1, ConnectionID: "c1", Generation: 1}, `{"from":"","last":"","id":"c1","gen":1}`},
	}
	for _, c := range cases {
		if got := Render(tmpl, c.v); got != c.want {
			t.Errorf("Render(%+v) = %s, want %s", c.v, got, c.want)
		}
	}
	if got := Render("{{ resume_from }}", Vars{LastSeq: 1}); got != "{{ resume_from }}" {
		t.Errorf("Render replaced a non-placeholder: %s", got)
	}
}

func TestMatcher(t *testing.T) {
	str := Match{Path: "msg_type", Equals: json.RawMessage(`"KEEP_ALIVE_REQ"`)}.Compile()
	num := Match{Path: "code", Equals: json.RawMessage(` 0 `)}.Compile()
	cases := []struct {
		m    Matcher
		raw  string
		want bool
	}{
		{str, `"KEEP_ALIVE_REQ"`, true},
		{str, `"KEEP_ALIVE_\u0052EQ"`, true},
		{str, `"KEEP_ALIVE_RESP"`, false},
		{str, `1`, false},
		{num, `0`, true},
		{num, `"0"`, false},
		{num, `00`, false},
	}
	for _, c := range cases {
		if got := c.m.Equal([]byte(c.raw)); got != c.want {
			t.Errorf("%+v.Equal(%s) = %v, want %v", c.m, c.raw, got, c.want)
		}
	}
	if len(str.Path) != 1 || str.Path[0] != "msg_type" {
		t.Errorf("path %q", str.Path)
	}
}

func TestNormalizeDropsSpelledOutDefaults(t *testing.T) {
	c := Config{SeqMode: SeqField, OnMissingSeq: MissingDrop, OnSinkRefusal: RefusalFail, OpenMessages: []OpenMessage{}}
	c.Normalize()
	if c.SeqMode != "" || c.OnMissingSeq != "" || c.OnSinkRefusal != "" || c.OpenMessages != nil {
		t.Fatalf("Normalize kept a spelled-out default: %+v", c)
	}
}

func TestParsePath(t *testing.T) {
	for _, p := range []string{"", ".a", "a.", "a..b", strings.Repeat("a.", MaxPathSegments) + "a", `a"b`, strings.Repeat("x", MaxPathBytes+1)} {
		if _, err := ParsePath(p); err == nil {
			t.Errorf("ParsePath(%q) accepted", p)
		}
	}
	if got, err := ParsePath("data.u"); err != nil || len(got) != 2 || got[1] != "u" {
		t.Errorf("ParsePath(data.u) = %q, %v", got, err)
	}
}

// The source placeholders and the references are disjoint: Render leaves a
// reference as written, and Expand leaves a placeholder as written.
func TestDisjointFromSourcePlaceholders(t *testing.T) {
	in := `{"from":"{{resume_from}}","last":"{{last_seq}}","id":"{{connection_id}}","g":{{generation}},"k":"{{secret:wsfleet/prod/a}}"}`
	rendered := Render(in, Vars{LastSeq: 4, ConnectionID: "c1", Generation: 2})
	if !strings.Contains(rendered, `"{{secret:wsfleet/prod/a}}"`) {
		t.Fatalf("Render changed the reference: %s", rendered)
	}
	for _, p := range []string{PhResumeFrom, PhLastSeq, PhConnectionID, PhGeneration} {
		if strings.HasPrefix(p, secretref.Open) || len(secretref.Refs(p)) != 0 {
			t.Fatalf("placeholder %s reads as a reference", p)
		}
	}
	out, err := secretref.Expand(in, func(secretref.Ref) (string, error) { return "v", nil })
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(in, "{{secret:wsfleet/prod/a}}", "v", 1)
	if out != want {
		t.Fatalf("Expand = %s, want %s", out, want)
	}
}

// An open message may hold a well-formed secret reference (whether the
// deployment allows it is ingest's check); a malformed one is refused
// without quoting the text.
func TestOpenMessagesTakeSecretReferences(t *testing.T) {
	text := `{"op":"auth","key":"{{secret:wsfleet/prod/feed#api_key}}","from":{{resume_from}}}`
	c := Config{OpenMessages: []OpenMessage{{Text: &text}}}
	if fe := c.Validate(); fe != nil {
		t.Fatalf("a reference in an open message: %v", fe)
	}
	bad := `{"key":"{{secret:wsfleet/prod/feed sk-live-123}}"}`
	c = Config{OpenMessages: []OpenMessage{{Text: &bad}}}
	fe := c.Validate()
	if fe == nil || fe.Field != "open_messages" || strings.Contains(fe.Error(), "sk-live") {
		t.Fatalf("a malformed reference: %v", fe)
	}
	// Not in the application ping or the keep-alive reply (the worker
	// expands references in headers and open messages only).
	ref := "{{secret:wsfleet/prod/feed}}"
	c = Config{AppPing: &AppPing{Message: ref, Every: "20s"}}
	if fe := c.Validate(); fe == nil || fe.Field != "app_ping" {
		t.Fatalf("a reference in app_ping: %v", fe)
	}
	c = Config{KeepaliveReply: &KeepaliveReply{Match: Match{Path: "t", Equals: json.RawMessage(`"ka"`)}, Reply: ref}}
	if fe := c.Validate(); fe == nil || fe.Field != "keepalive_reply" {
		t.Fatalf("a reference in keepalive_reply: %v", fe)
	}
}
