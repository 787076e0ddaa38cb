package api

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

// Every start body in docs/sources.md is one the API accepts: the curl
// examples (against the local stack) and the real-feed sessions (those
// with a <placeholder> left for the reader are skipped).
func TestSourcesDocBodiesAreAccepted(t *testing.T) {
	root, err := enginetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "sources.md"))
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, m := range regexp.MustCompile("(?s)-d '(.*?)'\n```").FindAllStringSubmatch(string(doc), -1) {
		bodies = append(bodies, m[1])
	}
	curls := len(bodies)
	for _, m := range regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		if !strings.Contains(m[1], "<") {
			bodies = append(bodies, m[1])
		}
	}
	if curls < 5 || len(bodies) < curls+3 {
		t.Fatalf("found %d curl bodies and %d sessions in all: the examples moved", curls, len(bodies))
	}
	policy := URLPolicy{PrivateIPs: config.PrivateIPsLoopback}
	for _, b := range bodies {
		if _, e := DecodeStart([]byte(b), policy); e != nil {
			t.Errorf("docs/sources.md body refused: %s: %s\n%s", e.code, e.message, b)
		}
	}
}
