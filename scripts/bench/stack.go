// The lease phases' local stack (devstack without its workers): workers
// started per phase, sessions started and stopped through the API, and the
// collector of their stdout sink lines.

package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/wsfleet/wsfleet/scripts/chaos"
	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/proc"
)

// leaseStack is a local stack (devstack: dynalite, fauxqs, the ingest
// front, the demo feed) without devstack's workers: the phases start their
// own, each with its own settings (with or without the SQS consumer), and
// read their stdout sinks through a collector that timestamps every record
// on arrival.
type leaseStack struct {
	r       *runner
	name    string
	st      *devstack.Stack
	col     *collector
	store   *dynamostore.Store // the stack's table, read directly (not through a worker)
	mu      sync.Mutex
	workers []*bworker
	seq     int
	// discardSinks: workers added from now on write their sinks to
	// /dev/null (the cost runs: no collector parsing every message).
	discardSinks bool
	// standby: the feed admits hot standby connections beside an owner's
	// (-allow-standby) and the workers name their tenure in the stack's
	// tenure header (WSFLEET_TENURE_HEADER), by which the feed tells a
	// standby connection from a second owner (startLeaseStackWith).
	standby bool
}

// bworker is one worker process of a lease stack.
type bworker struct {
	ID    string
	Admin string
	Proc  *proc.Proc
}

func (r *runner) startLeaseStack(ctx context.Context, name string, feedRate float64) (*leaseStack, error) {
	return r.startLeaseStackWith(ctx, name, feedRate, false)
}

// startLeaseStackWith is startLeaseStack, with standby: a feed that admits
// hot standby connections and workers that name their tenure to it
// (leaseStack.standby).
func (r *runner) startLeaseStackWith(ctx context.Context, name string, feedRate float64, standby bool) (*leaseStack, error) {
	dir := filepath.Join(r.cfg.WorkDir, name)
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("%s: clean %s: %w", name, dir, err)
	}
	dc := r.leaseStackConfig(dir, feedRate, standby)
	st, err := devstack.Start(ctx, dc)
	if err != nil {
		return nil, fmt.Errorf("%s stack: %w", name, err)
	}
	ddb := localDynamo(st.DynamoEndpoint(), &http.Client{Timeout: 10 * time.Second})
	return &leaseStack{r: r, name: name, st: st, col: newCollector(), store: dynamostore.New(ddb, dc.Table), standby: standby}, nil
}

// leaseStackConfig is the devstack configuration of a lease stack in dir
// (devstack starts no worker: addWorker does, with workerEnv). Its feed
// serves wss:// with a CA made for the stack, as make dev's and chaos's
// do, so the lease phases' figures include the workers' TLS handshakes;
// -plain-ws (Config.PlainWS) serves ws://, as the lease phases ran until
// their workers were given the CA (each phase's report names its
// transport: leaseTransport). The TLS claim path alone is the tls phase's.
// standby: the feed admits hot standby connections (-allow-standby), told
// by the tenure header (leaseStack.standby).
func (r *runner) leaseStackConfig(dir string, feedRate float64, standby bool) devstack.Config {
	dc := devstack.DefaultConfig()
	dc.Root, dc.Dir, dc.InMemory = r.cfg.Root, dir, true
	dc.Bin = devstack.Binaries{Streamer: r.cfg.Bin.Streamer, Ingest: r.cfg.Bin.Ingest, Feed: r.cfg.Bin.Feed, Model: r.cfg.Bin.Model}
	dc.DynamoModel = r.model
	dc.Ports = devstack.Ports{} // free ports: never the ones of a `make dev` running alongside
	dc.Workers = 0              // addWorker starts them, with workerEnv
	dc.Worker = devstack.WorkerSettings{}
	dc.FeedRate = feedRate
	dc.KeepSinkRecords = false
	dc.PlainWS = r.cfg.PlainWS
	dc.Log = r.log
	if standby {
		dc.TenureHeader = devstack.TenureHeader
		dc.FeedArgs = append(dc.FeedArgs, "-allow-standby")
	}
	return dc
}

// leaseTransport is the lease phases' transport setting in the report.
func (r *runner) leaseTransport() string {
	if r.cfg.PlainWS {
		return "ws:// (-plain-ws)"
	}
	return "wss:// (the default): the feed's certificate from a CA made for the run (testkit/tlsca), which the workers trust through " + schema.EnvExtraCAFile + "; TLS session resumption on (the worker's default)"
}

