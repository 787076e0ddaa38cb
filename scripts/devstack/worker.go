package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/faultnet"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/proc"
)

// Worker is one streamer process slot ("worker-N"). Every (re)start is a new
// incarnation with a new worker id (worker-N-<run>, then worker-N-<run>.r2,
// ...; worker-N and worker-N.r2 when the stack has no run id, in memory): a
// restarted process never reuses its predecessor's lease owner id, and a
// later run on the same data directory never reuses an earlier run's
// (Stack.RunID). Its stderr (zerolog JSON) goes to logs/worker-N.log, its
// stdout sink to logs/worker-N.sink.jsonl and to the stack's Sinks.
type Worker struct {
	Index     int
	AdminAddr string // 127.0.0.1:port
	Proc      *proc.Proc
	// DynamoProxy is the slot's own way to DynamoDB (Config.DynamoProxies;
	// nil otherwise): every incarnation of the slot goes through it.
	DynamoProxy *faultnet.Proxy

	stack *Stack

	mu      sync.Mutex
	ids     []string
	env     []string     // SetEnv
	cur     *incarnation // the current (or last) incarnation
	awaited bool         // Start waits for the next incarnation to be ready
}

// incarnation is one run of a worker slot.
type incarnation struct {
	id      string
	awaited bool          // Start waits for it: an exit before it is ready fails the start and is not restarted
	ready   chan struct{} // closed when its /healthz answered
	ended   chan struct{} // closed when it ended (or could not start)
	isReady bool          // under Worker.mu
	isEnded bool          // under Worker.mu
	exit    proc.Exit     // its end, when isEnded
	// pid is its process's, once known (under Worker.mu; 0 before); prev
	// is the incarnation before it: the Proc reports an exit after the
	// run's end is visible, so the next start (a rolling restart waits for
	// the end, then starts) may come before the previous exit's report,
	// which must not end the new incarnation.
	pid  int
	prev *incarnation
}

// WorkerEvent is a worker incarnation coming up or ending (Config.OnWorker).
type WorkerEvent struct {
	ID    string // the incarnation's worker id (worker-3-run2.r2)
	Slot  int
	Pid   int
	Admin string
	Log   string // the slot's log
	// Exit is how the incarnation ended, with Name its worker id (nil: it
	// came up, its /healthz answered).
	Exit *proc.Exit
	// BeforeReady: it ended before its /healthz ever answered. When a Start
	// (the stack's, AddWorker or Worker.Start) was waiting for it, the start
	// fails and the slot is not restarted (Exit.RestartIn is 0).
	BeforeReady bool
}

// String is the event for a terminal: "worker-3-run2.r2 up (pid 42, admin
// 127.0.0.1:8803)", "worker-3-run2.r2 (pid 42) was killed by signal 9
// (killed) after 3s; restarting in 1s", "worker-1-run2 (pid 42) exited
// with code 1 after 12ms before it was ready; see .dev/logs/worker-1.log".
func (e WorkerEvent) String() string {
	if e.Exit == nil {
		return fmt.Sprintf("%s up (pid %d, admin %s)", e.ID, e.Pid, e.Admin)
	}
	if !e.BeforeReady {
		return e.Exit.String()
	}
	x := *e.Exit
	restart := x.RestartIn
	x.RestartIn = 0
	what := x.String() + " before it was ready; see " + e.Log
	if x.Pid == 0 { // could not start: the error says why
		what = x.String()
	}
	if restart > 0 {
		what += fmt.Sprintf("; restarting in %v", restart)
	}
	return what
}

// SetEnv sets extra environment variables (KEY=VALUE) for this slot's next
// incarnations, after the stack's own (so they win); it replaces what an
// earlier SetEnv set. A running process is not affected. The chaos harness
// uses it to give one worker a clock offset.
func (w *Worker) SetEnv(kv ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.env = append([]string(nil), kv...)
}

// ID is the current (or last) incarnation's worker id.
func (w *Worker) ID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ids[len(w.ids)-1]
}

// IDs are the worker ids of every incarnation, oldest first.
func (w *Worker) IDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ids...)
}

// LogPath is the worker's log (stderr).
func (w *Worker) LogPath() string { return w.Proc.LogPath }

// SinkPath is the worker's sink file (stdout JSON lines).
func (w *Worker) SinkPath() string { return w.Proc.StdoutPath }

