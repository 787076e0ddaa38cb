// Run: the stack up, the seeded schedule step by step, the evidence
// collected at the end (the orchestration; the faults: run_faults.go).

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"golang.org/x/sync/errgroup"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// envClockOffset is the streamer's test-only lease clock offset, read only
// by its chaos build (workers/streamer/cmd/streamer/clock_chaos.go, -tags
// chaos: devstack.BuildBinaries and `make chaos` build it); the shipped
// binary refuses it as an unknown variable.
const envClockOffset = "WSFLEET_TEST_CLOCK_OFFSET"

// envReconnectMax caps the streamer's reconnect backoff.
const envReconnectMax = "WSFLEET_RECONNECT_MAX"

type runner struct {
	cfg  Config
	set  Settings
	plan Plan
	st   *devstack.Stack
	rec  *recorder
	t0   time.Time
	ddb  *dynamodb.Client
	sqs  *sqs.Client

	mu      sync.Mutex // incarnations (the final shutdown ends them concurrently)
	incs    []*Incarnation
	incByID map[string]*Incarnation

	faults  []Fault
	actions []Action
	started map[string]bool // the harness's last acknowledged request per session
	planned map[string]bool // sessions started with planned reconnects (plannedSession), by id
	newN    int
	offsets map[int]time.Duration // worker slot → its lease clock offset (clock-offset)
	skip    bool                  // sessions start with on_sink_refusal "skip" (the API knows the field)
	// sources are the sessions' source plans (sourceOf), by id; nStandby
	// and nControl count each group's sessions (their source by turns);
	// standbyOn: standby sessions start with their standby (the API
	// takes the field).
	sources            map[string]sourcePlan
	nStandby, nControl int
	standbyOn          bool
	removed            []*devstack.Worker // workers a scale-in took out of the stack (their logs are read at the end)
}

func (r *runner) say(format string, args ...any) {
	fmt.Fprintf(r.cfg.Out, "[%6.1fs] %s\n", time.Since(r.t0).Seconds(), fmt.Sprintf(format, args...))
}

// Run runs the chaos schedule of cfg on a fresh local stack, judges it and
// writes result.json, report.md and timeline.svg to cfg.OutDir. It returns
// an error only when the harness itself could not do its job; the Result
// lists every violation the run found. The stack is always shut down before
// it returns. Run deletes cfg.Stack.Dir's data/ and logs/ first.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.fill(); err != nil {
		return Result{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("chaos config: %w", err)
	}
	r := &runner{cfg: cfg, set: cfg.Settings(), plan: NewPlan(cfg), rec: newRecorder(), t0: time.Now(),
		incByID: map[string]*Incarnation{}, started: map[string]bool{}, planned: map[string]bool{}, offsets: map[int]time.Duration{},
		sources: map[string]sourcePlan{}}
	r.skip = r.set.SinkRefusalSkip
	r.standbyOn = cfg.StandbyEvery > 0
	for _, sub := range []string{"data", "logs"} {
		if err := os.RemoveAll(filepath.Join(cfg.Stack.Dir, sub)); err != nil {
			return Result{}, fmt.Errorf("clean %s: %w", sub, err)
		}
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return Result{}, fmt.Errorf("out dir: %w", err)
	}
	sc := cfg.Stack
	sc.OnSink = r.rec.onSink
	sc.OnDest = r.rec.onDest
	sc.SinkSeed = uint64(cfg.Seed)
	sc.KeepSinkRecords = false
	if cfg.FeedPingEvery > 0 {
		sc.FeedArgs = append(append([]string(nil), sc.FeedArgs...), "-ping-every", cfg.FeedPingEvery.String(), "-ping-timeout", cfg.FeedPingTimeout.String())
	}
	sc.AllowStandby = cfg.StandbyEvery > 0
	env := map[string]string{envReconnectMax: cfg.ReconnectMax.String()}
	for k, v := range sc.Worker.Env {
		env[k] = v
	}
	sc.Worker.Env = env
	w := sc.Worker
	r.say("%s: %d steps, %d workers, %d sessions; liveness TTL %v, heartbeat %v, checkpoint %v, reconcile %v, margin %v; feed %.0f msg/s, %s, pings every %v; sink %s",
		r.plan.title(), len(r.plan.Steps), sc.Workers, cfg.Sessions, w.LeaseTTL, w.HeartbeatEvery, w.CheckpointEvery, w.ReconcileEvery, w.SafetyMargin, sc.FeedRate, sc.FeedMode, cfg.FeedPingEvery, r.set.Sink)
	fmt.Fprint(cfg.Out, r.plan.String())

	st, err := devstack.Start(ctx, sc)
	if err != nil {
		return Result{}, fmt.Errorf("start stack: %w", err)
	}
	r.st = st
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		defer cancel()
		_ = st.Shutdown(sctx) // idempotent after the final phase's shutdown
	}()
	for _, wk := range st.Workers() {
		r.born(wk)
	}
	r.clients()
	r.say("stack up (logs %s)", st.LogDir())

	stopSampling := make(chan struct{})
	samples := make(chan []PressureSample, 1)
	go sampleCPUPressure(250*time.Millisecond, stopSampling, samples)
	ev, err := r.scenario(ctx)
	close(stopSampling)
	ev.CPUPressure = <-samples
	if err != nil {
		return Result{}, err
	}
	if err := SaveEvidence(filepath.Join(cfg.Stack.Dir, EvidenceFile), Saved{Settings: r.set, Plan: r.plan, Evidence: ev}); err != nil {
		return Result{}, err
	}
	res := Analyze(ev, r.set, r.plan)
	if err := WriteOutputs(cfg.OutDir, res, ev); err != nil {
		return res, err
	}
	r.say("wrote %s, %s, %s", filepath.Join(cfg.OutDir, "result.json"), filepath.Join(cfg.OutDir, "report.md"), filepath.Join(cfg.OutDir, "timeline.svg"))
	return res, nil
}

