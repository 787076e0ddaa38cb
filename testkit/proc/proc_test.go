package proc

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/testkit/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Eventually(t, 10*time.Second, what, cond)
}

// recorder collects a Proc's exits and start times.
type recorder struct {
	mu     sync.Mutex
	exits  []Exit
	starts []time.Time
	exitAt []time.Time
}

func (r *recorder) onExit(e Exit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exits = append(r.exits, e)
	r.exitAt = append(r.exitAt, time.Now())
}

// nextEnv records a start and passes its number (1, 2, ...) as RUN.
func (r *recorder) nextEnv() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, time.Now())
	return append(os.Environ(), "RUN="+strconv.Itoa(len(r.starts)))
}

func (r *recorder) snapshot() ([]Exit, []time.Time, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Exit(nil), r.exits...), append([]time.Time(nil), r.starts...), append([]time.Time(nil), r.exitAt...)
}

func (r *recorder) nExits() int { e, _, _ := r.snapshot(); return len(e) }

func shProc(t *testing.T, name, script string) *Proc {
	return &Proc{Name: name, Argv: []string{"/bin/sh", "-c", script}, Env: os.Environ(), LogPath: filepath.Join(t.TempDir(), name+".log")}
}

func TestLinesSignalsAndStartAgain(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	// Two complete lines, one cut short, then wait for a signal.
	p := shProc(t, "sh", `trap 'exit 0' TERM; printf 'one\ntwo\npart'; echo oops >&2; while :; do sleep 0.05; done`)
	p.StdoutPath = filepath.Join(t.TempDir(), "sh.out")
	p.OnLine = func(b []byte) {
		mu.Lock()
		lines = append(lines, string(b))
		mu.Unlock()
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err == nil {
		t.Fatal("started twice")
	}
	waitFor(t, "two lines", func() bool { mu.Lock(); defer mu.Unlock(); return len(lines) == 2 })
	waitFor(t, "stderr in the log", func() bool { b, _ := os.ReadFile(p.LogPath); return strings.HasPrefix(string(b), "oops\n") })
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if p.Running() || p.ExitErr() != nil || p.Truncated() != 1 {
		t.Fatalf("running %v exit %v truncated %d", p.Running(), p.ExitErr(), p.Truncated())
	}
	if b, _ := os.ReadFile(p.StdoutPath); string(b) != "one\ntwo\n" {
		t.Fatalf("stdout file %q", b)
	}
	// Start again, then crash it.
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Starts() != 2 || p.ExitErr() == nil || !strings.Contains(p.ExitErr().Error(), "killed") {
		t.Fatalf("starts %d exit %v", p.Starts(), p.ExitErr())
	}
	if err := p.Signal(syscall.SIGTERM); err == nil {
		t.Fatal("signalled a dead process")
	}
}

// Stdout goes to the log by default and nowhere with DiscardStdout; a
// process that ignores SIGTERM is killed after the grace period.
func TestStdoutDestinationsAndStopKills(t *testing.T) {
	for _, discard := range []bool{false, true} {
		// The trap comes first: the test stops the process once it sees
		// to-stderr, and a SIGTERM before the trap would end it.
		p := shProc(t, "out", `trap '' TERM; echo to-stdout; echo to-stderr >&2; while :; do sleep 0.05; done`)
		p.DiscardStdout = discard
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		want := "to-stdout\nto-stderr\n"
		if discard {
			want = "to-stderr\n"
		}
		// Both lines are written at once: wait for stderr's, then compare.
		waitFor(t, "the log", func() bool { b, _ := os.ReadFile(p.LogPath); return strings.Contains(string(b), "to-stderr") })
		if b, _ := os.ReadFile(p.LogPath); string(b) != want {
			t.Errorf("discard %v: log %q, want %q", discard, b, want)
		}
		if err := p.Stop(200 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("stop of a process ignoring SIGTERM: %v", err)
		}
		if p.Running() {
			t.Error("still running after Stop")
		}
	}
}

// A supervised child that exits is reported with its code and started again
// after the delay; one killed by a signal (SIGKILL, SIGTERM) is reported
// with the signal and started again; Stop ends it for good.
func TestRestartReportsCodeAndSignal(t *testing.T) {
	rec := &recorder{}
	const delay = 50 * time.Millisecond
	p := shProc(t, "w", `[ "$RUN" = 1 ] && exit 3; while :; do sleep 0.05; done`)
	p.NextEnv, p.OnExit = rec.nextEnv, rec.onExit
	p.Restart = &Restart{Delay: delay, StableAfter: time.Nanosecond} // no backoff here
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "run 2", func() bool { return p.Starts() == 2 && p.Running() })
	for i, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		waitFor(t, "a running process", p.Running)
		if err := p.Signal(sig); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "run "+strconv.Itoa(i+3), func() bool { return p.Starts() == i+3 && p.Running() })
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stop reported", func() bool { return rec.nExits() == 4 })
	exits, starts, exitAt := rec.snapshot()
	want := []struct {
		code int
		sig  syscall.Signal
		text string
	}{{3, 0, "exited with code 3"}, {-1, syscall.SIGKILL, "killed by signal 9 (killed)"}, {-1, syscall.SIGTERM, "killed by signal 15 (terminated)"}}
	for i, w := range want {
		e := exits[i]
		if e.Code != w.code || e.Signal != w.sig || e.Err == nil || e.Stopped || e.RestartIn != delay || e.Pid == 0 {
			t.Errorf("exit %d: %+v, want code %d signal %v restart in %v", i, e, w.code, w.sig, delay)
		}
		if s := e.String(); !strings.Contains(s, w.text) || !strings.Contains(s, "restarting in 50ms") || !strings.HasPrefix(s, "w (pid ") {
			t.Errorf("exit %d says %q, want %q", i, s, w.text)
		}
		if gap := starts[i+1].Sub(exitAt[i]); gap < delay-5*time.Millisecond {
			t.Errorf("run %d started %v after exit %d was reported, want ≥ %v", i+2, gap, i+1, delay)
		}
	}
	if last := exits[3]; !last.Stopped || last.RestartIn != 0 {
		t.Errorf("the stop: %+v", last)
	}
	if p.Running() || len(starts) != 4 {
		t.Errorf("running %v after Stop, starts %d", p.Running(), len(starts))
	}
}