// AddWorker starts one more worker and waits until its admin server answers.
func (s *Stack) AddWorker(ctx context.Context) (*Worker, error) {
	s.mu.Lock()
	s.added++
	idx := s.added
	s.mu.Unlock()
	port := s.cfg.Ports.AdminBase + idx
	if s.cfg.Ports.AdminBase < 0 {
		p, err := enginetest.FreePort()
		if err != nil {
			return nil, err
		}
		port = p
	} else if err := pickPort(&port, fmt.Sprintf("worker-%d admin", idx)); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("worker-%d", idx)
	w := &Worker{Index: idx, AdminAddr: "127.0.0.1:" + strconv.Itoa(port), stack: s}
	if s.cfg.DynamoProxies {
		p, err := faultnet.StartEndpoint(s.DynamoEndpoint())
		if err != nil {
			return nil, fmt.Errorf("%s dynamodb proxy: %w", name, err)
		}
		w.DynamoProxy = p
	}
	w.Proc = &proc.Proc{
		Name:       name,
		Argv:       []string{s.cfg.Bin.Streamer},
		Dir:        s.cfg.Root,
		LogPath:    filepath.Join(s.LogDir(), name+".log"),
		StdoutPath: filepath.Join(s.LogDir(), name+".sink.jsonl"),
		OnLine:     s.sinks.line,
		NextEnv:    w.nextIncarnation,
		Restart:    s.cfg.RestartWorkers,
		OnExit:     w.onExit,
	}
	s.mu.Lock()
	s.workers = append(s.workers, w)
	s.mu.Unlock()
	if err := w.Start(ctx); err != nil {
		return w, err
	}
	return w, nil
}

// RemoveWorker takes a worker that has exited out of the stack (a
// scale-in): it is not restarted, and Workers no longer lists it. Its logs
// stay where they are.
func (s *Stack) RemoveWorker(w *Worker) error {
	if w.Proc.Running() {
		return fmt.Errorf("remove %s: still running", w.ID())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.workers {
		if x == w {
			s.workers = append(s.workers[:i], s.workers[i+1:]...)
			if w.DynamoProxy != nil {
				w.DynamoProxy.Close()
			}
			return nil
		}
	}
	return fmt.Errorf("remove %s: not a worker of this stack", w.ID())
}

// WorkerID is the worker id of incarnation n (1: the first start) of slot
// slot in run run: worker-<slot>[-<run>][.r<n>] (worker-2-run3.r2; no run
// suffix when run is "", the restart suffix from the second incarnation on).
func WorkerID(slot int, run string, n int) string {
	id := fmt.Sprintf("worker-%d", slot)
	if run != "" {
		id += "-" + run
	}
	if n > 1 {
		id += fmt.Sprintf(".r%d", n)
	}
	return id
}

// nextIncarnation names the next incarnation (every start, by hand or by
// the restart policy) and gives its environment. It runs under the Proc's
// lock, just before the process starts: it also starts the incarnation's
// readiness watch (watch).
func (w *Worker) nextIncarnation() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := WorkerID(w.Index, w.stack.cfg.RunID, len(w.ids)+1)
	w.ids = append(w.ids, id)
	inc := &incarnation{id: id, awaited: w.awaited, ready: make(chan struct{}), ended: make(chan struct{}), prev: w.cur}
	if w.cur != nil {
		w.cur.prev = nil // one back is enough: a report is late by one start at most
	}
	w.awaited = false
	w.cur = inc
	if w.Proc != nil {
		w.stack.watchers.Add(1)
		go w.watch(inc)
	}
	env := w.stack.workerEnv(id, w.AdminAddr)
	if w.DynamoProxy != nil {
		env = append(env, "AWS_ENDPOINT_URL_DYNAMODB="+w.DynamoProxy.URL()) // the last value of a key wins
	}
	return append(env, w.env...)
}

// NotReadyError is a worker incarnation that exited before its /healthz
// ever answered, which fails the start (Worker.Start, AddWorker, Start):
// "worker-1-run2 exited before it was ready (exit status 1); see
// .dev/logs/worker-1.log".
type NotReadyError struct {
	ID  string // the incarnation's worker id
	Err error  // how it ended (the wait error; nil: exit code 0)
	Log string // the slot's log (absolute; a terminal may say it relative)
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("%s exited before it was ready (%v); see %s", e.ID, e.Err, e.Log)
}

