// Package demo is the scripted failover scenario of `make demo` on the local
// stack (package devstack): start sessions on the demo feed, kill -9 one
// worker, SIGTERM another, bring a new one up, stop some sessions, shut the
// workers down gracefully, then judge the run from the feed's and the sinks'
// own records (package evidence) and print a summary. Run returns an error
// when the stack misbehaves and the Result lists every violation; the
// command exits non-zero on either.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/scripts/evidence"
	"github.com/wsfleet/wsfleet/scripts/feed"
)

// Config is a demo run.
type Config struct {
	Stack    devstack.Config
	Sessions int
	Stops    int
	// Steady is how long the stack runs undisturbed before the first fault
	// and between steps.
	Steady time.Duration
	// StepTimeout bounds each wait (claims, recovery, stops).
	StepTimeout time.Duration
	// Out receives progress lines and the summary.
	Out io.Writer
	// JSONPath, when set, receives the Result as JSON.
	JSONPath string
}

// DefaultConfig is `make demo`: 50 sessions, 3 workers, stop 10; lease TTL
// 4 s, renew (and checkpoint) every 1 s, reconcile every 1 s; a feed at
// 5 messages/s per session; its own ports and an in-memory dynalite so that
// it can run beside `make dev`.
func DefaultConfig() Config {
	sc := devstack.DefaultConfig()
	sc.Ports = devstack.Ports{} // free ports
	sc.InMemory = true
	sc.Workers = 3
	sc.Queue = "wsfleet-demo"
	sc.Worker.LeaseTTL = 4 * time.Second
	sc.Worker.RenewEvery = time.Second
	sc.Worker.ReconcileEvery = time.Second
	sc.Worker.MaxSkew = 250 * time.Millisecond
	sc.Worker.SafetyMargin = time.Second
	sc.Worker.ShutdownDeadline = 10 * time.Second
	sc.Worker.QueueWait = time.Second
	sc.FeedRate = 5
	sc.FeedMode = feed.ModeKickOlder
	sc.KeepSinkRecords = true
	return Config{Stack: sc, Sessions: 50, Stops: 10, Steady: 3 * time.Second, StepTimeout: 30 * time.Second, Out: os.Stdout}
}

// ShortConfig is the test's version: 12 sessions, 3 stops, shorter steady
// phases.
func ShortConfig() Config {
	c := DefaultConfig()
	c.Sessions, c.Stops, c.Steady = 12, 3, 2*time.Second
	return c
}

// Validate reports every invalid setting.
func (c Config) Validate() error {
	var errs []error
	if c.Sessions < 1 || c.Sessions > 5000 {
		errs = append(errs, fmt.Errorf("sessions %d: want 1..5000", c.Sessions))
	}
	if c.Stops < 0 || c.Stops > c.Sessions {
		errs = append(errs, fmt.Errorf("stops %d: want 0..sessions", c.Stops))
	}
	if c.Stack.Workers < 3 {
		errs = append(errs, fmt.Errorf("workers %d: the scenario needs at least 3", c.Stack.Workers))
	}
	if c.Stack.Worker.LeaseTTL <= 0 || c.Stack.Worker.RenewEvery <= 0 || c.Stack.Worker.ReconcileEvery <= 0 {
		errs = append(errs, errors.New("the demo states its lease timings: set TTL, renew and reconcile"))
	}
	if c.Steady < 0 || c.StepTimeout <= 0 {
		errs = append(errs, errors.New("steady >= 0 and step timeout > 0"))
	}
	if c.Out == nil {
		errs = append(errs, errors.New("out: nil"))
	}
	return errors.Join(errs...)
}

// Step is one thing the scenario did, with its outcome.
type Step struct {
	At     time.Time     `json:"at"`
	What   string        `json:"what"`
	Worker string        `json:"worker,omitempty"`
	Took   time.Duration `json:"took_ns"`
}

// Result is the run's outcome.
type Result struct {
	Settings   Settings        `json:"settings"`
	Steps      []Step          `json:"steps"`
	Claim      evidence.Stats  `json:"claim"`       // POST → first sink record
	AddedTook  int             `json:"added_took"`  // sessions the added worker delivered for
	LeasesHeld []string        `json:"leases_held"` // leases still held after the graceful shutdown
	Behind     []string        `json:"checkpoint_behind"`
	Report     evidence.Report `json:"report"`
	Violations []string        `json:"violations"`
	Duration   time.Duration   `json:"duration_ns"`
}

