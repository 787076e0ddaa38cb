package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// readmeAPIBlock is README.md's "Using the API" block: each command
// (continuation lines joined) with the "# → " answer that follows it on
// its own line ("" when none).
func readmeAPIBlock(t *testing.T, readme string) (cmds, answers []string) {
	t.Helper()
	return shBlockAfter(t, readme, "## Using the API", "README.md's Using the API")
}

// shBlockAfter is shCommands of the first sh block of doc after marker
// (what names them in a failure).
func shBlockAfter(t *testing.T, doc, marker, what string) (cmds, answers []string) {
	t.Helper()
	i := strings.Index(doc, marker)
	if i < 0 {
		t.Fatalf("%s: no %q", what, marker)
	}
	body := doc[i:]
	start := strings.Index(body, "```sh\n")
	if start < 0 {
		t.Fatalf("%s has no sh block", what)
	}
	body = body[start+len("```sh\n"):]
	end := strings.Index(body, "```")
	if end < 0 {
		t.Fatalf("%s: its sh block does not end", what)
	}
	return shCommands(body[:end])
}

// shCommands are the commands of a doc's sh block (continuation lines
// joined, comment lines aside), each with the "# → " answer that follows it
// on its own line ("" when none).
func shCommands(block string) (cmds, answers []string) {
	var cur string
	for _, l := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(l, "# → "):
			if len(answers) > 0 {
				answers[len(answers)-1] = strings.TrimPrefix(l, "# → ")
			}
		case strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "":
		case strings.HasSuffix(l, `\`):
			cur += strings.TrimSuffix(l, `\`)
		default:
			cmds, answers = append(cmds, strings.TrimSpace(cur+l)), append(answers, "")
			cur = ""
		}
	}
	return cmds, answers
}

// elidedMatch reports whether printed is want, where each "…" of want
// stands for any text (the fields an answer the README shows leaves out):
// want's parts are printed's prefix, its suffix and, between them, in
// order.
func elidedMatch(want, printed string) bool {
	parts := strings.Split(want, "…")
	if len(parts) == 1 {
		return want == printed
	}
	if !strings.HasPrefix(printed, parts[0]) {
		return false
	}
	rest := printed[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return strings.HasSuffix(rest, parts[len(parts)-1])
}

// TestREADMEWalkThrough runs every command of README.md's "Using the API"
// block and its CLI examples on a stack started by this command's run (as
// TestDocsWalkThrough does for docs/local-stack.md): the first curl starts
// hello and its records reach the sink (with a deadline), and the answers
// the README shows (start, status, list, stop, workers and the bad input's,
// after a status code; "…" for the fields it leaves out) are what the API
// printed, numbers normalised.
func TestREADMEWalkThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("the README's commands are curls: %v", err)
	}
	root := enginetest.InstalledRoot(t)
	wsfleet := installedBin(t, root, "wsfleet")
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, answers := readmeAPIBlock(t, string(b))
	if len(cmds) < 6 {
		t.Fatalf("README.md's Using the API shows %d commands, want start, status, list, stop, workers, bad input", len(cmds))
	}
	dir := t.TempDir()
	st := startDocStack(t, dir)
	defer func() {
		if err := st.stop(); err != nil {
			t.Errorf("the stack's end: %v", err)
		}
	}()
	api, feedWS := st.api, st.feedWS
	sh := func(c string) string {
		t.Helper()
		return shDoc(t, root, nil, st.local(c), true)
	}
	status := regexp.MustCompile(`^[0-9]{3} `)
	for i, c := range cmds {
		printed := sh(c)
		if answers[i] != "" {
			want := status.ReplaceAllString(answers[i], "")
			if !elidedMatch(numbersOut(want), numbersOut(printed)) {
				t.Errorf("README.md: $ %s\nshows %s\nthe API printed %s", c, want, printed)
			}
		}
		if i == 0 {
			// The first curl delivers: hello's records reach a worker's sink,
			// and its owner checkpoints them (the status the README shows).
			testwait.Eventually(t, 30*time.Second, "hello's records in the sink", func() bool {
				files, _ := filepath.Glob(filepath.Join(dir, "logs", "worker-*.sink.jsonl"))
				for _, f := range files {
					if b, _ := os.ReadFile(f); bytes.Contains(b, []byte(`{"connection_id":"hello","seq":`)) {
						return true
					}
				}
				return false
			})
			testwait.Eventually(t, 30*time.Second, "hello checkpointed", func() bool {
				resp, err := http.Get(api + "/sessions/hello")
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				var s struct {
					LastSeq *int64 `json:"last_seq"`
					Owner   string `json:"lease_owner"`
				}
				return json.NewDecoder(resp.Body).Decode(&s) == nil && s.LastSeq != nil && s.Owner != ""
			})
		}
	}

	// The CLI examples: start, status, workers, stop.
	for _, args := range [][]string{
		{"start", feedWS + "/feed/cli", "--id", "cli"}, {"status"}, {"workers"}, {"stop", "cli"},
	} {
		c := exec.Command(wsfleet, append([]string{"--api", api}, args...)...)
		if o, err := c.CombinedOutput(); err != nil {
			t.Errorf("bin/wsfleet %s: %v\n%s", strings.Join(args, " "), err, o)
		}
	}
}