func (e *NotReadyError) Unwrap() error { return e.Err }

// Start starts a new incarnation of the worker (it must not be running) and
// waits until its admin /healthz answers. An incarnation that exits before
// that is not restarted (whatever Config.RestartWorkers says): Start
// returns "exited before it was ready".
func (w *Worker) Start(ctx context.Context) error {
	s := w.stack
	w.mu.Lock()
	w.awaited = true
	w.mu.Unlock()
	err := w.Proc.Start()
	pid := w.Proc.Pid()
	w.mu.Lock()
	w.awaited = false
	inc := w.cur
	if err == nil && inc.pid == 0 {
		inc.pid = pid
	}
	w.mu.Unlock()
	if err != nil {
		return err
	}
	t := time.NewTimer(s.cfg.StartTimeout)
	defer t.Stop()
	select {
	case <-inc.ready:
		if s.cfg.OnWorker == nil { // OnWorker got the event
			s.log.Info().Str("worker", inc.id).Int("pid", w.Proc.Pid()).Str("admin", w.AdminAddr).Msg("worker up")
		}
		return nil
	case <-inc.ended:
		w.mu.Lock()
		e := inc.exit
		w.mu.Unlock()
		return &NotReadyError{ID: inc.id, Err: e.Err, Log: w.LogPath()}
	case <-t.C:
		return fmt.Errorf("%s not ready after %v; see %s", inc.id, s.cfg.StartTimeout, w.LogPath())
	case <-ctx.Done():
		return fmt.Errorf("start %s: %w", inc.id, ctx.Err())
	}
}

