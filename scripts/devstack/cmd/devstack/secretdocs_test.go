package main

import (
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

// authDigest is a feed message's "auth" value (feed.AuthDigest).
var authDigest = regexp.MustCompile(`sha256:[0-9a-f]{12}`)

// TestDocsSecretRotation runs docs/local-stack.md's secret rotation block
// verbatim through bash on a stack started by this command's run with
// --secret-cache-ttl 2s, as the doc says to start it: in a folder whose
// .dev is the stack's, SM set to the banner's Secrets Mgr URL as the doc
// tells the user, the doc's ports (8787, 8790) the stack's. Each command's
// output must be the answer the doc shows under it, numbers normalised and
// "…" standing for what it leaves out, and the auth digests it shows exact
// (A: the seeded demo-token's, B: rotated-token's). A grep of the sink
// runs again until its line is the one shown (the messages take a moment to
// arrive): the rotated secret must reach the dial after the block's one
// drop.
func TestDocsSecretRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("the doc's commands are curls: %v", err)
	}
	root := enginetest.InstalledRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "docs", "local-stack.md"))
	if err != nil {
		t.Fatal(err)
	}
	cmds, answers := shBlockAfter(t, string(b), "To see a rotation reach the next dial", "docs/local-stack.md's secret rotation")
	if len(cmds) < 6 {
		t.Fatalf("the rotation block shows %d commands, want start, grep, rotate, sleep, drop, grep", len(cmds))
	}

	home := t.TempDir()
	st := startDocStack(t, filepath.Join(home, ".dev"), "--secret-cache-ttl", "2s")
	defer func() {
		if err := st.stop(); err != nil {
			t.Errorf("the stack's end: %v", err)
		}
	}()
	sm := regexp.MustCompile(`Secrets Mgr  (http://\S+)`).FindStringSubmatch(st.out.String())
	if sm == nil {
		t.Fatalf("the banner names no Secrets Mgr:\n%s", st.out.String())
	}
	// The block's start is the banner's secret-demo start.
	banner := regexp.MustCompile(`(?m)^  (curl .*) \\\n    (-d '\{"connection_id":"secret-demo".*)$`).FindStringSubmatch(st.out.String())
	if banner == nil || numbersOut(strings.Join(strings.Fields(cmds[0]), " ")) != numbersOut(banner[1]+" "+banner[2]) {
		t.Errorf("docs/local-stack.md's rotation starts with\n%s\nnot the banner's secret-demo start (numbers aside):\n%q", cmds[0], banner)
	}
	sh := func(c string, pipefail bool) string {
		t.Helper()
		return shDoc(t, home, []string{"SM=" + sm[1]}, st.local(c), pipefail)
	}
	shows := func(want, printed string) bool {
		for _, d := range authDigest.FindAllString(want, -1) {
			if !strings.Contains(printed, d) {
				return false
			}
		}
		return elidedMatch(numbersOut(want), numbersOut(printed))
	}
	digests := 0
	for i, c := range cmds {
		want := answers[i]
		digests += len(authDigest.FindAllString(want, -1))
		if !strings.HasPrefix(c, "grep ") {
			printed := sh(c, true)
			t.Logf("$ %s\n%s", c, printed)
			if want != "" && !shows(want, printed) {
				t.Errorf("docs/local-stack.md: $ %s\nshows %s\nit printed %s", c, want, printed)
			}
			continue
		}
		var printed string
		testwait.Eventually(t, 20*time.Second, "$ "+c+" printing "+want, func() bool {
			printed = sh(c, false)
			return shows(want, printed)
		})
		t.Logf("$ %s\n%s", c, printed)
	}
	if digests != 2 {
		t.Errorf("the rotation block shows %d auth digests, want 2 (before and after)", digests)
	}
}