// addWorker starts a worker at the default lease timings (plus settings)
// and waits until /readyz answers. sqs: whether it consumes the work queue
// (without it the worker claims by reconciliation only).
func (ls *leaseStack) addWorker(ctx context.Context, sqs bool, settings map[string]string) (*bworker, error) {
	ls.mu.Lock()
	ls.seq++
	id := fmt.Sprintf("%s-w%d", ls.name, ls.seq)
	ls.mu.Unlock()
	port, err := enginetest.FreePort()
	if err != nil {
		return nil, err
	}
	admin := "127.0.0.1:" + itoa(port)
	w := &bworker{ID: id, Admin: admin, Proc: &proc.Proc{
		Name: id, Argv: []string{ls.r.cfg.Bin.Streamer}, Env: ls.workerEnv(id, admin, sqs, settings), Dir: ls.r.cfg.Root,
		LogPath: filepath.Join(ls.st.LogDir(), id+".log"),
	}}
	if ls.discardSinks {
		w.Proc.DiscardStdout = true
	} else {
		w.Proc.StdoutPath, w.Proc.OnLine = filepath.Join(ls.st.LogDir(), id+".sink.jsonl"), ls.col.line
	}
	if err := w.Proc.Start(); err != nil {
		return nil, err
	}
	ls.mu.Lock()
	ls.workers = append(ls.workers, w)
	ls.mu.Unlock()
	if err := w.Proc.WaitReady(ctx, 30*time.Second, proc.HTTPOK("http://"+admin+"/readyz")); err != nil {
		return nil, err
	}
	return w, nil
}

// addWorkers starts n workers one after the other (addWorker); started,
// when set, reads each right after its start.
func (ls *leaseStack) addWorkers(ctx context.Context, n int, sqs bool, settings map[string]string, started func(*bworker) error) ([]*bworker, error) {
	var ws []*bworker
	for range n {
		w, err := ls.addWorker(ctx, sqs, settings)
		if err != nil {
			return ws, err
		}
		ws = append(ws, w)
		if started != nil {
			if err := started(w); err != nil {
				return ws, err
			}
		}
	}
	return ws, nil
}