// Without a restart policy an exit is reported and nothing starts again:
// checked against a supervised twin that exits alongside it and restarts
// twice in the same time.
func TestNoRestartWithoutPolicy(t *testing.T) {
	off, on := &recorder{}, &recorder{}
	pOff := shProc(t, "off", `exit 2`)
	pOff.NextEnv, pOff.OnExit = off.nextEnv, off.onExit
	pOn := shProc(t, "on", `exit 2`)
	pOn.NextEnv, pOn.OnExit = on.nextEnv, on.onExit
	pOn.Restart = &Restart{Delay: 10 * time.Millisecond}
	defer pOn.Stop(time.Second)
	if err := pOff.Start(); err != nil {
		t.Fatal(err)
	}
	if err := pOn.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the supervised twin's third run", func() bool { return pOn.Starts() >= 3 })
	waitFor(t, "the exit reported", func() bool { return off.nExits() == 1 })
	exits, _, _ := off.snapshot()
	if e := exits[0]; e.Code != 2 || e.RestartIn != 0 || e.Err == nil || e.Stopped || strings.Contains(e.String(), "restarting") {
		t.Errorf("exit %+v (%s)", e, e)
	}
	if pOff.Starts() != 1 {
		t.Errorf("restarted without a policy: %d starts", pOff.Starts())
	}
}

// A restart loop backs off: each quick exit doubles the delay up to
// MaxDelay; a run that lasts StableAfter resets it. A restart that cannot
// start is reported and retried with the same backoff.
func TestRestartBacksOff(t *testing.T) {
	rec := &recorder{}
	dir := t.TempDir()
	bin := filepath.Join(dir, "child.sh")
	// Runs 1-5 exit at once; run 6 lasts 700 ms (> StableAfter) then exits.
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n[ \"$RUN\" -ge 6 ] && sleep 0.7\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := &Proc{Name: "loop", Argv: []string{bin}, LogPath: filepath.Join(dir, "loop.log"), NextEnv: rec.nextEnv}
	p.Restart = &Restart{Delay: 20 * time.Millisecond, MaxDelay: 80 * time.Millisecond, StableAfter: 500 * time.Millisecond}
	p.OnExit = func(e Exit) {
		rec.onExit(e)
		if rec.nExits() == 6 {
			os.Remove(bin) // the next restart cannot start
		}
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	waitFor(t, "7 exits", func() bool { return rec.nExits() >= 7 })
	if err := p.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	exits, starts, exitAt := rec.snapshot()
	ms := time.Millisecond
	want := []time.Duration{20 * ms, 40 * ms, 80 * ms, 80 * ms, 80 * ms, 20 * ms, 40 * ms}
	for i, w := range want {
		if exits[i].RestartIn != w {
			t.Errorf("exit %d: restart in %v, want %v", i+1, exits[i].RestartIn, w)
		}
		if i+1 < len(starts) {
			if gap := starts[i+1].Sub(exitAt[i]); gap < w-5*ms {
				t.Errorf("run %d started %v after exit %d, want ≥ %v", i+2, gap, i+1, w)
			}
		}
	}
	if e := exits[6]; e.Pid != 0 || e.Err == nil || !strings.Contains(e.String(), "loop could not start") {
		t.Errorf("the failed restart: %+v (%s)", e, e)
	}
	if p.Running() {
		t.Error("running after Stop")
	}
}

func TestWaitReady(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ok" {
			http.Error(w, "no", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	p := shProc(t, "up", `while :; do sleep 0.05; done`)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	if err := p.WaitReady(ctx, 5*time.Second, HTTPOK(srv.URL+"/ok")); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(ctx, time.Second, HTTPOK(srv.URL+"/down")); err == nil || !strings.Contains(err.Error(), "HTTP 503") {
		t.Fatalf("not ready: %v", err)
	}
	q := shProc(t, "gone", `exit 4`)
	if err := q.Start(); err != nil {
		t.Fatal(err)
	}
	if err := q.WaitReady(ctx, 5*time.Second, HTTPOK(srv.URL+"/down")); err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Fatalf("exited: %v", err)
	}
}