// Settings are the run's stated settings.
type Settings struct {
	Sessions        int           `json:"sessions"`
	Workers         int           `json:"workers"`
	Stops           int           `json:"stops"`
	FeedRate        float64       `json:"feed_rate"`
	FeedMode        feed.Mode     `json:"feed_mode"`
	LeaseTTL        time.Duration `json:"lease_ttl_ns"`
	RenewEvery      time.Duration `json:"renew_every_ns"`
	ReconcileEvery  time.Duration `json:"reconcile_every_ns"`
	MaxSkew         time.Duration `json:"max_skew_ns"`
	SafetyMargin    time.Duration `json:"safety_margin_ns"`
	ShutdownTimeout time.Duration `json:"shutdown_deadline_ns"`
}

// OK reports whether the run had no violation.
func (r Result) OK() bool { return len(r.Violations) == 0 }

type runner struct {
	cfg     Config
	st      *devstack.Stack
	res     Result
	started map[string]time.Time
	stopped map[string]time.Time
	faults  []evidence.Fault
	t0      time.Time
}

func (r *runner) say(format string, args ...any) {
	fmt.Fprintf(r.cfg.Out, "[%5.1fs] %s\n", time.Since(r.t0).Seconds(), fmt.Sprintf(format, args...))
}

func (r *runner) step(what, worker string, since time.Time) {
	r.res.Steps = append(r.res.Steps, Step{At: since, What: what, Worker: worker, Took: time.Since(since)})
}

// Run runs the scenario. The stack is always shut down before it returns.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("demo config: %w", err)
	}
	r := &runner{cfg: cfg, started: map[string]time.Time{}, stopped: map[string]time.Time{}, t0: time.Now()}
	w := cfg.Stack.Worker
	r.res.Settings = Settings{
		Sessions: cfg.Sessions, Workers: cfg.Stack.Workers, Stops: cfg.Stops, FeedRate: cfg.Stack.FeedRate, FeedMode: cfg.Stack.FeedMode,
		LeaseTTL: w.LeaseTTL, RenewEvery: w.RenewEvery, ReconcileEvery: w.ReconcileEvery, MaxSkew: w.MaxSkew,
		SafetyMargin: w.SafetyMargin, ShutdownTimeout: w.ShutdownDeadline,
	}
	r.say("starting the stack: %d workers, lease TTL %v, renew/checkpoint every %v, reconcile every %v (logs: %s)",
		cfg.Stack.Workers, w.LeaseTTL, w.RenewEvery, w.ReconcileEvery, filepath.Join(cfg.Stack.Dir, "logs"))
	st, err := devstack.Start(ctx, cfg.Stack)
	if err != nil {
		return r.res, fmt.Errorf("start stack: %w", err)
	}
	r.st = st
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if serr := st.Shutdown(sctx); serr != nil && err == nil {
			r.say("shutdown: %v", serr)
		}
	}()
	if err := r.scenario(ctx); err != nil {
		return r.res, err
	}
	r.res.Duration = time.Since(r.t0)
	if cfg.JSONPath != "" {
		b, _ := json.MarshalIndent(r.res, "", "  ")
		if err := os.WriteFile(cfg.JSONPath, b, 0o644); err != nil {
			return r.res, fmt.Errorf("write result: %w", err)
		}
	}
	PrintSummary(cfg.Out, r.res)
	return r.res, nil
}