// fill resolves what Validate needs.
func (c *Config) fill() error {
	if c.Stack.Dir == "" {
		return errors.New("chaos config: Stack.Dir is empty (the harness deletes its data/ and logs/)")
	}
	return nil
}

func (r *runner) clients() {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""), HTTPClient: hc}
	r.ddb = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(r.st.DynamoEndpoint()) })
	r.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(r.st.SQS.Endpoint()) })
}

func (r *runner) sleep(ctx context.Context, d time.Duration) error {
	return clock.Sleep(ctx, clock.Real{}, d)
}

// waitUntil polls cond every 50 ms until it holds (true) or timeout passes.
func (r *runner) waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) (bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		if err := r.sleep(ctx, 50*time.Millisecond); err != nil {
			return false, err
		}
	}
}

// settledScan reads the table for the end-ownership check: again every
// 200 ms while a STARTED session has no owner, until within (a claim's
// bound), and returns the last read. Rebalancing goes on after the
// schedule: a session between its sender's release and its receiver's
// acquire has no owner for a moment, and one read can land in it; a
// session nobody takes stays without an owner past the bound, and the
// check reports it.
func (r *runner) settledScan(ctx context.Context, within time.Duration) (Snapshot, error) {
	deadline := time.Now().Add(within)
	for {
		snap, err := r.scan(ctx)
		if err != nil || !snap.unowned() || time.Now().After(deadline) {
			return snap, err
		}
		if err := r.sleep(ctx, 200*time.Millisecond); err != nil {
			return snap, err
		}
	}
}

func okText(ok bool) string {
	if ok {
		return "done"
	}
	return "NOT done (the checks will say)"
}

func (r *runner) scenario(ctx context.Context) (Evidence, error) {
	cfg := r.cfg
	ids := make([]string, cfg.Sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("s-%03d", i+1)
		r.apiStart(ctx, ids[i], "start", 0)
	}
	ok, err := r.waitProgress(ctx, ids, map[string]int64{}, 30*time.Second)
	if err != nil {
		return Evidence{}, err
	}
	r.say("started %d sessions: every one delivering: %s", len(ids), okText(ok))
	if err := r.sleep(ctx, 2*time.Second); err != nil {
		return Evidence{}, err
	}
	began := time.Now()
	switched := false
	var done []Step
	for _, s := range r.plan.Steps {
		if s.Round > 1 && time.Since(began) >= cfg.Duration {
			break
		}
		if err := r.sleep(ctx, s.Gap); err != nil {
			return Evidence{}, err
		}
		if err := r.step(ctx, s); err != nil {
			return Evidence{}, fmt.Errorf("step %d (%s): %w", s.N, s.Kind, err)
		}
		done = append(done, s)
		if err := r.ensureSlots(ctx); err != nil {
			return Evidence{}, err
		}
		half := s.N == r.plan.PolicyAfter || (cfg.Duration > 0 && time.Since(began) >= cfg.Duration/2)
		if cfg.SwitchPolicy && half && !switched {
			switched = true
			at := time.Now()
			if err := r.st.FeedClient.SetMode(ctx, feed.ModeRefuseNewer); err != nil {
				return Evidence{}, fmt.Errorf("feed policy: %w", err)
			}
			r.faults = append(r.faults, Fault{N: len(r.faults) + 1, Kind: KindPolicy, Start: at, End: at, Note: string(feed.ModeRefuseNewer)})
			r.say("the feed now refuses a newer connection while one is open (refuse-newer)")
		}
	}
	r.plan.Steps = done // the result states what ran
	return r.finish(ctx)
}

