package main

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/syncbuf"
)

// A port of the stack that something else listens on (another stack's, in
// another folder) stops make dev before it starts anything: the error names
// the engine and the port and says how to run a second stack (its own
// --dir, other ports or 0 for free ones). The folder is as it was, with and
// without --fresh (its sessions, token and run count kept), and its lock is
// released.
func TestPortTakenNamesTheEngineAndDir(t *testing.T) {
	enginetest.InstalledRoot(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	for _, engine := range []struct{ flag, name string }{{"--dynamo-port", "dynamo"}, {"--sqs-port", "sqs"}, {"--api-port", "ingest api"}, {"--feed-port", "feed"}} {
		for _, extra := range [][]string{nil, {"--fresh"}} {
			what := fmt.Sprintf("%s %s %v", engine.flag, taken, extra)
			dir := t.TempDir()
			writeState(t, dir, earlierRun)
			args := []string{"--dir", dir, "--dynamo-port", "0", "--sqs-port", "0", "--api-port", "0", "--feed-port", "0", "--admin-port-base", "0"}
			args = append(append(args, engine.flag, taken), extra...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := run(ctx, args, new(syncbuf.Buffer))
			cancel()
			if err == nil {
				t.Fatalf("%s: the stack started on a taken port", what)
			}
			for _, want := range []string{engine.name + " port " + taken + " is taken", "--dir", "or 0 for free ones"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %q does not say %q", what, err, want)
				}
			}
			if engine.name == "dynamo" {
				// docs/local-stack.md quotes it for the default port.
				said := strings.Replace(strings.SplitN(err.Error(), ": listen", 2)[0], taken, "8000", 1)
				doc, derr := os.ReadFile("../../../../docs/local-stack.md")
				if derr != nil || !strings.Contains(strings.Join(strings.Fields(string(doc)), " "), "`"+said+"`") {
					t.Errorf("docs/local-stack.md does not quote the refusal `%s` (%v)", said, derr)
				}
			}
			checkState(t, what, dir, earlierRun)
			filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
				if rel, _ := filepath.Rel(dir, p); err == nil && !d.IsDir() && earlierRun[rel] == "" && rel != devstack.LockFile {
					t.Errorf("%s: the refused start made %s", what, rel)
				}
				return nil
			})
			release, err := devstack.Lock(dir)
			if err != nil {
				t.Errorf("%s: the folder's lock is kept after the refusal: %v", what, err)
			} else {
				release()
			}
		}
	}
}