func (r *runner) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// waitFor polls cond every 50 ms until it holds or the step timeout passes.
func (r *runner) waitFor(ctx context.Context, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(r.cfg.StepTimeout)
	for {
		ok, detail := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %v: %s", what, r.cfg.StepTimeout, detail)
		}
		if err := r.sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

func sessionID(i int) string { return fmt.Sprintf("demo-%03d", i) }

func (r *runner) scenario(ctx context.Context) error {
	st := r.st
	// 1. Start the sessions.
	t := time.Now()
	for i := 1; i <= r.cfg.Sessions; i++ {
		id := sessionID(i)
		if _, err := st.StartSession(ctx, id); err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
		r.started[id] = time.Now()
	}
	r.say("started %d sessions through the API (%s)", r.cfg.Sessions, st.APIURL())
	if err := r.waitFor(ctx, "every session delivering", func() (bool, string) {
		last := st.Sinks().Last()
		return len(last) >= r.cfg.Sessions, fmt.Sprintf("%d/%d delivering", len(last), r.cfg.Sessions)
	}); err != nil {
		return err
	}
	r.step("all sessions delivering", "", t)
	r.say("all %d sessions delivering at a sink after %v; owners: %s", r.cfg.Sessions, time.Since(t).Round(time.Millisecond), r.owners())
	if err := r.sleep(ctx, r.cfg.Steady); err != nil {
		return err
	}

	// 2. kill -9 the worker owning the most sessions.
	if err := r.fault(ctx, evidence.FaultKill); err != nil {
		return err
	}
	if err := r.sleep(ctx, r.cfg.Steady); err != nil {
		return err
	}
	// 3. SIGTERM the next busiest.
	if err := r.fault(ctx, evidence.FaultTerm); err != nil {
		return err
	}
	// 4. Bring a new worker up.
	t = time.Now()
	nw, err := st.AddWorker(ctx)
	if err != nil {
		return fmt.Errorf("add worker: %w", err)
	}
	if err := nw.Ready(ctx, r.cfg.StepTimeout); err != nil {
		return err
	}
	r.step("new worker ready", nw.ID(), t)
	r.say("new worker %s ready after %v", nw.ID(), time.Since(t).Round(time.Millisecond))
	if err := r.sleep(ctx, r.cfg.Steady); err != nil {
		return err
	}

	// 5. Stop some sessions.
	t = time.Now()
	for i := 1; i <= r.cfg.Stops; i++ {
		id := sessionID(i)
		if _, err := st.API.Stop(ctx, id); err != nil {
			return fmt.Errorf("stop %s: %w", id, err)
		}
		r.stopped[id] = time.Now()
	}
	r.say("stopped %d sessions through the API", r.cfg.Stops)
	if err := r.waitFor(ctx, "stopped sessions closed at the source", func() (bool, string) {
		recs, err := st.FeedRecords(ctx, "")
		if err != nil {
			return false, err.Error()
		}
		open := 0
		for _, c := range recs {
			if _, ok := r.stopped[c.Session]; ok && c.Open() {
				open++
			}
		}
		return open == 0, fmt.Sprintf("%d still open", open)
	}); err != nil {
		return err
	}
	r.step("stopped sessions closed", "", t)
	r.say("every stopped session's connection closed at the source after %v", time.Since(t).Round(time.Millisecond))
	if err := r.sleep(ctx, r.cfg.Steady); err != nil {
		return err
	}

	// 6. Graceful shutdown of every worker, then the evidence.
	t = time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stopErrs []error
	for _, w := range st.Running() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Proc.Stop(r.cfg.Stack.Worker.ShutdownDeadline + 5*time.Second); err != nil {
				mu.Lock()
				stopErrs = append(stopErrs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.step("workers stopped gracefully", "", t)
	r.say("every worker stopped (SIGTERM) after %v", time.Since(t).Round(time.Millisecond))
	return r.judge(ctx, errors.Join(stopErrs...))
}

// owners counts the sessions per worker by their latest sink record.
func (r *runner) owners() string {
	n := map[string]int{}
	for _, rec := range r.st.Sinks().Last() {
		if _, stopped := r.stopped[rec.ConnectionID]; !stopped {
			n[rec.WorkerID]++
		}
	}
	var ks []string
	for k := range n {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	s := ""
	for _, k := range ks {
		s += fmt.Sprintf("%s=%d ", k, n[k])
	}
	return s
}

// busiest is the running worker with the most sessions (by the sinks).
func (r *runner) busiest() *devstack.Worker {
	n := map[string]int{}
	for _, rec := range r.st.Sinks().Last() {
		n[rec.WorkerID]++
	}
	var best *devstack.Worker
	for _, w := range r.st.Running() {
		if best == nil || n[w.ID()] > n[best.ID()] {
			best = w
		}
	}
	return best
}

func (r *runner) fault(ctx context.Context, kind string) error {
	st := r.st
	victim := r.busiest()
	if victim == nil {
		return errors.New("no running worker left")
	}
	id := victim.ID()
	var mine []string
	for s, rec := range st.Sinks().Last() {
		if rec.WorkerID == id {
			mine = append(mine, s)
		}
	}
	at := time.Now()
	switch kind {
	case evidence.FaultKill:
		if err := victim.Kill(ctx); err != nil {
			return err
		}
	case evidence.FaultTerm:
		if err := victim.Term(); err != nil {
			return err
		}
	}
	r.faults = append(r.faults, evidence.Fault{Kind: kind, Worker: id, At: at})
	label := map[string]string{evidence.FaultKill: "kill -9", evidence.FaultTerm: "SIGTERM"}[kind]
	r.say("%s %s (pid %d), which owned %d sessions", label, id, victim.Proc.Pid(), len(mine))
	err := r.waitFor(ctx, label+" "+id+": sessions delivering again from another worker", func() (bool, string) {
		last := st.Sinks().Last()
		left := 0
		for _, s := range mine {
			rec := last[s]
			if rec.WorkerID == id || rec.ReceivedAtMs < at.UnixMilli() {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d/%d not yet recovered", left, len(mine))
	})
	if err != nil {
		return err
	}
	r.step(label+": sessions recovered", id, at)
	r.say("all %d sessions of %s delivering again after %v; owners: %s", len(mine), id, time.Since(at).Round(time.Millisecond), r.owners())
	if kind == evidence.FaultTerm {
		if err := victim.Wait(ctx); err != nil {
			return err
		}
		if e := victim.Proc.ExitErr(); e != nil {
			r.res.Violations = append(r.res.Violations, fmt.Sprintf("%s exited with %v after SIGTERM (want 0)", id, e))
		}
		r.say("%s exited after SIGTERM in %v (exit: %v)", id, time.Since(at).Round(time.Millisecond), errOrZero(victim.Proc.ExitErr()))
	}
	return nil
}

func errOrZero(err error) string {
	if err == nil {
		return "0"
	}
	return err.Error()
}

func (r *runner) judge(ctx context.Context, stopErr error) error {
	st := r.st
	conns, err := st.FeedRecords(ctx, "")
	if err != nil {
		return err
	}
	sinks := st.Sinks().Records()
	rep := evidence.Judge(evidence.Input{
		Conns: conns, Sinks: sinks, Faults: r.faults, Stopped: r.stopped,
		Rate: r.cfg.Stack.FeedRate, CheckpointEvery: r.cfg.Stack.Worker.RenewEvery,
	})
	r.res.Report = rep

	// Claim latency: POST acknowledged → first sink record.
	first := map[string]int64{}
	for _, s := range sinks {
		if v, ok := first[s.ConnectionID]; !ok || s.ReceivedAtMs < v {
			first[s.ConnectionID] = s.ReceivedAtMs
		}
	}
	var claim []float64
	for id, at := range r.started {
		if f, ok := first[id]; ok {
			claim = append(claim, math.Max(0, float64(f-at.UnixMilli())))
		}
	}
	r.res.Claim = evidence.StatsOf(claim)
	if ws := st.Workers(); len(ws) > 0 {
		added := ws[len(ws)-1]
		took := map[string]bool{}
		for _, s := range sinks {
			if s.WorkerID == added.ID() {
				took[s.ConnectionID] = true
			}
		}
		r.res.AddedTook = len(took)
	}

	// After a graceful shutdown of every worker no lease may be held, and
	// every final checkpoint must cover what the sinks accepted.
	maxSeq := map[string]int64{}
	for _, s := range sinks {
		maxSeq[s.ConnectionID] = max(maxSeq[s.ConnectionID], s.Seq)
	}
	sessions, err := st.API.List(ctx, "")
	if err != nil {
		return err
	}
	for _, s := range sessions {
		if s.LeaseExpiresAtMs != 0 {
			r.res.LeasesHeld = append(r.res.LeasesHeld, s.ConnectionID)
		}
		if _, stopped := r.stopped[s.ConnectionID]; !stopped && (s.LastSeq == nil || *s.LastSeq < maxSeq[s.ConnectionID]) {
			r.res.Behind = append(r.res.Behind, fmt.Sprintf("%s (last_seq %s < delivered %d)", s.ConnectionID, seqStr(s.LastSeq), maxSeq[s.ConnectionID]))
		}
	}
	sort.Strings(r.res.LeasesHeld)
	sort.Strings(r.res.Behind)

	v := append(r.res.Violations, rep.Violations...)
	if len(r.res.LeasesHeld) > 0 {
		v = append(v, fmt.Sprintf("%d lease(s) still held after every worker stopped gracefully: %v", len(r.res.LeasesHeld), r.res.LeasesHeld))
	}
	if len(r.res.Behind) > 0 {
		v = append(v, fmt.Sprintf("%d final checkpoint(s) behind the sink: %v", len(r.res.Behind), r.res.Behind))
	}
	if stopErr != nil {
		v = append(v, fmt.Sprintf("graceful shutdown: %v", stopErr))
	}
	for _, w := range st.Workers() {
		if n := w.Proc.Truncated(); n > 0 && w.Proc.Starts() > 0 {
			r.say("note: %s left %d truncated sink line(s) (killed mid-write)", w.ID(), n)
		}
	}
	if n := st.Sinks().BadLines(); n > 0 {
		v = append(v, fmt.Sprintf("%d unparsable line(s) on the workers' stdout", n))
	}
	r.res.Violations = v
	return nil
}

func seqStr(p *int64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}
