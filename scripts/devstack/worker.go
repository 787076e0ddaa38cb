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
// incarnation with a new worker id (worker-N, then worker-N.r2, ...): a
// restarted process never reuses its predecessor's lease owner id. Its
// stderr (zerolog JSON) goes to logs/worker-N.log, its stdout sink to
// logs/worker-N.sink.jsonl and to the stack's Sinks.
type Worker struct {
	Index     int
	AdminAddr string // 127.0.0.1:port
	Proc      *proc.Proc
	// DynamoProxy is the slot's own way to DynamoDB (Config.DynamoProxies;
	// nil otherwise): every incarnation of the slot goes through it.
	DynamoProxy *faultnet.Proxy

	stack *Stack

	mu  sync.Mutex
	ids []string
	env []string // SetEnv
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
		p, err := faultnet.StartEndpoint(s.Dynamo.Endpoint())
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
		OnExit:     s.cfg.OnExit,
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

// nextIncarnation names the next incarnation (every start, by hand or by
// the restart policy) and gives its environment.
func (w *Worker) nextIncarnation() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	id := fmt.Sprintf("worker-%d", w.Index)
	if n := len(w.ids); n > 0 {
		id = fmt.Sprintf("worker-%d.r%d", w.Index, n+1)
	}
	w.ids = append(w.ids, id)
	env := w.stack.workerEnv(id, w.AdminAddr)
	if w.DynamoProxy != nil {
		env = append(env, "AWS_ENDPOINT_URL_DYNAMODB="+w.DynamoProxy.URL()) // the last value of a key wins
	}
	return append(env, w.env...)
}

// Start starts a new incarnation of the worker (it must not be running) and
// waits until its admin /healthz answers.
func (w *Worker) Start(ctx context.Context) error {
	s := w.stack
	if err := w.Proc.Start(); err != nil {
		return err
	}
	if err := w.Proc.WaitReady(ctx, s.cfg.StartTimeout, proc.HTTPOK("http://"+w.AdminAddr+"/healthz")); err != nil {
		return err
	}
	s.log.Info().Str("worker", w.ID()).Int("pid", w.Proc.Pid()).Str("admin", w.AdminAddr).Msg("worker up")
	return nil
}

func (s *Stack) workerEnv(id, admin string) []string {
	ws := s.cfg.Worker
	env := append(s.awsEnv(),
		schema.EnvWorkerID+"="+id,
		schema.EnvTableName+"="+s.cfg.Table,
		schema.EnvQueueURL+"="+s.QueueURL,
		schema.EnvAdminAddr+"="+admin,
		schema.EnvEnvironment+"=local",
		schema.EnvAllowPrivateIPs+"=loopback", // the local sources listen on 127.0.0.1
		schema.EnvDialsPerHost+"=0",           // and are one host: no per-host dial admission
	)
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
	if ws.MaxSessions > 0 {
		env = append(env, schema.EnvMaxSessions+"="+strconv.Itoa(ws.MaxSessions))
	}
	if ws.LogLevel != "" {
		env = append(env, schema.EnvLogLevel+"="+ws.LogLevel)
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
