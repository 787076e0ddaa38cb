package spec

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/source"
)

// redacted are the start fields View does not show, each with what GET
// shows instead: their values may carry credentials.
var redacted = map[string]string{
	"headers": "header_names (and secret_refs): the names only",
}

// fieldCases are, for each start field, a value other than its default
// (given: everyField is built from them), a body its check refuses
// (refused) with a part of the reason (why), and, for a setting, its
// bounds (TestEverySettingKeepsItsBounds). A new field is one row here:
// the tests below fail until it has one.
var fieldCases = []struct {
	field, given, refused, why string
	bounds                     *bounds
}{
	{"ws_url", `"ws_url":"wss://feed.example/x?token=url-secret"`, `{"ws_url":""}`, "required", nil},
	{"headers", `"headers":{"Authorization":"Bearer hdr-secret"}`, `{"ws_url":"wss://x/","headers":{"Host":"h"}}`, "WebSocket handshake", nil},
	{"seq_field", `"seq_field":"data.u"`, `{"ws_url":"wss://x/","seq_field":"a..b"}`, "empty segment", nil},
	{"resume_query_param", `"resume_query_param":"from"`, `{"ws_url":"wss://x/","resume_query_param":"a b"}`, "must match", nil},
	{"subprotocols", `"subprotocols":["v1"]`, `{"ws_url":"wss://x/","subprotocols":["a","a"]}`, "twice", within("0", "8", zeroIsDefault)},
	{"follow_redirects", `"follow_redirects":2`, `{"ws_url":"wss://x/","follow_redirects":6}`, "0..5", within("0", "5", zeroIsDefault)},
	{"checkpoint_every", `"checkpoint_every":"30s"`, `{"ws_url":"wss://x/","checkpoint_every":"500ms"}`, "1s to 10m", within("1s", "10m", zeroRefused)},
	{"connect_timeout_ms", `"connect_timeout_ms":30000`, `{"ws_url":"wss://x/","connect_timeout_ms":0}`, "omit it", within("1", "300000", zeroRefused)},
	{"reconnect_backoff_max_ms", `"reconnect_backoff_max_ms":2000`, `{"ws_url":"wss://x/","reconnect_backoff_max_ms":0}`, "omit it", within("100", "300000", zeroRefused)},
	{"seq_path", `"seq_path":"data.u"`, `{"ws_url":"wss://x/","seq_path":"data..u"}`, "empty segment", nil},
	{"resume", `"resume":{"query_param":"from","value":"last"}`, `{"ws_url":"wss://x/","resume":{"value":"first"}}`, `"next" or "last"`, nil},
	{"standby", `"standby":{"enabled":true}`, `{"ws_url":"wss://x/","standby":{}}`, "standby.enabled: is required", nil},
	{"seq_mode", `"seq_mode":"field"`, `{"ws_url":"wss://x/","seq_mode":"auto"}`, "field", nil},
	{"open_messages", `"open_messages":[{"text":"sub"}]`, `{"ws_url":"wss://x/","open_messages":[{}]}`, "exactly one", nil},
	{"app_ping", `"app_ping":{"message":"ping","every":"20s"}`, `{"ws_url":"wss://x/","app_ping":{"message":"","every":"5s"}}`, "message", nil},
	{"keepalive_reply", `"keepalive_reply":{"match":{"path":"t","equals":"ka"},"reply":"pong"}`, `{"ws_url":"wss://x/","keepalive_reply":{"match":{"path":"t","equals":"x"}}}`, "reply", nil},
	{"idle_timeout", `"idle_timeout":"1m"`, `{"ws_url":"wss://x/","idle_timeout":""}`, "omit it", nil},
	{"on_missing_seq", `"on_missing_seq":"deliver"`, `{"ws_url":"wss://x/","on_missing_seq":"keep"}`, "deliver", nil},
	{"on_sink_refusal", `"on_sink_refusal":"skip"`, `{"ws_url":"wss://x/","on_sink_refusal":""}`, "omit it", nil},
	{"max_connection_age", `"max_connection_age":"1h"`, `{"ws_url":"wss://x/","max_connection_age":""}`, "omit it", nil},
	{"reconnect_on", `"reconnect_on":{"match":{"path":"e","equals":"bye"}}`, `{"ws_url":"wss://x/","reconnect_on":{"match":{"path":"e"}}}`, "equals is required", nil},
	{"switch_timeout", `"switch_timeout":"45s"`, `{"ws_url":"wss://x/","switch_timeout":"10s"}`, "max_connection_age or reconnect_on", nil},
}

