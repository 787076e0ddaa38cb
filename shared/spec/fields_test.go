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

// everyField is a start body that gives every field of Spec a value other
// than its default (the test below fails until a new field is added here).
const everyField = `{"ws_url":"wss://feed.example/x?token=url-secret","headers":{"Authorization":"Bearer hdr-secret"},` +
	`"seq_field":"data.u","seq_path":"data.u","resume_query_param":"from","resume":{"query_param":"from","value":"last"},` +
	`"subprotocols":["v1"],"follow_redirects":2,"checkpoint_every":"30s","standby":{"enabled":true},` +
	`"open_messages":[{"text":"sub"}],"app_ping":{"message":"ping","every":"20s"},` +
	`"keepalive_reply":{"match":{"path":"t","equals":"ka"},"reply":"pong"},"idle_timeout":"1m",` +
	`"seq_mode":"field","on_missing_seq":"deliver","on_sink_refusal":"skip",` +
	`"max_connection_age":"1h","reconnect_on":{"match":{"path":"e","equals":"bye"}},"switch_timeout":"45s"}`

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
