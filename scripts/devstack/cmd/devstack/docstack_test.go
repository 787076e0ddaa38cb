package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/syncbuf"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// bannerEnd is the banner's last line.
const bannerEnd = "Ctrl-C stops everything gracefully.\n"

// docStack is make dev's run as the docs tests start it: free ports, dir
// instead of .dev, checkpoints every second; up once its banner is
// printed.
type docStack struct {
	out    *syncbuf.Buffer
	api    string // the ingest API's URL, from the banner
	feedWS string // the demo feed's scheme://host:port, from the banner
	stop   func() error
}

// startDocStack starts the stack in dir and waits for its banner (a run
// that ends before it fails t with worker-1's log), extra flags after the
// docs tests' own. stop is Ctrl-C: it ends the run and returns its error;
// t's cleanup stops a stack still running.
func startDocStack(t *testing.T, dir string, extra ...string) *docStack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &docStack{out: &syncbuf.Buffer{}}
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, append([]string{"--dir", dir, "--dynamo-port", "0", "--sqs-port", "0", "--api-port", "0", "--feed-port", "0",
			"--admin-port-base", "0", "--checkpoint-every", "1s"}, extra...), s.out)
	}()
	var once sync.Once
	var end error
	s.stop = func() error {
		once.Do(func() { cancel(); end = <-errc })
		return end
	}
	t.Cleanup(func() { _ = s.stop() })
	testwait.Eventually(t, time.Minute, "the banner", func() bool {
		select {
		case err := <-errc:
			once.Do(func() { cancel(); end = err })
			log, _ := os.ReadFile(filepath.Join(dir, "logs", "worker-1.log"))
			t.Fatalf("the stack ended: %v\n%s\nworker-1.log:\n%s", err, s.out.String(), log)
		default:
		}
		return strings.Contains(s.out.String(), bannerEnd)
	})
	said := s.out.String()
	s.api = regexp.MustCompile(`ingest API   (\S+)`).FindStringSubmatch(said)[1]
	s.feedWS = regexp.MustCompile(`demo feed    (wss?://[^/]+)/feed/`).FindStringSubmatch(said)[1]
	return s
}

// local is a docs command c aimed at this stack: the docs' ingest API
// (127.0.0.1:8787) and demo feed (127.0.0.1:8790, whatever scheme dials
// it) are the stack's free ports.
func (s *docStack) local(c string) string {
	c = strings.ReplaceAll(c, "http://127.0.0.1:8787", s.api)
	return strings.ReplaceAll(c, "127.0.0.1:8790", strings.SplitN(s.feedWS, "://", 2)[1])
}

// shDoc runs a docs command c through bash as a user's shell would, in dir
// with env added, within 10 s, and returns what it printed (trimmed); a
// failure fails t. Without pipefail a grep that finds nothing yet, at the
// head of a pipe, prints nothing instead of failing.
func shDoc(t *testing.T, dir string, env []string, c string, pipefail bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := "set -e; "
	if pipefail {
		opts = "set -eo pipefail; "
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", opts+c)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("$ %s: %v\n%s%s", c, err, o.String(), e.String())
	}
	return strings.TrimSpace(o.String())
}

// installedBin is root's bin/name (`make devstack-bins`), failing t when it
// is not built.
func installedBin(t *testing.T, root, name string) string {
	t.Helper()
	p := filepath.Join(root, "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("bin/%s (make devstack-bins): %v", name, err)
	}
	return p
}