// everyField is a start body that gives every field of Spec a value other
// than its default (fieldCases' given values).
var everyField = func() string {
	var parts []string
	for _, c := range fieldCases {
		parts = append(parts, c.given)
	}
	return "{" + strings.Join(parts, ",") + "}"
}()

// A start field checks its own path: every field of Spec has a row in
// docs/api.md's field table and its refusal's code in the error table, and
// GET shows it (View, with a value for a spec that gives one) or it is on
// the redaction list, which View never shows.
func TestEveryFieldIsDocumentedAndShown(t *testing.T) {
	fields := FieldNames(reflect.TypeFor[Spec]())
	given, err := CheckKeys([]byte(everyField), reflect.TypeFor[Spec]())
	if err != nil {
		t.Fatal(err)
	}
	if missing := slices.DeleteFunc(slices.Clone(fields), func(f string) bool { return given[f] }); len(missing) > 0 {
		t.Fatalf("everyField gives no value to %v: add them", missing)
	}

	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	table := docTable(t, string(doc), "| Field | Required | Meaning |", 0)
	codes := docTable(t, string(doc), "| Status | `code` | When |", 1)
	for _, f := range fields {
		if !table[f] {
			t.Errorf("docs/api.md's start field table has no row for %s", f)
		}
		if code := source.FieldCode(f); !codes[code] {
			t.Errorf("docs/api.md's error table has no %s (the refusal of %s)", code, f)
		}
	}

	s, fe := parse(t, everyField)
	if fe != nil {
		t.Fatal(fe)
	}
	b, err := json.Marshal(s.View())
	if err != nil {
		t.Fatal(err)
	}
	var view map[string]any
	if err := json.Unmarshal(b, &view); err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		v, shown := view[f]
		switch _, hidden := redacted[f]; {
		case hidden && shown:
			t.Errorf("View shows %s, which is on the redaction list", f)
		case !hidden && (!shown || empty(v)):
			t.Errorf("View does not show %s (%v): show it, or put it on the redaction list with what GET shows instead", f, v)
		}
	}
	for _, secret := range []string{"url-secret", "hdr-secret"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("View quotes %s: %s", secret, b)
		}
	}
	for f := range maps.Keys(redacted) {
		if !slices.Contains(fields, f) {
			t.Errorf("the redaction list names %s, not a field", f)
		}
	}
}

// Every field's check refuses a bad value naming the field, with the
// field's code (source.FieldCode), the one docs/api.md's error table lists.
func TestEveryFieldIsRefusedWithItsCode(t *testing.T) {
	rows := map[string]bool{}
	for _, c := range fieldCases {
		if rows[c.field] {
			t.Errorf("fieldCases has %s twice", c.field)
		}
		rows[c.field] = true
		_, fe := parse(t, c.refused)
		switch {
		case fe == nil:
			t.Errorf("%s: accepted", c.refused)
		case fe.Field != c.field || fe.Code() != source.FieldCode(c.field) || !strings.Contains(fe.Error(), c.why):
			t.Errorf("%s: %s %s %q, want %s %s %q", c.refused, fe.Field, fe.Code(), fe.Error(), c.field, source.FieldCode(c.field), c.why)
		}
	}
	for _, f := range FieldNames(reflect.TypeFor[Spec]()) {
		if !rows[f] {
			t.Errorf("fieldCases has no row for %s", f)
		}
		delete(rows, f)
	}
	for f := range rows {
		t.Errorf("fieldCases has a row for %s, not a field of Spec", f)
	}
}

// docTable is the set of names in backquotes in column col of the markdown
// table under header in doc.
func docTable(t *testing.T, doc, header string, col int) map[string]bool {
	t.Helper()
	_, rest, ok := strings.Cut(doc, header+"\n")
	if !ok {
		t.Fatalf("docs/api.md has no table %q", header)
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	names := map[string]bool{}
	for _, line := range strings.Split(rest, "\n")[1:] { // [0]: the |---| row
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) <= col+1 {
			continue
		}
		for _, m := range quoted.FindAllStringSubmatch(cells[col+1], -1) {
			names[m[1]] = true
		}
	}
	return names
}

// empty reports whether a decoded JSON value shows nothing: null, "", 0,
// false, [] or {}.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return reflect.ValueOf(v).IsZero()
}
