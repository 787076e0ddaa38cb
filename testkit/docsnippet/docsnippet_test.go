package docsnippet

import (
	"reflect"
	"testing"
)

func TestSections(t *testing.T) {
	doc := "text\n$ not in a block\n```\n$ curl -X POST \\\n    -d '{}'\n{\"ok\":true}\n$ bin/wsfleet status\nID  STATE\na   STARTED\n```\nmore\n```\nno command here\n```\n"
	got := Sections(doc)
	want := []Section{
		{Cmd: "curl -X POST -d '{}'", Out: []string{`{"ok":true}`}},
		{Cmd: "bin/wsfleet status", Out: []string{"ID  STATE", "a   STARTED"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Sections = %+v, want %+v", got, want)
	}
}
