package spec_test

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/sessionapi"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// TestCheckKeys: keys are checked against the type at their path, through
// embedded structs, pointers and slices; below a map or a json.RawMessage
// any key goes; a duplicate names its path.
func TestCheckKeys(t *testing.T) {
	start := reflect.TypeFor[sessionapi.StartRequest]()
	for _, c := range []struct{ body, want string }{
		{`{"ws_url":"x","headers":{"evry":"1"},"reconnect_on":{"match":{"path":"e","equals":{"any":{"key":1}}}}}`, ""},
		{`{"ws_url":"x","open_messages":[{"text":"a","wait_for":{"path":"e","equals":[{"k":1}]}}]}`, ""},
		{`{"keepalive_reply":{"match":{"path":"a","equals":1},"replay":"x"}}`, `unknown field "keepalive_reply.replay" (did you mean "keepalive_reply.reply"?)`},
		{`{"open_messages":[{"text":"a"},{"text":"b","waitFor":{}}]}`, `unknown field "open_messages[1].waitFor" (did you mean "open_messages[1].wait_for"?)`},
		{`{"resume":{"zzzzzzzzzz":1}}`, `unknown field "resume.zzzzzzzzzz"`},
		{`{"headers":{"A":"1","A":"2"}}`, `duplicate key "headers.A"`},
		{`{"ws_url":"x"`, "unexpected EOF"},
	} {
		_, err := spec.CheckKeys([]byte(c.body), start)
		if (c.want == "") != (err == nil) || err != nil && err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
	}
	var ke *spec.KeyError
	_, err := spec.CheckKeys([]byte(strings.Repeat(`{"headers":`, 17)), start)
	if !errors.As(err, &ke) || ke.Kind != spec.KeyTooDeep {
		t.Fatalf("17 levels: %v", err)
	}
}

// CheckKeys returns the top-level keys given a value other than null (what
// Check tells an omitted field from an empty one by), from the same walk.
func TestCheckKeysReturnsTheGivenKeys(t *testing.T) {
	given, err := spec.CheckKeys([]byte(`{"ws_url":"x","headers":null,"seq_path":"","resume":{"value":null},"open_messages":[],"idle_timeout" : null}`),
		reflect.TypeFor[sessionapi.StartRequest]())
	if err != nil {
		t.Fatal(err)
	}
	want := spec.Keys{"ws_url": true, "seq_path": true, "resume": true, "open_messages": true}
	if !maps.Equal(given, want) {
		t.Fatalf("given %v, want %v", given, want)
	}
}