// watch polls incarnation inc's /healthz until it answers (then reports it
// up), the incarnation ends or the stack shuts down.
func (w *Worker) watch(inc *incarnation) {
	s := w.stack
	defer s.watchers.Done()
	probe := proc.HTTPOK("http://" + w.AdminAddr + "/healthz")
	for {
		// Running takes the Proc's lock: it waits for the start under way.
		if !w.Proc.Running() || w.current() != inc {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := probe(ctx)
		cancel()
		if err == nil {
			pid := w.Proc.Pid()
			w.mu.Lock()
			if w.cur != inc || inc.isEnded {
				w.mu.Unlock()
				return
			}
			inc.isReady = true
			if inc.pid == 0 {
				inc.pid = pid
			}
			close(inc.ready)
			w.mu.Unlock()
			s.workerEvent(WorkerEvent{ID: inc.id, Slot: w.Index, Pid: pid, Admin: w.AdminAddr, Log: w.LogPath()})
			return
		}
		select {
		case <-s.closing:
			return
		case <-inc.ended:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *Worker) current() *incarnation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

// onExit is the Proc's OnExit: it names the exit by the incarnation and
// stops a slot whose awaited incarnation ended before it was ready (so the
// restart policy does not start it again while the start fails).
func (w *Worker) onExit(e proc.Exit) {
	w.mu.Lock()
	inc := w.cur
	if inc != nil && inc.prev != nil && e.Pid != 0 && inc.pid != e.Pid && inc.prev.pid == e.Pid {
		inc = inc.prev // the previous incarnation's exit, reported after the next start
	}
	if inc == nil || inc.isEnded {
		w.mu.Unlock()
		return
	}
	e.Name = inc.id
	before := !inc.isReady
	if before && inc.awaited && !e.Stopped {
		e.RestartIn = 0
	}
	inc.isEnded, inc.exit = true, e
	w.mu.Unlock()
	if before && inc.awaited && !e.Stopped {
		// Not running now: Stop only cancels the restart the policy is
		// about to schedule (report checks for a Stop after OnExit).
		_ = w.Proc.Stop(0)
	}
	close(inc.ended)
	w.stack.workerEvent(WorkerEvent{ID: inc.id, Slot: w.Index, Pid: e.Pid, Admin: w.AdminAddr, Log: w.LogPath(), Exit: &e, BeforeReady: before})
}

// workerEvent hands ev to Config.OnWorker, or its exit to Config.OnExit
// when OnWorker is not set. It runs on the Proc's and the watches'
// goroutines: it does not log (Config.Log need not be safe for concurrent
// use); OnWorker's owner logs what it wants.
func (s *Stack) workerEvent(ev WorkerEvent) {
	switch {
	case s.cfg.OnWorker != nil:
		s.cfg.OnWorker(ev)
	case ev.Exit != nil && s.cfg.OnExit != nil:
		s.cfg.OnExit(*ev.Exit)
	}
}

func (s *Stack) workerEnv(id, admin string) []string {
	ws := s.cfg.Worker
	env := append(s.awsEnv(),
		schema.EnvWorkerID+"="+id,
		schema.EnvTableName+"="+s.cfg.Table,
		schema.EnvQueueURL+"="+s.QueueURL,
		schema.EnvAdminAddr+"="+admin,
		schema.EnvAdminToken+"="+s.AdminToken,
		schema.EnvEnvironment+"=local",
		schema.EnvAllowPrivateIPs+"=loopback", // the local sources listen on 127.0.0.1
		schema.EnvDialsPerHost+"=0",           // and are one host: no per-host dial admission
	)
	if s.Secrets != nil {
		env = append(env, schema.EnvSecretHosts+"="+SecretHosts)
	}
	env = append(env, s.sinkEnv()...)
	dur := func(k string, d time.Duration) {
		if d > 0 {
			env = append(env, k+"="+d.String())
		}
	}
	dur(schema.EnvLeaseTTL, ws.LeaseTTL)
	dur(schema.EnvHeartbeatEvery, ws.HeartbeatEvery)
	dur(schema.EnvCheckpointEvery, ws.CheckpointEvery)
	dur(schema.EnvReconcileEvery, ws.ReconcileEvery)
	dur(schema.EnvSafetyMargin, ws.SafetyMargin)
	dur(schema.EnvShutdownDeadline, ws.ShutdownDeadline)
	dur("WSFLEET_QUEUE_WAIT", ws.QueueWait)
	dur(schema.EnvRebalanceEvery, ws.RebalanceEvery)
	dur(schema.EnvMinHold, ws.MinHold)
	dur(schema.EnvSecretCacheTTL, ws.SecretCacheTTL)
	if ws.MaxSessions > 0 {
		env = append(env, schema.EnvMaxSessions+"="+strconv.Itoa(ws.MaxSessions))
	}
	if ws.LogLevel != "" {
		env = append(env, schema.EnvLogLevel+"="+ws.LogLevel)
	}
	if s.cfg.TenureHeader != "" {
		env = append(env, schema.EnvTenureHeader+"="+s.cfg.TenureHeader)
	}
	if f := s.CAFile(); f != "" {
		env = append(env, schema.EnvExtraCAFile+"="+f)
	}
	for k, v := range ws.Env {
		env = append(env, k+"="+v)
	}
	return env
}

// Kill kills the worker with SIGKILL (a crash) and waits for it to end.
func (w *Worker) Kill(ctx context.Context) error { return w.Proc.Kill(ctx) }

// Term sends SIGTERM (graceful handoff: release + start notification).
func (w *Worker) Term() error { return w.Proc.Term() }

// Pause freezes the worker (SIGSTOP).
func (w *Worker) Pause() error { return w.Proc.Pause() }

// Resume continues a paused worker (SIGCONT).
func (w *Worker) Resume() error { return w.Proc.Resume() }

// Wait waits for the worker's process to end.
func (w *Worker) Wait(ctx context.Context) error { return w.Proc.Wait(ctx) }

// Ready polls the worker's /readyz until it answers 2xx.
func (w *Worker) Ready(ctx context.Context, timeout time.Duration) error {
	return w.Proc.WaitReady(ctx, timeout, proc.HTTPOK("http://"+w.AdminAddr+"/readyz"))
}

// Status returns the worker's /status document (what the worker says of
// itself: for display, never for judging it).
func (w *Worker) Status(ctx context.Context) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.AdminAddr+"/status", nil)
	if err != nil {
		return nil, fmt.Errorf("%s status: %w", w.ID(), err)
	}
	req.Header.Set("Authorization", "Bearer "+w.stack.AdminToken)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s status: %w", w.ID(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%s status: %w", w.ID(), err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s status: HTTP %d", w.ID(), resp.StatusCode)
	}
	return b, nil
}

// FeedRecords fetches the feed's connection records (of session only when
// not "").
func (s *Stack) FeedRecords(ctx context.Context, session string) ([]feed.ConnRecord, error) {
	return s.FeedClient.Records(ctx, session)
}
