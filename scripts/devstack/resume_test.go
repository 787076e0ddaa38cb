package devstack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/proc"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// Worker ids: the slot, the run, the restart (from the second incarnation).
func TestWorkerID(t *testing.T) {
	for _, c := range []struct {
		slot int
		run  string
		n    int
		want string
	}{
		{1, "", 1, "worker-1"}, {1, "", 2, "worker-1.r2"},
		{3, "run2", 1, "worker-3-run2"}, {3, "run2", 4, "worker-3-run2.r4"},
	} {
		if got := WorkerID(c.slot, c.run, c.n); got != c.want {
			t.Errorf("WorkerID(%d, %q, %d) = %q, want %q", c.slot, c.run, c.n, got, c.want)
		}
	}
	c := DefaultConfig()
	c.RunID = "a.b"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "run id") {
		t.Fatalf("run id with a dot (the restart suffix's): %v", err)
	}
}

// The run count of a data directory goes up by one a run; an unreadable
// count is an error, not a new start from 1 (it would reuse worker ids).
func TestNextRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	for want := 1; want <= 3; want++ {
		if n, err := nextRun(dir); err != nil || n != want {
			t.Fatalf("run %d: got %d, %v", want, n, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, runFile), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := nextRun(dir); err == nil {
		t.Fatalf("junk count taken as %d", n)
	}
}

// Two runs on one data directory (`make dev`, Ctrl-C, `make dev`): the
// second run's workers take ids of their own (no "worker record exists"),
// and the sessions the first left STARTED resume from their checkpoints:
// the first sequence the second run delivers follows the first run's
// checkpoint, and last_seq keeps going up.
func TestSecondRunResumes(t *testing.T) {
	root := enginetest.InstalledRoot(t)
	cfg := DefaultConfig()
	// The binaries of bin/ (`make devstack-bins`; Start fails naming a missing one).
	cfg.Root, cfg.Dir, cfg.Ports, cfg.Workers = root, t.TempDir(), Ports{}, 2
	fastTimings(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sessions := []string{"a", "b", "c"}
	var mu sync.Mutex
	var events []WorkerEvent
	cfg.OnWorker = func(ev WorkerEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	}
	said := func() string {
		mu.Lock()
		defer mu.Unlock()
		var b strings.Builder
		for _, ev := range events {
			b.WriteString(ev.String() + "\n")
		}
		return b.String()
	}

	// lastSeqs is every session's last_seq (-1: none yet), from the API.
	lastSeqs := func(st *Stack) map[string]int64 {
		out := map[string]int64{}
		ss, err := st.API.List(ctx, "")
		if err != nil {
			t.Logf("list: %v", err)
			return out
		}
		for _, s := range ss {
			out[s.ConnectionID] = -1
			if s.LastSeq != nil {
				out[s.ConnectionID] = *s.LastSeq
			}
		}
		return out
	}
	start := func(run string) *Stack {
		t.Helper()
		st, err := Start(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: %v", run, err)
		}
		if st.RunID() != run {
			t.Errorf("run id %q, want %q", st.RunID(), run)
		}
		for _, w := range st.Workers() {
			if want := WorkerID(w.Index, run, 1); w.ID() != want {
				t.Errorf("worker id %s, want %s", w.ID(), want)
			}
		}
		return st
	}
	stop := func(st *Stack) {
		t.Helper()
		if err := st.Shutdown(ctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}

	st := start("run1")
	for _, id := range sessions {
		if _, err := st.StartSession(ctx, id); err != nil {
			stop(st)
			t.Fatal(err)
		}
	}
	var seen map[string]int64 // a checkpoint of every session, from the first run
	testwait.Eventually(t, 30*time.Second, "every session checkpointed past seq 10 in the first run", func() bool {
		seen = lastSeqs(st)
		for _, id := range sessions {
			if seen[id] < 10 {
				return false
			}
		}
		return true
	})
	stop(st) // graceful: the workers release with a final checkpoint
	delivered := st.Sinks().Last()
	// The sessions' ws_url names the first run's feed port: the second
	// feed listens there (make dev's ports are fixed).
	cfg.Ports.Feed = st.Config().Ports.Feed

	st = start("run2")
	defer func() {
		if st != nil {
			stop(st)
		}
	}()
	firsts := func() map[string]int64 {
		out := map[string]int64{}
		for _, r := range st.Sinks().Records() {
			if _, ok := out[r.ConnectionID]; !ok {
				out[r.ConnectionID] = r.Seq
			}
		}
		return out
	}
	testwait.Eventually(t, 30*time.Second, "every session delivering again in the second run", func() bool {
		return len(firsts()) == len(sessions)
	})
	first := firsts()
	t.Logf("first run: checkpoint seen %v, delivered up to a %d b %d c %d; second run first delivered %v",
		seen, delivered["a"].Seq, delivered["b"].Seq, delivered["c"].Seq, first)
	for _, id := range sessions {
		// After the checkpoint the first run was seen to write, and no gap
		// after what it delivered (at least once: a repeat of the last
		// records before its final checkpoint is allowed).
		if f, d := first[id], delivered[id].Seq; f <= seen[id] || f > d+1 {
			t.Errorf("%s: the second run delivered seq %d first; the first run checkpointed %d and delivered up to %d", id, f, seen[id], d)
		}
	}
	testwait.Eventually(t, 30*time.Second, "last_seq past the first run's deliveries", func() bool {
		now := lastSeqs(st)
		for _, id := range sessions {
			if now[id] <= delivered[id].Seq {
				return false
			}
		}
		return true
	})
	for _, r := range st.Sinks().Records() {
		if !strings.HasSuffix(r.WorkerID, "-run2") {
			t.Fatalf("second run: record by worker %s", r.WorkerID)
		}
	}
	ws, err := st.API.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, w := range ws.Workers {
		states[w.ID] = w.State
	}
	for _, w := range st.Workers() {
		if old := WorkerID(w.Index, "run1", 1); states[old] != schema.WorkerLeft || states[w.ID()] != schema.WorkerAlive {
			t.Errorf("worker records: %s %q, %s %q (want LEFT, ALIVE): %v", old, states[old], w.ID(), states[w.ID()], states)
		}
	}
	stop(st)
	st = nil
	for _, want := range []string{"worker-1-run1 up (pid ", "worker-2-run2 up (pid "} {
		if !strings.Contains(said(), want) {
			t.Errorf("events lack %q:\n%s", want, said())
		}
	}

	// An id reused (a run id given again) is refused by the worker: the
	// stack says the worker exited before it was ready, with its log, and
	// does not restart it (the start fails).
	cfg.RunID, cfg.Workers = "run1", 1
	cfg.RestartWorkers = &proc.Restart{Delay: 10 * time.Millisecond}
	mu.Lock()
	events = nil
	mu.Unlock()
	st0, err0 := Start(ctx, cfg)
	if err := err0; err == nil {
		stop(st0)
		t.Fatal("a stack reusing run1's worker ids started")
	} else if !strings.Contains(err.Error(), "worker-1-run1 exited before it was ready") || !strings.Contains(err.Error(), "worker-1.log") {
		t.Fatalf("reused id: %v", err)
	}
	text := said()
	t.Logf("reused id: %v; said:\n%s", err0, text)
	if !strings.Contains(text, "worker-1-run1 (pid ") || !strings.Contains(text, "before it was ready; see ") || strings.Contains(text, "restarting") || strings.Contains(text, " up (pid") {
		t.Errorf("reused id: events\n%s", text)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.Dir, "logs", "worker-1.log")); err != nil || !strings.Contains(string(b), "worker record exists") {
		t.Errorf("worker-1.log does not say why (%v)", err)
	}
}
