package streamer

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// workerGoroutines are the stacks of the goroutines running the worker's
// own code (this package, its batcher, its claim loops, its sessions),
// besides the calling test's.
func workerGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "testing.tRunner") || strings.Contains(g, "testing.(*T).Run") {
			continue
		}
		for _, pkg := range []string{"wsfleet/workers/streamer.", "workers/streamer/sink/batch.", "workers/streamer/internal/claim.", "workers/streamer/internal/session.",
			"workers/streamer/internal/waitfor."} {
			if strings.Contains(g, pkg) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// Issue 23: Run returns only after every goroutine the worker started has
// ended: the batcher it owns, the admin server, mailbox re-reads, a
// /handoff claim, the claim loops and the sessions.
func TestRunLeavesNoGoroutineBehind(t *testing.T) {
	if left := workerGoroutines(); len(left) > 0 { // earlier tests' workers have all returned
		t.Logf("%d worker goroutines before the test (ignored by name below)", len(left))
	}
	before := map[string]bool{}
	for _, g := range workerGoroutines() {
		before[strings.SplitN(g, "\n", 2)[0]] = true
	}
	dest := &brownoutDest{written: map[string]map[int64]bool{}}
	bc := batch.DefaultConfig()
	bc.RequestTimeout = testConfig("x").SafetyMargin / 2
	b, err := batch.New(dest, bc, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	m := startMem(t, 3, nil, b)
	testwait.Eventually(t, 10*time.Second, "3 sessions streaming into the batcher", func() bool {
		return dest.count("mem-000000") >= 5 && dest.count("mem-000001") >= 5 && dest.count("mem-000002") >= 5
	})
	observer{m.Worker}.Mailbox([]string{"mem-000001"}) // a mailbox re-read
	resp := adminDo(t, http.MethodPost, fmt.Sprintf("http://%s/handoff?connection_id=unknown-session", m.AdminAddr()))
	resp.Body.Close() // its claim runs in the background
	m.cancel()
	err = <-m.done
	m.done <- err // for the cleanup
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// A goroutine that signalled its end (a session's sessWG.Done, run by
	// its defer) may still be returning from its last frame when Run
	// returns: wait a moment for such exits, never for running code (an
	// orphan stays, and fails the check at the deadline).
	var left []string
	deadline := time.Now().Add(2 * time.Second)
	for {
		left = left[:0]
		for _, g := range workerGoroutines() {
			if !before[strings.SplitN(g, "\n", 2)[0]] {
				left = append(left, g)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Fatalf("%d goroutines of the worker still running after Run returned:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}