// finish settles, reads the table, stops every worker gracefully, reads it
// again and collects the evidence.
func (r *runner) finish(ctx context.Context) (Evidence, error) {
	cfg := r.cfg
	w := cfg.Stack.Worker
	crash, _, _, _, _, _ := r.bounds()
	var lastEnd time.Time
	for _, f := range r.faults {
		if f.End.After(lastEnd) {
			lastEnd = f.End
		}
	}
	ok, err := r.waitUntil(ctx, crash+5*time.Second, func() bool {
		owners := r.rec.owners(r.startedIDs(), liveWindow)
		for _, id := range r.startedIDs() {
			wk := owners[id]
			if wk == "" {
				return false
			}
			r.mu.Lock()
			inc := r.incByID[wk]
			r.mu.Unlock()
			if inc == nil || !inc.Ended.IsZero() {
				return false
			}
		}
		return true
	})
	if err != nil {
		return Evidence{}, err
	}
	if err := r.sleep(ctx, max(time.Until(lastEnd.Add(w.LeaseTTL+w.HeartbeatEvery+time.Second)), 0)); err != nil {
		return Evidence{}, err
	}
	r.say("schedule done; every STARTED session delivering from a live worker: %s", okText(ok))
	settled, err := r.settledScan(ctx, time.Duration(float64(w.ReconcileEvery)*1.2)+time.Second)
	if err != nil {
		return Evidence{}, err
	}

	at := time.Now()
	var g errgroup.Group
	grace := w.ShutdownDeadline + 5*time.Second
	for _, wk := range r.st.Running() {
		g.Go(func() error {
			id := wk.ID()
			err := wk.Proc.Stop(grace)
			exit := wk.Proc.ExitErr()
			if err != nil {
				exit = err
			}
			r.died(id, "shutdown", exit)
			return nil
		})
	}
	_ = g.Wait()
	r.say("every worker stopped (SIGTERM) after %v", time.Since(at).Round(time.Millisecond))
	var sinkEv *SinkEvidence
	dels := r.rec.deliveries()
	if p := r.st.SinkProxy(); p != nil {
		sinkEv = &SinkEvidence{Sink: r.set.Sink}
		if err := r.st.DrainDestination(ctx); err != nil {
			sinkEv.ReaderErr = err.Error()
			r.say("destination reader: %v", err)
		}
		dels = r.rec.deliveries()
		sinkEv.Messages, _ = r.st.DestCounts()
		r.rec.mu.Lock()
		sinkEv.Broken = r.rec.broken
		r.rec.mu.Unlock()
		dels, sinkEv.Stamped, sinkEv.Unstamped = restamp(dels, p.Stamps())
		sinkEv.Proxy = p.Stats()
		for _, k := range p.PermanentlyRefused() {
			sinkEv.Refused = append(sinkEv.Refused, RecordRef{Session: k.Session, Seq: k.Seq, Sub: k.Sub})
		}
		sinkEv.PermanentlyRefused = len(sinkEv.Refused)
		r.say("destination drained: %d message(s), %d stamped by the proxy, %d by the engine; %d not envelopes", sinkEv.Messages, sinkEv.Stamped, sinkEv.Unstamped, sinkEv.Broken)
	}
	final, err := r.scan(ctx)
	if err != nil {
		return Evidence{}, err
	}
	conns, err := r.st.FeedRecords(ctx, "")
	if err != nil {
		return Evidence{}, fmt.Errorf("feed records: %w", err)
	}
	stats, err := r.st.FeedClient.Stats(ctx)
	if err != nil {
		return Evidence{}, fmt.Errorf("feed stats: %w", err)
	}
	end := time.Now()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	if err := r.st.Shutdown(sctx); err != nil {
		r.say("stack shutdown: %v", err)
	}
	ev := Evidence{
		Start: r.t0, End: end, Deliveries: dels, Conns: conns, FeedStats: stats,
		Faults: r.faults, Actions: r.actions, Settled: settled, Final: final, BadLines: r.st.Sinks().BadLines(),
		Sink: sinkEv, Poisoned: r.rec.poisonArrivals(),
	}
	r.mu.Lock()
	for _, inc := range r.incs {
		ev.Incarnations = append(ev.Incarnations, *inc)
	}
	r.mu.Unlock()
	for _, wk := range append(r.st.Workers(), r.removed...) {
		moves, err := readMoves(wk.LogPath())
		if err != nil {
			return Evidence{}, err
		}
		ev.Moves = append(ev.Moves, moves...)
		skips, rels, err := readWorkerLog(wk.LogPath())
		if err != nil {
			return Evidence{}, err
		}
		ev.Skips = append(ev.Skips, skips...)
		ev.Releases = append(ev.Releases, rels...)
		planned, err := readPlanned(wk.LogPath())
		if err != nil {
			return Evidence{}, err
		}
		ev.Planned = append(ev.Planned, planned...)
		ids := map[string]bool{}
		for _, id := range wk.IDs() {
			ids[id] = true
		}
		sf, err := readSinkFile(wk.SinkPath(), wk.Index, ids)
		if err != nil {
			return Evidence{}, err
		}
		sf.Truncated = wk.Proc.Truncated()
		ev.SinkFiles = append(ev.SinkFiles, sf)
	}
	return ev, nil
}
