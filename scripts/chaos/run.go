package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"golang.org/x/sync/errgroup"

	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/scripts/sinkfault"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
	"github.com/wsfleet/wsfleet/shared/rebalance"
	"github.com/wsfleet/wsfleet/shared/schema"
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
	newN    int
	offsets map[int]time.Duration // worker slot → its lease clock offset (clock-offset)
	skip    bool                  // sessions start with on_sink_refusal "skip" (the API knows the field)
	removed []*devstack.Worker    // workers a scale-in took out of the stack (their logs are read at the end)
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
		incByID: map[string]*Incarnation{}, started: map[string]bool{}, offsets: map[int]time.Duration{}}
	r.skip = r.set.SinkRefusalSkip
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
	r.ddb = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(r.st.Dynamo.Endpoint()) })
	r.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(r.st.SQS.Endpoint()) })
}

func (r *runner) born(w *devstack.Worker) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	inc := &Incarnation{ID: w.ID(), Slot: w.Index, Pid: w.Proc.Pid(), Started: time.Now(), OffsetMs: ms(r.offsets[w.Index])}
	r.incs = append(r.incs, inc)
	r.incByID[inc.ID] = inc
	return inc.ID
}

func (r *runner) died(id, how string, exit error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	inc := r.incByID[id]
	if inc == nil || !inc.Ended.IsZero() {
		return
	}
	inc.Ended, inc.End, inc.Exit = time.Now(), how, "0"
	if exit != nil {
		inc.Exit = exit.Error()
	}
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

func (r *runner) startedIDs() []string {
	var out []string
	for id, on := range r.started {
		if on {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (r *runner) stoppedIDs() []string {
	var out []string
	for id, on := range r.started {
		if !on {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// pick draws n of ids with the step's own seed.
func pick(s Step, ids []string, n int) []string {
	c := append([]string(nil), ids...)
	sort.Strings(c)
	rng := rand.New(rand.NewPCG(s.Pick, uint64(s.N)))
	rng.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	return c[:min(n, len(c))]
}

// ownedBy lists the STARTED sessions whose latest delivery (within the
// live window) came from worker id: for progress lines and waits only.
func (r *runner) ownedBy(id string) []string {
	var out []string
	for s, w := range r.rec.owners(r.startedIDs(), liveWindow) {
		if w == id {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// waitMoved waits until every session in ids delivered after since from a
// worker other than not ("" = any worker).
func (r *runner) waitMoved(ctx context.Context, ids []string, since time.Time, not string, timeout time.Duration) (bool, error) {
	return r.waitUntil(ctx, timeout, func() bool {
		last := r.rec.lastOf(ids)
		for _, id := range ids {
			if !r.started[id] {
				continue
			}
			d, ok := last[id]
			if !ok || d.AtNs <= since.UnixNano() || (not != "" && d.Worker == not) {
				return false
			}
		}
		return true
	})
}

// waitProgress waits until every session in ids delivered a seq above
// seqs[id].
func (r *runner) waitProgress(ctx context.Context, ids []string, seqs map[string]int64, timeout time.Duration) (bool, error) {
	return r.waitUntil(ctx, timeout, func() bool {
		now := r.rec.maxSeqOf(ids)
		for _, id := range ids {
			if r.started[id] && now[id] <= seqs[id] {
				return false
			}
		}
		return true
	})
}

func okText(ok bool) string {
	if ok {
		return "done"
	}
	return "NOT done (the checks will say)"
}

func (r *runner) apiStart(ctx context.Context, id, op string, fault int) {
	a := Action{Op: op, Session: id, Fault: fault, At: time.Now()}
	if err := r.startSession(ctx, id); err != nil {
		a.Err = err.Error()
		r.say("%s %s: %v", op, id, err)
	} else {
		a.Acked = time.Now()
		r.started[id] = true
	}
	r.actions = append(r.actions, a)
}

// startSession starts id through the API, with on_sink_refusal "skip"
// while the API takes it: the first start that the API refuses for that
// field turns it off for the run (said, and stated in the settings).
func (r *runner) startSession(ctx context.Context, id string) error {
	if !r.skip {
		_, err := r.st.StartSession(ctx, id)
		return err
	}
	err := r.st.StartSessionWith(ctx, id, map[string]any{"on_sink_refusal": "skip"})
	var se *devstack.StartError
	if errors.As(err, &se) && se.Status == http.StatusBadRequest && strings.Contains(se.Body, "on_sink_refusal") {
		r.skip = false
		r.set.SinkRefusalSkip = false
		r.say("the API does not take on_sink_refusal (%s): sessions start without it, and no permanent refusal is injected", se.Body)
		_, err = r.st.StartSession(ctx, id)
	}
	return err
}

func (r *runner) apiStop(ctx context.Context, id string, fault int) {
	a := Action{Op: "stop", Session: id, Fault: fault, At: time.Now(), Epoch: -1}
	if _, err := r.st.API.Stop(ctx, id); err != nil {
		a.Err = err.Error()
		r.say("stop %s: %v", id, err)
	} else {
		a.Acked = time.Now()
		r.started[id] = false
		if s, err := r.st.API.Get(ctx, id); err == nil {
			a.Epoch = s.LeaseEpoch
		}
	}
	r.actions = append(r.actions, a)
}

func (r *runner) newSession() string {
	r.newN++
	return fmt.Sprintf("n-%03d", r.newN)
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

func (r *runner) fault(f Fault) *Fault {
	f.N = len(r.faults) + 1
	if f.End.IsZero() {
		f.End = f.Start
	}
	r.faults = append(r.faults, f)
	return &r.faults[len(r.faults)-1]
}

func (r *runner) slot(n int) *devstack.Worker {
	ws := r.st.Workers()
	return ws[(n-1)%len(ws)]
}

// victim draws, with the step's seed, one of the busiest half of the
// running workers (by the sessions they were delivering a moment ago),
// never one delivering nothing while another delivers: a crash of a worker
// that owns nothing would test nothing.
func (r *runner) victim(s Step) *devstack.Worker {
	ws := r.st.Running()
	n := map[string]int{}
	for _, w := range r.rec.owners(r.startedIDs(), liveWindow) {
		n[w]++
	}
	sort.SliceStable(ws, func(i, j int) bool {
		if a, b := n[ws[i].ID()], n[ws[j].ID()]; a != b {
			return a > b
		}
		return ws[i].Index < ws[j].Index
	})
	top := ws[:max(1, (len(ws)+1)/2)]
	for len(top) > 1 && n[top[len(top)-1].ID()] == 0 {
		top = top[:len(top)-1] // a worker delivering nothing is no victim
	}
	rng := rand.New(rand.NewPCG(s.Pick, 7))
	return top[rng.IntN(len(top))]
}

func (r *runner) bounds() (crash, handoff, claim, outage, reconnect, stop time.Duration) {
	b := r.set.Bounds
	d := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	return d(b.CrashMs), d(b.HandoffMs), d(b.ClaimMs), d(b.OutageMs), d(b.ReconnectMs), d(b.StopMs)
}

func (r *runner) step(ctx context.Context, s Step) error {
	crash, handoff, claim, outage, reconnect, stopB := r.bounds()
	switch s.Kind {
	case KindKill:
		w := r.victim(s)
		id, pid := w.ID(), w.Proc.Pid()
		mine := r.ownedBy(id)
		at := time.Now()
		if err := w.Kill(ctx); err != nil {
			return err
		}
		r.died(id, "kill-9", nil)
		f := r.fault(Fault{Kind: s.Kind, Start: at, Worker: id})
		r.say("#%d kill -9 %s (pid %d), delivering %d session(s)", f.N, id, pid, len(mine))
		ok, err := r.waitMoved(ctx, mine, at, id, crash+3*time.Second)
		if err != nil {
			return err
		}
		r.say("    its sessions delivered by others again: %s after %v", okText(ok), time.Since(at).Round(time.Millisecond))
		nid, err := r.restart(ctx, w)
		f.NewWorker = nid
		return err
	case KindZombie:
		w := r.victim(s)
		id := w.ID()
		mine := r.ownedBy(id)
		at := time.Now()
		if err := w.Pause(); err != nil {
			return err
		}
		r.say("SIGSTOP %s, delivering %d session(s); SIGCONT in %v", id, len(mine), s.Hold.Round(time.Millisecond))
		if err := r.sleep(ctx, s.Hold); err != nil {
			_ = w.Resume()
			return err
		}
		if err := w.Resume(); err != nil {
			return err
		}
		woke := time.Now()
		r.mu.Lock()
		if inc := r.incByID[id]; inc != nil {
			inc.Paused = append(inc.Paused, [2]time.Time{at, woke})
		}
		r.mu.Unlock()
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: woke, Worker: id})
		n := f.N
		ok, err := r.waitMoved(ctx, mine, at, id, max(crash+3*time.Second-time.Since(at), time.Second))
		if err != nil {
			return err
		}
		r.say("#%d SIGCONT %s after %v: its sessions delivered by others: %s", n, id, woke.Sub(at).Round(time.Millisecond), okText(ok))
		nid, err := r.afterDeath(ctx, w, id)
		r.faults[n-1].NewWorker = nid
		return err
	case KindPartition:
		return r.cutOff(ctx, s, nil, cutOffText{
			frozen: "%s cut off from DynamoDB (its proxy frozen; its sources still reachable), delivering %d session(s); thawed in %v",
			thawed: "reaches DynamoDB again",
		}, func() string { return "the worker's DynamoDB proxy frozen, then thawed (held bytes forwarded late)" })
	case KindRolling:
		ws := r.st.Workers()
		for i, w := range ws {
			f, err := r.graceful(ctx, w, s.Kind, handoff)
			if err != nil {
				return err
			}
			f.Note = fmt.Sprintf("%d/%d", i+1, len(ws))
			if err := r.sleep(ctx, 500*time.Millisecond); err != nil {
				return err
			}
		}
	case KindClockOffset:
		w := r.slot(s.Slot)
		w.SetEnv(envClockOffset + "=" + s.Offset.String())
		r.offsets[w.Index] = s.Offset
		f, err := r.graceful(ctx, w, s.Kind, handoff)
		if err != nil {
			return err
		}
		f.OffsetMs = ms(s.Offset)
		r.say("    %s's clock is now %+v off the others' (nothing in the protocol reads it to decide)", f.NewWorker, s.Offset)
	case KindDynamoDown:
		// Frozen, not killed: dynalite maintains its index with separate
		// writes, and a kill between them can leave an item out of the index
		// for good (DynamoDB never does). Frozen, it answers nothing; what
		// the kernel buffered meanwhile is applied when it resumes, late,
		// like a write whose reply was lost.
		at := time.Now()
		if err := r.st.Dynamo.Pause(); err != nil {
			return fmt.Errorf("dynamodb pause: %w", err)
		}
		r.say("DynamoDB frozen (SIGSTOP) for %v", s.Hold)
		if err := r.sleep(ctx, max(s.Hold-time.Since(at), 0)); err != nil {
			_ = r.st.Dynamo.Resume()
			return err
		}
		if err := r.st.Dynamo.Resume(); err != nil {
			return fmt.Errorf("dynamodb resume: %w", err)
		}
		ok, err := r.waitUntil(ctx, 20*time.Second, func() bool {
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := r.ddb.DescribeTable(c, &dynamodb.DescribeTableInput{TableName: aws.String(r.cfg.Stack.Table)})
			return err == nil
		})
		if err != nil || !ok {
			return fmt.Errorf("dynamodb not answering after its restart (%v)", err)
		}
		back := time.Now()
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: back, Note: "dynalite frozen (SIGSTOP), then SIGCONT"})
		ok, err = r.waitMoved(ctx, r.startedIDs(), back, "", outage+3*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d DynamoDB back after %v; every session delivering again: %s after %v", f.N, back.Sub(at).Round(time.Millisecond), okText(ok), time.Since(back).Round(time.Millisecond))
	case KindSQSDown:
		at := time.Now()
		r.st.SQS.Kill()
		n := len(r.faults) + 1
		r.say("SQS down for %v; churn during it: %d start(s), %d stop(s)", s.Hold.Round(time.Millisecond), s.Count, s.Count)
		if err := r.sleep(ctx, s.Hold/3); err != nil {
			return err
		}
		var touched, fresh []string
		for i := 0; i < s.Count; i++ {
			id := r.newSession()
			r.apiStart(ctx, id, "start", n)
			fresh = append(fresh, id)
		}
		if err := r.sleep(ctx, s.Hold/3); err != nil {
			return err
		}
		for _, id := range pick(s, r.startedIDs(), s.Count) {
			r.apiStop(ctx, id, n)
			touched = append(touched, id)
		}
		if err := r.sleep(ctx, max(s.Hold-time.Since(at), 0)); err != nil {
			return err
		}
		if err := r.st.SQS.Start(); err != nil {
			return fmt.Errorf("sqs restart: %w", err)
		}
		qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		qs, err := sqsnotify.CreateQueues(qctx, r.sqs, r.cfg.Stack.Queue, 30, 5)
		cancel()
		if err != nil {
			return fmt.Errorf("recreate queues: %w", err)
		}
		if qs.WorkURL != r.st.QueueURL {
			return fmt.Errorf("recreated work queue %s, the stack uses %s", qs.WorkURL, r.st.QueueURL)
		}
		back := time.Now()
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: back, Sessions: append(fresh, touched...), Note: "fauxqs restarted empty; queues recreated"})
		ok, err := r.waitProgress(ctx, fresh, map[string]int64{}, claim+2*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d SQS back after %v; sessions started during the outage delivering: %s", f.N, back.Sub(at).Round(time.Millisecond), okText(ok))
	case KindSourceDrop:
		sess := pick(s, r.startedIDs(), s.Count)
		seqs := r.rec.maxSeqOf(sess)
		at := time.Now()
		for _, id := range sess {
			if _, err := r.st.FeedClient.Drop(ctx, id, s.Abort); err != nil {
				return err
			}
		}
		how := "with a close frame"
		if s.Abort {
			how = "aborting TCP"
		}
		f := r.fault(Fault{Kind: s.Kind, Start: at, Sessions: sess, Note: how})
		ok, err := r.waitProgress(ctx, sess, seqs, reconnect+2*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d the source dropped %d session(s) %s; delivering again: %s after %v", f.N, len(sess), how, okText(ok), time.Since(at).Round(time.Millisecond))
	case KindRefuse:
		sess := pick(s, r.startedIDs(), s.Count)
		at := time.Now()
		for _, id := range sess {
			if err := r.st.FeedClient.SetRefuse(ctx, id, true); err != nil {
				return err
			}
			if _, err := r.st.FeedClient.Drop(ctx, id, false); err != nil {
				return err
			}
		}
		if err := r.sleep(ctx, s.Hold); err != nil {
			return err
		}
		for _, id := range sess {
			if err := r.st.FeedClient.SetRefuse(ctx, id, false); err != nil {
				return err
			}
		}
		end := time.Now()
		seqs := r.rec.maxSeqOf(sess)
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: end, Sessions: sess})
		ok, err := r.waitProgress(ctx, sess, seqs, reconnect+2*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d the source refused %d session(s) for %v; delivering again: %s after %v", f.N, len(sess), end.Sub(at).Round(time.Millisecond), okText(ok), time.Since(end).Round(time.Millisecond))
	case KindChurn:
		n := len(r.faults) + 1
		at := time.Now()
		stops := pick(s, r.startedIDs(), s.Count)
		for _, id := range stops {
			r.apiStop(ctx, id, n)
		}
		var fresh []string
		for i := 0; i < s.Count; i++ {
			id := r.newSession()
			r.apiStart(ctx, id, "start", n)
			fresh = append(fresh, id)
		}
		if err := r.sleep(ctx, stopB+time.Second); err != nil {
			return err
		}
		restarts := pick(s, r.stoppedIDs(), s.Count)
		seqs := r.rec.maxSeqOf(restarts)
		for _, id := range restarts {
			r.apiStart(ctx, id, "restart", n)
		}
		f := r.fault(Fault{Kind: s.Kind, Start: at, End: time.Now(), Sessions: append(append(append([]string(nil), stops...), fresh...), restarts...)})
		for _, id := range fresh {
			seqs[id] = 0
		}
		ok, err := r.waitProgress(ctx, append(fresh, restarts...), seqs, claim+2*time.Second)
		if err != nil {
			return err
		}
		r.say("#%d churn: stopped %v, started %v, re-started %v; delivering: %s", f.N, stops, fresh, restarts, okText(ok))
	case KindScaleOut:
		return r.scaleOut(ctx, s)
	case KindSinkLatency, KindSinkRefuse, KindSinkFreeze, KindSinkFreezeDynamo, KindSinkRefuseDynamo:
		return r.sinkStep(ctx, s)
	case KindScaleIn:
		ws := r.st.Workers()
		if len(ws) < 3 {
			r.say("scale-in skipped: %d worker(s) running (a fault needs survivors)", len(ws))
			return nil
		}
		// One of the busiest workers leaves (as a victim is drawn): a
		// scale-in of a worker holding nothing would test nothing.
		w := r.victim(s)
		f, err := r.terminate(ctx, w, s.Kind, handoff)
		if err != nil {
			return err
		}
		f.Note = fmt.Sprintf("%d → %d workers", len(ws), len(ws)-1)
		if err := r.st.RemoveWorker(w); err != nil {
			return err
		}
		r.removed = append(r.removed, w)
	default:
		return fmt.Errorf("unknown fault kind %q", s.Kind)
	}
	return nil
}

// scaleOut starts one more worker and waits until every running worker is
// within its tolerance of its fair share (by the sessions each delivered
// last), recording when (Fault.End; the start when never).
func (r *runner) scaleOut(ctx context.Context, s Step) error {
	before := len(r.st.Running())
	at := time.Now()
	w, err := r.st.AddWorker(ctx)
	if err != nil {
		return fmt.Errorf("scale-out: %w", err)
	}
	id := r.born(w)
	if err := w.Ready(ctx, 20*time.Second); err != nil {
		return fmt.Errorf("scale-out %s: %w", id, err)
	}
	f := r.fault(Fault{Kind: s.Kind, Start: at, Worker: id, Note: fmt.Sprintf("%d → %d workers", before, before+1)})
	n := f.N
	bound := time.Duration(r.set.Bounds.BalanceMs) * time.Millisecond
	ok, err := r.waitUntil(ctx, bound+5*time.Second, r.balanced)
	if err != nil {
		return err
	}
	f = &r.faults[n-1]
	if ok {
		f.End = time.Now()
	}
	r.say("#%d scale-out: %s joined; every worker within ±10 %% of its share: %s after %v (%d session(s) now on %s)",
		n, id, okText(ok), time.Since(at).Round(time.Millisecond), len(r.ownedBy(id)), id)
	return nil
}

// balanced reports whether every running worker delivers, within its
// tolerance, its fair share of the started sessions (equal capacities),
// and every started session is delivering.
func (r *runner) balanced() bool {
	ids := r.startedIDs()
	owners := r.rec.owners(ids, liveWindow)
	if len(owners) < len(ids) {
		return false
	}
	load := map[string]int{}
	for _, w := range owners {
		load[w]++
	}
	running := map[string]int{}
	for _, w := range r.st.Running() {
		running[w.ID()] = load[w.ID()]
		delete(load, w.ID())
	}
	return len(load) == 0 && rebalance.Balanced(rebalance.Even(running), rebalance.Settings{})
}

// graceful SIGTERMs w (an ECS deploy's stop), waits for it to exit and for
// its sessions to be delivered by others, then starts the slot again.
func (r *runner) graceful(ctx context.Context, w *devstack.Worker, kind string, handoff time.Duration) (*Fault, error) {
	f, err := r.terminate(ctx, w, kind, handoff)
	if err != nil {
		return nil, err
	}
	nid, err := r.restart(ctx, w)
	f = &r.faults[f.N-1]
	f.NewWorker = nid
	return f, err
}

// terminate SIGTERMs w, waits for it to exit and for its sessions to be
// delivered by others; the slot stays down.
func (r *runner) terminate(ctx context.Context, w *devstack.Worker, kind string, handoff time.Duration) (*Fault, error) {
	id := w.ID()
	mine := r.ownedBy(id)
	at := time.Now()
	if err := w.Term(); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, r.cfg.Stack.Worker.ShutdownDeadline+5*time.Second)
	err := w.Wait(wctx)
	cancel()
	exit := w.Proc.ExitErr()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		_ = w.Kill(ctx)
		exit = fmt.Errorf("did not exit within the shutdown deadline + 5 s: killed")
	}
	exited := time.Since(at)
	r.died(id, "sigterm", exit)
	f := r.fault(Fault{Kind: kind, Start: at, Worker: id})
	ok, err := r.waitMoved(ctx, mine, at, id, handoff+2*time.Second)
	if err != nil {
		return nil, err
	}
	r.say("#%d SIGTERM %s (%s): exited after %v; its %d session(s) delivered by others: %s after %v", f.N, id, kind, exited.Round(time.Millisecond), len(mine), okText(ok), time.Since(at).Round(time.Millisecond))
	return f, nil
}

// afterDeath waits for worker id (slot w), woken or reconnected after its
// watchers declared it dead, to learn it at its next heartbeat and exit on
// its own (non-zero; the judge checks), then starts the slot again (a new
// worker id, as the supervisor would). A worker still running after the
// wait is killed and recorded as such (a violation).
func (r *runner) afterDeath(ctx context.Context, w *devstack.Worker, id string) (string, error) {
	hb := r.cfg.Stack.Worker.HeartbeatEvery
	wctx, cancel := context.WithTimeout(ctx, 2*hb+r.cfg.Stack.Worker.ShutdownDeadline+5*time.Second)
	err := w.Wait(wctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		_ = w.Kill(ctx)
		r.died(id, "alive", errors.New("still running after it was declared dead: killed"))
		r.say("    %s did NOT exit after it was declared dead: killed", id)
	} else {
		r.died(id, "dead", w.Proc.ExitErr())
		r.say("    %s exited on its own (%v)", id, w.Proc.ExitErr())
	}
	return r.restart(ctx, w)
}

// restart starts a new incarnation of slot w and waits until it is ready.
func (r *runner) restart(ctx context.Context, w *devstack.Worker) (string, error) {
	if err := w.Start(ctx); err != nil {
		return "", fmt.Errorf("restart %s: %w", w.Proc.Name, err)
	}
	id := r.born(w)
	if err := w.Ready(ctx, 20*time.Second); err != nil {
		return id, fmt.Errorf("restart %s: %w", id, err)
	}
	return id, nil
}

// ensureSlots restarts a worker that ended without being asked to (the
// checks report it).
func (r *runner) ensureSlots(ctx context.Context) error {
	for _, w := range r.st.Workers() {
		if w.Proc.Running() {
			continue
		}
		id := w.ID()
		r.died(id, "exited", w.Proc.ExitErr())
		r.say("%s EXITED on its own (%v): starting it again", id, w.Proc.ExitErr())
		if _, err := r.restart(ctx, w); err != nil {
			return err
		}
	}
	return nil
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
	settled, err := r.scan(ctx)
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
		Sink: sinkEv,
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

// scan reads the whole sessions table (consistent reads): sessions with
// their checkpoint items, and worker records.
func (r *runner) scan(ctx context.Context) (Snapshot, error) {
	snap := Snapshot{At: time.Now()}
	ckpts := map[string]int64{}
	var start map[string]types.AttributeValue
	for {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		out, err := r.ddb.Scan(c, &dynamodb.ScanInput{TableName: aws.String(r.cfg.Stack.Table), ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
		cancel()
		if err != nil {
			return snap, fmt.Errorf("scan the sessions table: %w", err)
		}
		for _, it := range out.Items {
			pk := attrS(it, schema.AttrPk)
			switch {
			case strings.HasPrefix(pk, schema.CheckpointKeyPrefix):
				if v, ok := attrN(it, schema.AttrLastSeq); ok {
					ckpts[strings.TrimPrefix(pk, schema.CheckpointKeyPrefix)] = v
				}
			case strings.HasPrefix(pk, schema.WorkerKeyPrefix):
				snap.Workers = append(snap.Workers, workerRowOf(it))
			case strings.HasPrefix(pk, schema.NonceKeyPrefix):
			default:
				snap.Rows = append(snap.Rows, rowOf(it))
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	for i := range snap.Rows {
		// Where the next owner resumes: the larger of the checkpoint item's
		// last_seq and the release_seq on the session item (lease.ResumeSeq).
		if v, ok := ckpts[snap.Rows[i].Session]; ok && (snap.Rows[i].LastSeq == nil || v > *snap.Rows[i].LastSeq) {
			snap.Rows[i].LastSeq = &v
		}
	}
	sort.Slice(snap.Rows, func(i, j int) bool { return snap.Rows[i].Session < snap.Rows[j].Session })
	sort.Slice(snap.Workers, func(i, j int) bool { return snap.Workers[i].ID < snap.Workers[j].ID })
	return snap, nil
}

func attrS(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func attrN(it map[string]types.AttributeValue, k string) (int64, bool) {
	if v, ok := it[k].(*types.AttributeValueMemberN); ok {
		n, err := strconv.ParseInt(v.Value, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func rowOf(it map[string]types.AttributeValue) Row {
	row := Row{Session: attrS(it, schema.AttrPk), State: attrS(it, schema.AttrDesiredState), Owner: attrS(it, schema.AttrLeaseOwner)}
	row.Epoch, _ = attrN(it, schema.AttrLeaseEpoch)
	if v, ok := attrN(it, schema.AttrReleaseSeq); ok {
		row.LastSeq = &v
	}
	gen, _ := attrN(it, schema.AttrGeneration)
	if fg, ok := attrN(it, schema.AttrFailedGeneration); ok && fg == gen && row.State == schema.StateStarted {
		row.Failed = true
	}
	return row
}

func workerRowOf(it map[string]types.AttributeValue) WorkerRow {
	w := WorkerRow{ID: strings.TrimPrefix(attrS(it, schema.AttrPk), schema.WorkerKeyPrefix), State: attrS(it, schema.AttrWorkerState),
		List: attrS(it, schema.AttrWorkerList), DeclaredBy: attrS(it, schema.AttrDeclaredBy)}
	w.Epoch, _ = attrN(it, schema.AttrWorkerEpoch)
	w.Seq, _ = attrN(it, schema.AttrHeartbeatSeq)
	return w
}

// cutOffText is what a cut-off fault says when it freezes and thaws.
type cutOffText struct {
	frozen string // format: worker id, its sessions, the hold
	thawed string // "#n <worker> <thawed> after …"
}

// cutOff freezes the victim's DynamoDB proxy (and, with sink, its sink
// requests) for s.Hold while its sessions move to other workers, thaws,
// records the fault (note, read after the thaw) and follows the worker's
// death: the partition and sink+DynamoDB faults.
func (r *runner) cutOff(ctx context.Context, s Step, sink *sinkfault.Proxy, txt cutOffText, note func() string) error {
	w := r.victim(s)
	id := w.ID()
	if w.DynamoProxy == nil {
		return fmt.Errorf("%s has no DynamoDB proxy (Stack.DynamoProxies)", id)
	}
	mine := r.ownedBy(id)
	at := time.Now()
	if sink != nil {
		sink.Freeze(id)
	}
	w.DynamoProxy.Freeze()
	r.say(txt.frozen, id, len(mine), s.Hold.Round(time.Millisecond))
	ok, err := r.waitMoved(ctx, mine, at, id, s.Hold)
	if err == nil {
		err = r.sleep(ctx, max(s.Hold-time.Since(at), 0))
	}
	w.DynamoProxy.Thaw()
	if sink != nil {
		sink.Thaw()
	}
	if err != nil {
		return err
	}
	thawed := time.Now()
	f := r.fault(Fault{Kind: s.Kind, Start: at, End: thawed, Worker: id, Note: note()})
	n := f.N
	r.say("#%d %s %s after %v; its sessions delivered by others meanwhile: %s", n, id, txt.thawed, thawed.Sub(at).Round(time.Millisecond), okText(ok))
	nid, err := r.afterDeath(ctx, w, id)
	r.faults[n-1].NewWorker = nid
	return err
}