// addWorkersAtOnce starts n workers together, as a scale-out's tasks
// start (addWorker each), and returns them once every one is ready, each
// with the instant it was.
func (ls *leaseStack) addWorkersAtOnce(ctx context.Context, n int, sqs bool, settings map[string]string) ([]*bworker, []time.Time, error) {
	ws, ready := make([]*bworker, n), make([]time.Time, n)
	var g errgroup.Group
	for i := range n {
		g.Go(func() error {
			w, err := ls.addWorker(ctx, sqs, settings)
			ws[i], ready[i] = w, time.Now()
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	return ws, ready, nil
}

// sessionIDs are n session ids: pattern with its one %d verb set to
// 0 … n−1.
func sessionIDs(pattern string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf(pattern, i)
	}
	return ids
}

// workerEnv is the environment of a lease-stack worker: the bench's
// (workerEnv), the stack's table, the work queue when sqs, settings, the
// engines' endpoints, and, when the feed serves wss://, the stack's CA
// (WSFLEET_EXTRA_CA_FILE). devstack gives that CA only to the workers it
// starts itself; without it every dial here fails "x509: certificate
// signed by unknown authority" and nothing is delivered. settings may
// override any of it but the engines.
func (ls *leaseStack) workerEnv(id, admin string, sqs bool, settings map[string]string) []string {
	set := map[string]string{
		schema.EnvTableName: ls.st.Config().Table,
		schema.EnvSink:      "stdout",
		schema.EnvLogLevel:  "info",
	}
	if sqs {
		set[schema.EnvQueueURL] = ls.st.QueueURL
	}
	if f := ls.st.CAFile(); f != "" {
		set[schema.EnvExtraCAFile] = f
	}
	if ls.standby {
		set[schema.EnvTenureHeader] = devstack.TenureHeader // the feed's -tenure-header (startLeaseStackWith)
	}
	for k, v := range settings {
		set[k] = v
	}
	return append(workerEnv(id, admin, set), ls.st.EngineEnv()...)
}

// startSessions starts ids through the API (8 at a time) and returns when
// every start was acknowledged.
func (ls *leaseStack) startSessions(ctx context.Context, ids []string) error {
	return eachID(ctx, ids, 8, func(ctx context.Context, id string) error {
		if _, err := ls.st.StartSession(ctx, id); err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
		return nil
	})
}

// startSessionsWith starts ids through the API (8 at a time) with the
// extra start fields of each (devstack.StartSessionWith: a nil value drops
// a default field) and returns when every start was acknowledged.
func (ls *leaseStack) startSessionsWith(ctx context.Context, ids []string, fields func(id string) map[string]any) error {
	return eachID(ctx, ids, 8, func(ctx context.Context, id string) error { return ls.st.StartSessionWith(ctx, id, fields(id)) })
}

// stopSessions stops ids through the API (16 at a time) and returns when
// each stop was acknowledged, with the acknowledgement times.
func (ls *leaseStack) stopSessions(ctx context.Context, ids []string) (map[string]time.Time, error) {
	var mu sync.Mutex
	at := map[string]time.Time{}
	err := eachID(ctx, ids, 16, func(ctx context.Context, id string) error {
		if _, err := ls.st.API.Stop(ctx, id); err != nil {
			return fmt.Errorf("stop %s: %w", id, err)
		}
		mu.Lock()
		at[id] = time.Now()
		mu.Unlock()
		return nil
	})
	return at, err
}

// eachID runs do for every id, limit at a time, until one fails (its
// error is returned).
func eachID(ctx context.Context, ids []string, limit int, do func(ctx context.Context, id string) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for _, id := range ids {
		g.Go(func() error { return do(gctx, id) })
	}
	return g.Wait()
}

// waitOwnedZero polls the workers until none owns a session (or timeout).
func (ls *leaseStack) waitOwnedZero(ctx context.Context, ws []*bworker, timeout time.Duration) error {
	running := func(ctx context.Context, w *bworker) (int, error) {
		if !w.Proc.Running() {
			return 0, nil
		}
		return owned(ctx, w)
	}
	n, err := waitTotal(ctx, ws, running, func(n int) bool { return n == 0 }, 200*time.Millisecond, timeout)
	if errors.Is(err, errWaited) {
		return fmt.Errorf("workers still own %d session(s) after %s", n, timeout)
	}
	return err
}

// eachStats reads every worker's /stats at once (the snapshot spans one
// round trip) and hands each to add, one at a time.
func eachStats(ctx context.Context, ws []*bworker, add func(w *bworker, st workerStats) error) error {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for _, w := range ws {
		g.Go(func() error {
			st, err := getStats(gctx, w.Admin)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			return add(w, st)
		})
	}
	return g.Wait()
}

// errWaited: waitTotal's condition did not hold by its timeout.
var errWaited = errors.New("timed out")

// waitTotal polls the workers every every until the sum of count over
// them satisfies done, for at most timeout (then errWaited); it returns the
// last sum.
func waitTotal(ctx context.Context, ws []*bworker, count func(context.Context, *bworker) (int, error), done func(int) bool, every, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		total := 0
		for _, w := range ws {
			n, err := count(ctx, w)
			if err != nil {
				return total, err
			}
			total += n
		}
		if done(total) {
			return total, nil
		}
		if time.Now().After(deadline) {
			return total, errWaited
		}
		if err := sleepCtx(ctx, every); err != nil {
			return total, err
		}
	}
}

// owned and standbys are a worker's sessions and standbys (waitTotal).
func owned(ctx context.Context, w *bworker) (int, error) {
	st, err := getStats(ctx, w.Admin)
	return st.Owned, err
}

func standbys(ctx context.Context, w *bworker) (int, error) {
	st, err := getStats(ctx, w.Admin)
	return st.Standbys, err
}

// stopWorkers stops ws gracefully (SIGTERM; SIGKILL after 40 s), together.
func stopWorkers(ws []*bworker) error {
	var g errgroup.Group
	for _, w := range ws {
		g.Go(func() error { return w.Proc.Stop(40 * time.Second) })
	}
	return g.Wait()
}

// shutdown stops every worker, then the stack.
func (ls *leaseStack) shutdown() {
	ls.mu.Lock()
	ws := append([]*bworker(nil), ls.workers...)
	ls.mu.Unlock()
	if err := stopWorkers(ws); err != nil {
		ls.r.log.Warn().Err(err).Str("stack", ls.name).Msg("worker shutdown")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := ls.st.Shutdown(ctx); err != nil {
		ls.r.log.Warn().Err(err).Str("stack", ls.name).Msg("stack shutdown")
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, clock.Real{}, d) }

// sinkObs is one sink record as the driver saw it arrive.
type sinkObs struct {
	Seq int64
	// FeedSeq is the feed's own seq in the message's data (0: none): the
	// source's number where the worker numbers the messages (seq_mode
	// none) or resumes nothing.
	FeedSeq int64
	Worker  string
	Epoch   int64
	At      time.Time // when the driver read the line (monotonic)
}

// collector receives the workers' stdout sink lines.
type collector struct {
	mu  sync.Mutex
	all []chaos.Delivery
	obs map[string][]sinkObs
	bad int64
}

func newCollector() *collector { return &collector{obs: map[string][]sinkObs{}} }

func (c *collector) line(b []byte) {
	at := time.Now()
	r, err := devstack.ParseSinkLine(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.bad++
		return
	}
	c.all = append(c.all, chaos.Delivery{Session: r.ConnectionID, Seq: r.Seq, Epoch: r.LeaseEpoch, Worker: r.WorkerID, ReceivedAtMs: r.ReceivedAtMs, AtNs: at.UnixNano(), FeedSeq: int64(r.DataSeq)})
	c.obs[r.ConnectionID] = append(c.obs[r.ConnectionID], sinkObs{Seq: r.Seq, FeedSeq: int64(r.DataSeq), Worker: r.WorkerID, Epoch: r.LeaseEpoch, At: at})
}

// deliveries is a copy of every record so far, stamped on arrival (what
// the chaos checks judge).
func (c *collector) deliveries() []chaos.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]chaos.Delivery(nil), c.all...)
}

