package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/syncbuf"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// `make dev` twice on one folder: a whole first stack runs (make dev's own
// code, free ports) and delivers a session; then bin/devstack is started
// again on its folder, with its ports (make dev twice) and with other ones
// (the issue's `bin/devstack` with other ports), with and without --fresh.
// Each refuses at once naming the first's pid and --dir, and the first is
// unharmed: its token, run count and log untouched (no "stack stopped"
// appended), its token still opens its workers' admin, its API answers, its
// table (dynalite on the folder's data) still holds the session, and the
// session keeps delivering. After its Ctrl-C the folder still holds the
// session.
func TestSecondStartOnOneFolderRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack")
	}
	root := enginetest.InstalledRoot(t)
	bin := installedBin(t, root, "devstack")
	dir := t.TempDir()
	first := startDocStack(t, dir)
	pid := strconv.Itoa(os.Getpid()) // the first stack runs in this process
	banner := first.out.String()
	dynamo := regexp.MustCompile(`DynamoDB     (http://127\.0\.0\.1:\d+)`).FindStringSubmatch(banner)[1]
	admin := regexp.MustCompile(`worker-1-run1 +(http://\S+/status)`).FindStringSubmatch(banner)[1]
	port := func(url string) string { return url[strings.LastIndex(url, ":")+1:] }
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Post(first.api+"/sessions", "application/json",
		strings.NewReader(`{"connection_id":"first","ws_url":"`+first.feedWS+`/feed/first","resume_query_param":"from"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("start first: HTTP %d", resp.StatusCode)
	}
	delivered := func() int {
		n := 0
		files, _ := filepath.Glob(filepath.Join(dir, "logs", "worker-*.sink.jsonl"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			n += bytes.Count(b, []byte(`{"connection_id":"first","seq":`))
		}
		return n
	}
	testwait.Eventually(t, 30*time.Second, "the first stack's session in its sink", func() bool { return delivered() > 0 })
	kept := map[string]string{}
	for _, p := range []string{"admin-token", "data/devstack-run", "logs/devstack.log"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		kept[p] = string(b)
	}
	// dynalite's LevelDB files that stay while it runs (the log and table
	// files come and go with compactions).
	levelDB, _ := filepath.Glob(filepath.Join(dir, "data", "[CLM][UOA]*"))
	if len(levelDB) < 3 {
		t.Fatalf("the first stack's data folder holds %v; want LevelDB's CURRENT, LOCK and MANIFEST", levelDB)
	}

	samePorts := []string{"--dynamo-port", port(dynamo), "--api-port", port(first.api), "--feed-port", port(first.feedWS)}
	otherPorts := []string{"--dynamo-port", "0", "--sqs-port", "0", "--api-port", "0", "--feed-port", "0", "--admin-port-base", "0"}
	for _, args := range [][]string{samePorts, append(samePorts, "--fresh"), otherPorts, append(otherPorts, "--fresh")} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, bin, append([]string{"--dir", dir}, args...)...).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "in use by the stack of pid "+pid) || !strings.Contains(string(out), "--dir") {
			t.Errorf("bin/devstack --dir DIR %v: %v; want a refusal naming pid %s and --dir:\n%s", args, err, pid, out)
		}
		checkState(t, fmt.Sprint("after bin/devstack ", args), dir, kept)
		for _, f := range levelDB {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("after bin/devstack %v: the first stack's data: %v", args, err)
			}
		}
	}

	if l, _ := os.ReadFile(filepath.Join(dir, "logs", "devstack.log")); bytes.Contains(l, []byte(`"stack stopped"`)) {
		t.Errorf("the running stack's log says it stopped:\n%s", l)
	}
	req, _ := http.NewRequest(http.MethodGet, admin, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(kept["admin-token"]))
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("worker-1's admin with the token on disk: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if resp, err := hc.Get(first.api + "/sessions/first"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the first stack's API: GET /sessions/first: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if !tableItems(t, dynamo)["first"] {
		t.Errorf("the first stack's table (%s) lacks the session", dynamo)
	}
	seen := delivered()
	testwait.Eventually(t, 30*time.Second, "a new record of the first stack's session", func() bool { return delivered() > seen })

	if err := first.stop(); err != nil {
		t.Errorf("the first stack's end: %v", err)
	}
	if !stoppedStackItems(t, root, dir)["first"] {
		t.Errorf("the stopped first stack's data folder lacks the session")
	}
}

// A misspelled flag is one error with the nearest flag, not the usage.
func TestFlagTypoSuggests(t *testing.T) {
	err := run(context.Background(), []string{"--worker=2"}, new(syncbuf.Buffer))
	if err == nil || !strings.Contains(err.Error(), "did you mean --workers?") || !strings.Contains(err.Error(), "-h") {
		t.Fatalf("--worker=2: %v", err)
	}
}