// session is a copy of id's observations, in arrival order.
func (c *collector) session(id string) []sinkObs {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sinkObs(nil), c.obs[id]...)
}

// first is the earliest observation of id satisfying ok.
func (c *collector) first(id string, ok func(sinkObs) bool) (sinkObs, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.obs[id] {
		if ok == nil || ok(o) {
			return o, true
		}
	}
	return sinkObs{}, false
}

// waitAll waits until every id has an observation satisfying ok, polling
// (the observation times come from the records, so polling adds no error),
// and returns them; ids still missing at the timeout are left out.
func (c *collector) waitAll(ctx context.Context, ids []string, ok func(sinkObs) bool, timeout time.Duration) (map[string]sinkObs, error) {
	found := map[string]sinkObs{}
	deadline := time.Now().Add(timeout)
	for {
		for _, id := range ids {
			if _, done := found[id]; done {
				continue
			}
			if o, hit := c.first(id, ok); hit {
				found[id] = o
			}
		}
		if len(found) == len(ids) || time.Now().After(deadline) {
			return found, nil
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			return found, err
		}
	}
}

// judgeLease holds a lease phase's evidence to the chaos harness's checks,
// with the workers' default lease timings and the feed at feedRate.
func judgeLease(ev chaos.Evidence, feedRate float64) chaos.Result {
	cfg := chaos.DefaultConfig()
	w := &cfg.Stack.Worker
	cfg.Stack.FeedRate = feedRate
	w.LeaseTTL, w.HeartbeatEvery, w.CheckpointEvery, w.ReconcileEvery = DefaultTTL, DefaultHeartbeatEvery, DefaultCheckpointEvery, DefaultReconcile
	return chaos.Analyze(ev, cfg.Settings(), chaos.Plan{})
}

// violations are j's violations as the report lists them.
func violations(j chaos.Result) []string {
	var out []string
	for _, v := range j.Violations {
		out = append(out, fmt.Sprintf("[%s] %s at %.1f s: %s", v.Check, v.Session, v.T, v.Detail))
	}
	return out
}

// acceptedBySession are the feed's accepted connections (not refused, not
// bad requests) by session.
func acceptedBySession(conns []feed.ConnRecord) map[string][]feed.ConnRecord {
	bySession := map[string][]feed.ConnRecord{}
	for _, c := range conns {
		if c.Reason == feed.ReasonRefused || c.Reason == feed.ReasonBadReq {
			continue
		}
		bySession[c.Session] = append(bySession[c.Session], c)
	}
	return bySession
}
