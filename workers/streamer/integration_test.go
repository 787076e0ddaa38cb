package streamer

// Integration tests: several workers in one process against dynalite and
// fauxqs (started by testkit/enginetest), each test with its own table, work
// queue and test feed, with small lease timings. Bounds asserted are derived
// from the configured timings with generous slack; no latency figure is
// asserted beyond the issue's own ("resumes within 1 s" after SIGTERM).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/faultnet"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/syncbuf"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

func TestMain(m *testing.M) {
	code := enginetest.Main(m, enginetest.Needs{Dynamo: true, SQS: true})
	if code == 0 {
		// Keep-alive connections of the AWS SDK clients to the local engines
		// are pooled by net/http; everything else must have stopped.
		if err := goleak.Find(
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Test timings: TTL 2 s, heartbeat every 200 ms, watchers read every 100 ms, margin 600 ms.
const (
	testTTL       = 2 * time.Second
	testHeartbeat = 200 * time.Millisecond
	testRPC       = time.Second
	feedRate      = 50.0 // messages/s per session
	handoffBound  = time.Second
)

// testAdminToken is every test worker's admin token.
const testAdminToken = "test-admin-token-0123456789"

// adminDo sends a request to a test worker's admin server with the admin
// token.
func adminDo(t testing.TB, method, url string) *http.Response {
	t.Helper()
	return adminDoBody(t, method, url, nil)
}

// adminDoBody is adminDo with a request body.
func adminDoBody(t testing.TB, method, url string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// slack absorbs this shared, loaded 2-core machine (and -race).
const slack = 4 * time.Second

// delivery is one message a worker handed to the sink.
type delivery struct {
	worker string
	seq    int64
	epoch  int64
	at     time.Time
	binary bool
	data   string
}

// recSink records deliveries of every worker of a test, in delivery order.
type recSink struct {
	mu sync.Mutex
	by map[string][]delivery
}

func (r *recSink) Handle(_ context.Context, m sink.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.by[m.ConnectionID] = append(r.by[m.ConnectionID], delivery{worker: m.WorkerID, seq: m.Seq, epoch: m.LeaseEpoch, at: time.Now(),
		binary: m.Binary, data: string(m.Data)})
	return nil
}

func (r *recSink) get(id string) []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.by[id]...)
}

func (r *recSink) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.by[id])
}

// syncBuffer collects the workers' logs (printed when a test fails).
type syncBuffer = syncbuf.Buffer

type env struct {
	t       *testing.T
	db      *dynamodb.Client
	sqsc    *sqs.Client
	table   string
	queue   *sqsnotify.Queue
	workURL string
	// workerQueue and workerDB are what e.worker's workers use: e.queue and
	// e.db unless a test routes them through a faultnet proxy.
	workerQueue WorkQueue
	workerDB    *dynamodb.Client
	// workerLiveDB, when set, is the workers' liveness client
	// (dynamostore.WithLiveness), as production gives them one of their own.
	workerLiveDB *dynamodb.Client
	feed         *feed.Server
	sink         *recSink
	logs         *syncBuffer
	mu           sync.Mutex
	ws           []*testWorker
	nextID       int
	lastLoads    map[string]int // the loads balanced saw last (rebalance tests)
	// handlerFor, when set, gives each new worker its own sink (default:
	// e.sink, shared).
	handlerFor func(workerID string) sink.Handler
	// queueless: new workers get no work queue (they neither consume start
	// notifications nor publish any).
	queueless bool
	// storeFor, when set, wraps each new worker's store (a fault injected
	// into one worker's calls).
	storeFor func(workerID string, st lease.Store) lease.Store
}

type testWorker struct {
	*Worker
	store   *severableStore
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

var uniq struct {
	sync.Mutex
	n int
}

func unique(prefix string) string {
	uniq.Lock()
	defer uniq.Unlock()
	uniq.n++
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000_000, uniq.n)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	enginetest.Require(t)
	t.Parallel()
	return setupEnv(t)
}

// newEnvAlone is newEnv for a test that runs before the parallel ones, not
// alongside them (a heavy one).
func newEnvAlone(t *testing.T) *env {
	t.Helper()
	enginetest.Require(t)
	return setupEnv(t)
}

func setupEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ac, err := awsconfig.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, db: dynamodb.NewFromConfig(ac), sqsc: sqs.NewFromConfig(ac), table: unique("streamer"), sink: &recSink{by: map[string][]delivery{}}, logs: &syncBuffer{}}
	if err := sessionitem.CreateTable(ctx, e.db, e.table); err != nil {
		t.Fatal(err)
	}
	qs, err := sqsnotify.CreateQueues(ctx, e.sqsc, unique("work"), 30, 5)
	if err != nil {
		t.Fatal(err)
	}
	e.queue, e.workURL = sqsnotify.New(e.sqsc, qs.WorkURL, 1), qs.WorkURL
	e.feed = feed.StartForTest(t, feed.Config{Rate: feedRate, Mode: feed.ModeAllow}) // an overlap stays visible
	t.Cleanup(func() {
		e.mu.Lock()
		ws := append([]*testWorker(nil), e.ws...)
		e.mu.Unlock()
		for _, w := range ws {
			w.stop()
		}
		if t.Failed() {
			t.Logf("worker logs:\n%s", e.logs.String())
		}
	})
	return e
}

func testConfig(id string) Config {
	c := DefaultConfig()
	c.WorkerID = id
	c.AllowPrivateIPs = netguard.Loopback // the test sources listen on 127.0.0.1
	c.LeaseTTL, c.HeartbeatEvery, c.SafetyMargin, c.StoreTimeout = testTTL, testHeartbeat, 600*time.Millisecond, testRPC
	c.CheckpointEvery = time.Second
	c.ReconcileEvery = time.Second
	c.ClaimsPerSecond = 100
	c.DialsPerHost = 0 // every test source is 127.0.0.1
	c.DialTimeout = 2 * time.Second
	c.PingEvery, c.PingTimeout = time.Second, 800*time.Millisecond
	c.CloseGrace = 500 * time.Millisecond
	c.ReconnectMin, c.ReconnectMax = 20*time.Millisecond, 500*time.Millisecond
	c.ShutdownDeadline = 5 * time.Second
	c.AdminAddr = "127.0.0.1:0"
	c.AdminToken = testAdminToken // required by every endpoint but the probes, sent by the workers' hand-offs
	c.MetricsEvery = 500 * time.Millisecond
	c.LogLevel = "debug"
	return c
}

// worker starts a worker; mod adjusts its config.
func (e *env) worker(mod func(*Config)) *testWorker {
	e.t.Helper()
	e.mu.Lock()
	e.nextID++
	id := fmt.Sprintf("w%d", e.nextID)
	e.mu.Unlock()
	cfg := testConfig(id)
	if mod != nil {
		mod(&cfg)
	}
	log := logging.New(e.logs, schema.ServiceStreamer, cfg.LogLevel)
	db, queue := e.db, WorkQueue(e.queue)
	if e.workerDB != nil {
		db = e.workerDB
	}
	if e.workerQueue != nil {
		queue = e.workerQueue
	}
	if e.queueless {
		queue = nil
	}
	var opts []dynamostore.Option
	if e.workerLiveDB != nil {
		opts = append(opts, dynamostore.WithLiveness(e.workerLiveDB))
	}
	st := &severableStore{Store: dynamostore.New(db, e.table, opts...)}
	h := sink.Handler(e.sink)
	if e.handlerFor != nil {
		h = e.handlerFor(id)
	}
	var store lease.Store = st
	if e.storeFor != nil {
		store = e.storeFor(id, st)
	}
	w, err := New(cfg, Deps{Store: store, Queue: queue, Handler: h, Logger: &log, Metrics: e.logs})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tw := &testWorker{Worker: w, store: st, cancel: cancel, done: make(chan error, 1)}
	go func() { tw.done <- w.Run(ctx) }()
	e.mu.Lock()
	e.ws = append(e.ws, tw)
	e.mu.Unlock()
	testwait.Eventually(e.t, 5*time.Second, "worker "+id+" running its first reconcile pass", func() bool {
		return w.AdminAddr() != "" && w.recon.Passes() >= 1
	})
	return tw
}

// stop is a graceful shutdown (SIGTERM); it waits for Run to return.
func (w *testWorker) stop() {
	if w.stopped {
		return
	}
	w.stopped = true
	w.cancel()
	<-w.done
}

// kill stops w without releasing anything, like kill -9 (crash).
func (w *testWorker) kill() {
	w.stopped = true
	crash(w.Worker, w.store, w.cancel, w.done)
}

func (w *testWorker) owns(id string) bool {
	for _, s := range w.Status().Sessions {
		if s.ConnectionID == id {
			return true
		}
	}
	return false
}

// owner returns the single worker owning id (nil when none); it fails the
// test when two do.
func (e *env) owner(id string) *testWorker {
	e.mu.Lock()
	defer e.mu.Unlock()
	var found *testWorker
	for _, w := range e.ws {
		if !w.stopped && w.owns(id) {
			if found != nil {
				e.t.Fatalf("%s owned by %s and %s", id, found.ID(), w.ID())
			}
			found = w
		}
	}
	return found
}

// sessionSpec is the spec of the sessions env.session seeds: url, a
// credential header, and resume through the feed's "from" parameter.
func sessionSpec(url string) spec.Spec {
	return spec.Spec{WSURL: url, Headers: map[string]string{"Authorization": "Bearer test"}, Resume: &spec.Resume{QueryParam: "from"}}
}

// session seeds a STARTED session on the feed, as ingest would.
func (e *env) session(mod func(*lease.Item)) string {
	e.t.Helper()
	id := unique("s")
	it := lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
		Spec: spectest.Stored(e.t, sessionSpec(e.feed.URL(id)+"?token=secret"))}
	if mod != nil {
		mod(&it)
	}
	if err := dynamostore.Seed(context.Background(), e.db, e.table, it); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.checkOneConnection(id) })
	return id
}

// streaming starts n sessions (a start notification each) and waits until
// every one has at least msgs messages at the sink.
func (e *env) streaming(n, msgs int) []string {
	e.t.Helper()
	var ids []string
	for range n {
		id := e.session(nil)
		e.notify(schema.NotifyStart, id)
		ids = append(ids, id)
	}
	testwait.Eventually(e.t, 10*time.Second, fmt.Sprintf("%d messages on each of %d sessions", msgs, n), func() bool {
		for _, id := range ids {
			if e.sink.count(id) < msgs {
				return false
			}
		}
		return true
	})
	return ids
}

func (e *env) notify(typ, id string) {
	e.t.Helper()
	if err := e.queue.Publish(context.Background(), notify.Notification{Type: typ, ConnectionID: id, Generation: 1, SentAtMs: time.Now().UnixMilli()}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) update(id, expr string, names map[string]string, values map[string]types.AttributeValue) {
	e.t.Helper()
	e.updateKey(id, expr, names, values)
}

// reconcileBound is how long a reconcile pass may take to come (every
// ReconcileEvery ±20 %) plus slack.
func (e *env) reconcileBound() time.Duration {
	return testConfig("x").ReconcileEvery*6/5 + slack
}

// lostStartBound is how long a start whose notification was lost may wait
// for its claim by reconciliation: the first pass that lists it leaves it
// to the work queue's fast path (claim.FastPathGrace), the next one claims
// it (docs/worker.md, Reconciliation: two passes of ReconcileEvery +20 %),
// plus slack.
func (e *env) lostStartBound() time.Duration {
	return 2*testConfig("x").ReconcileEvery*6/5 + slack
}

// stop is ingest's stop: STOPPED, out of by_unowned, and the owner's
// mailbox and the hot standby's worker's.
func (e *env) stop(id string) {
	e.t.Helper()
	e.update(id, "SET #ds = :s, #sh = :sh REMOVE #u", map[string]string{"#ds": schema.AttrDesiredState, "#sh": schema.AttrIndexShard, "#u": schema.AttrUnownedShard},
		map[string]types.AttributeValue{":s": str(schema.StateStopped), ":sh": str(schema.IndexShardFor(schema.StateStopped, id))})
	e.mail(id)
	e.mailTo(e.item(id).Standby, id)
}

// mail puts id in its owner's mailbox, as ingest does after a stop or a new
// generation of an owned session.
func (e *env) mail(id string) {
	e.t.Helper()
	e.mailTo(e.item(id).Owner, id)
}

// mailTo puts id in worker's mailbox (nothing when worker is "").
func (e *env) mailTo(worker, id string) {
	e.t.Helper()
	if worker == "" {
		return
	}
	in, err := sessionitem.MailboxAdd(e.table, worker, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.db.UpdateItem(context.Background(), in); err != nil {
		e.t.Fatalf("mailbox of %s: %v", worker, err)
	}
}

// updateKey runs an update on the item with key pk.
func (e *env) updateKey(id, expr string, names map[string]string, values map[string]types.AttributeValue) {
	e.t.Helper()
	_, err := e.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &e.table, Key: map[string]types.AttributeValue{schema.AttrPk: &types.AttributeValueMemberS{Value: id}},
		UpdateExpression: &expr, ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) item(id string) lease.Item {
	e.t.Helper()
	it, err := dynamostore.New(e.db, e.table).Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return it
}

// ended waits until the feed saw connection i of id end (its close status
// is then final) and returns its record.
func (e *env) ended(id string, i int) feed.ConnRecord {
	e.t.Helper()
	testwait.Eventually(e.t, 2*time.Second, "the feed sees the connection end", func() bool {
		c := e.feed.Records(id)
		return len(c) > i && !c[i].EndedAt.IsZero()
	})
	return e.feed.Records(id)[i]
}

// checkOneConnection: the feed never saw two open connections of id.
func (e *env) checkOneConnection(id string) {
	e.t.Helper()
	if v := e.feed.Session(id).Violations; v != 0 {
		e.t.Errorf("%s: %d connections opened while another was open", id, v)
	}
	if err := feed.NoOverlap(e.feed.Records(id)); err != nil {
		e.t.Error(err)
	}
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// contiguous fails unless seqs increase by exactly one each time.
func contiguous(t *testing.T, ds []delivery) {
	t.Helper()
	for i := 1; i < len(ds); i++ {
		if ds[i].seq != ds[i-1].seq+1 {
			t.Fatalf("seq %d (%s) follows %d (%s): gap or duplicate", ds[i].seq, ds[i].worker, ds[i-1].seq, ds[i-1].worker)
		}
	}
}

func byWorker(ds []delivery, w string) []delivery {
	var out []delivery
	for _, d := range ds {
		if d.worker == w {
			out = append(out, d)
		}
	}
	return out
}

func TestClaimViaSQS(t *testing.T) {
	e := newEnv(t)
	// Reconciliation is out of the way: its first pass ran before the
	// session existed and the next is a minute away.
	for i := 0; i < 3; i++ {
		e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	}
	id := e.session(nil)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "messages after the start notification", func() bool { return e.sink.count(id) >= 10 })
	w := e.owner(id)
	if w == nil {
		t.Fatal("no owner")
	}
	ds := e.sink.get(id)
	contiguous(t, ds)
	for _, d := range ds {
		if d.worker != w.ID() || d.epoch != 1 {
			t.Fatalf("delivery by %s epoch %d, owner %s epoch 1", d.worker, d.epoch, w.ID())
		}
	}
	if h := e.feed.Records(id)[0].Header.Get("Authorization"); h != "Bearer test" {
		t.Fatalf("stored header not sent: %q", h)
	}
}

func TestClaimViaReconciliationWhenTheNotificationIsLost(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 2; i++ {
		e.worker(nil)
	}
	id := e.session(nil) // no notification
	testwait.Eventually(t, e.lostStartBound(), "a claim by reconciliation", func() bool { return e.sink.count(id) >= 1 })
	if e.owner(id) == nil {
		t.Fatal("no owner")
	}
	contiguous(t, e.sink.get(id))
}

func TestCrashFailoverResumesFromTheCheckpoint(t *testing.T) {
	e := newEnv(t)
	a := e.worker(nil)
	id := e.session(nil)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "a's messages", func() bool { return e.sink.count(id) >= 1 })
	b := e.worker(nil) // b starts after a owns the session
	testwait.Holds(t, 3*testHeartbeat, "a keeps the session while b runs", func() bool { return e.owner(id) == a })
	// a's checkpoint (every second while messages flow) is on the table.
	testwait.Eventually(t, 2*time.Second+slack, "a's first checkpoint", func() bool { return e.item(id).LastSeq != lease.NoSeq })
	crashed := time.Now()
	a.kill()
	ckpt := e.item(id).LastSeq // the dead worker's last checkpoint
	lastA := byWorker(e.sink.get(id), a.ID())
	testwait.Eventually(t, testTTL+testHeartbeat/2+slack, "b's messages after the crash", func() bool {
		return len(byWorker(e.sink.get(id), b.ID())) >= 20
	})
	ds := e.sink.get(id)
	fromB := byWorker(ds, b.ID())
	aLast := lastA[len(lastA)-1].seq
	// No gap: b resumes exactly after the checkpoint, at or before a's last + 1.
	if ckpt == lease.NoSeq || fromB[0].seq != ckpt+1 {
		t.Fatalf("b started at %d, checkpoint %d", fromB[0].seq, ckpt)
	}
	contiguous(t, fromB)
	contiguous(t, byWorker(ds, a.ID()))
	// The only repeats are the seqs after the checkpoint, and their number is
	// bounded by what a delivers between two checkpoints: rate ×
	// (CheckpointEvery + Tick + one store call).
	repeats := aLast - ckpt
	bound := int64(feedRate*(testConfig("x").CheckpointEvery.Seconds()+0.05+testRPC.Seconds())) + 2
	if repeats < 0 || repeats > bound {
		t.Fatalf("%d repeats (a delivered up to %d, checkpoint %d), bound %d", repeats, aLast, ckpt, bound)
	}
	// b took over once it declared a dead: within TTL + its read interval + slack.
	if fromB[0].epoch <= lastA[0].epoch {
		t.Fatalf("b's epoch %d not above a's %d", fromB[0].epoch, lastA[0].epoch)
	}
	if took := fromB[0].at.Sub(crashed); took > testTTL+testHeartbeat/2+slack {
		t.Fatalf("b resumed %s after the crash", took)
	}
	t.Logf("crash failover: checkpoint %d, a's last %d, %d repeats (bound %d), b's first message %s after the crash",
		ckpt, aLast, repeats, bound, fromB[0].at.Sub(crashed).Round(time.Millisecond))
}

func TestGracefulHandoffHasNoGapAndNoDuplicate(t *testing.T) {
	e := newEnv(t)
	a := e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	id := e.session(nil)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "a's messages", func() bool { return e.sink.count(id) >= 20 })
	// b cannot be told to claim (it advertises an admin address nobody
	// listens on), and reconciles only every minute: only the start
	// notification a sends when b will not take it (released for anyone:
	// b's own consumer takes it) can move it in time.
	b := e.worker(func(c *Config) { c.ReconcileEvery, c.AdvertiseAddr = time.Minute, "127.0.0.1:1" })
	sigterm := time.Now()
	a.stop()
	testwait.Eventually(t, handoffBound+slack, "b's messages", func() bool { return len(byWorker(e.sink.get(id), b.ID())) >= 20 })
	ds := e.sink.get(id)
	contiguous(t, ds) // no gap, no duplicate across the hand-off
	fromB := byWorker(ds, b.ID())
	gap := fromB[0].at.Sub(sigterm)
	if gap > handoffBound {
		t.Fatalf("b's first message %s after SIGTERM, want within %s", gap, handoffBound)
	}
	if it := e.item(id); it.Owner != b.ID() || it.Epoch != 2 {
		t.Fatalf("item owner %s epoch %d", it.Owner, it.Epoch)
	}
	if code := e.ended(id, 0).ClientCode; code != int(websocket.StatusGoingAway) {
		t.Fatalf("a closed with %d, want 1001", code)
	}
	if !strings.Contains(e.logs.String(), "hand-off: the receiver will not take it (released for anyone, a start notification)") {
		t.Fatal("a did not fall back to a start notification when nobody listened at b's address")
	}
	t.Logf("graceful hand-off: b's first message %s after SIGTERM", gap.Round(time.Millisecond))
}

// TestShutdownHandsSessionsToReceivers: a SIGTERMed worker spreads its
// sessions over the others by their room (rebalance.Drain) and tells each
// receiver to claim its part at once (POST /handoff): the receivers here
// consume no work queue and reconcile only every minute, so only that can
// move the sessions; none is lost or repeated.
//
// The hand-offs are paced (WSFLEET_SHUTDOWN_IN_FLIGHT, 2 here): the k-th
// session to close at the source closes only after k−2 others were
// flushed (and released), so the rest kept streaming meanwhile.
func TestShutdownHandsSessionsToReceivers(t *testing.T) {
	e := newEnv(t)
	flushes := &flushClock{}
	e.handlerFor = func(id string) sink.Handler {
		if id == "w1" {
			return &flushClock{Handler: e.sink, times: flushes}
		}
		return e.sink
	}
	a := e.worker(func(c *Config) { c.ReconcileEvery, c.ShutdownInFlight = time.Minute, 2 })
	ids := e.streaming(6, 10)
	e.queueless = true
	b, c := e.worker(quietReceiver), e.worker(quietReceiver)
	// a reads the receivers' records (admin address, load) at its shutdown:
	// they are there once both have heartbeaten.
	a.stop()
	testwait.Eventually(t, 10*time.Second, "every session delivering from b or c", func() bool {
		for _, id := range ids {
			if len(byWorker(e.sink.get(id), b.ID()))+len(byWorker(e.sink.get(id), c.ID())) < 10 {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		contiguous(t, e.sink.get(id)) // no gap, no repeat across the hand-off
		if code := e.ended(id, 0).ClientCode; code != int(websocket.StatusGoingAway) {
			t.Fatalf("a closed %s with %d, want 1001", id, code)
		}
	}
	// The plan splits them by room. (Who took each may differ: a receiver
	// whose heartbeat is a little overdue on a loaded machine refuses,
	// and the session goes to the other.)
	if plan := shutdownPlan(t, e, a.ID()); plan[b.ID()] != 3 || plan[c.ID()] != 3 {
		t.Fatalf("shutdown plan %v, want 3 each for %s and %s", plan, b.ID(), c.ID())
	}
	if n := strings.Count(e.logs.String(), `"to":"`+b.ID()+`"`) + strings.Count(e.logs.String(), `"to":"`+c.ID()+`"`); n < len(ids) {
		t.Fatalf("a logged %d directed hand-offs, want %d", n, len(ids))
	}
	var closed []time.Time
	for _, id := range ids {
		closed = append(closed, e.ended(id, 0).ClosedAt)
	}
	slices.SortFunc(closed, time.Time.Compare)
	flushed := flushes.sorted()
	if len(flushed) < len(ids) {
		t.Fatalf("a flushed %d times, want %d", len(flushed), len(ids))
	}
	for k := 2; k < len(closed); k++ {
		if closed[k].Before(flushed[k-2]) {
			t.Fatalf("session %d closed at the source %s before %d hand-offs were flushed (%s): more than 2 at once",
				k+1, closed[k].Format("15:04:05.000000"), k-1, flushed[k-2].Format("15:04:05.000000"))
		}
	}
}

// quietReceiver configures a receiver of the shutdown tests: it reconciles
// once a minute (only a directed hand-off gives it sessions in time), and
// heartbeats every 400 ms, the longest the test TTL allows, not 200: a
// receiver whose last heartbeat that succeeded was sent more than 1.5
// periods ago refuses a given tenure (lease.Keeper.HeartbeatCurrent): at
// 200 ms a heartbeat slower than 100 ms does it, which a loaded machine
// sees (CI once; a run beside busy loops in most tries), and a session
// both receivers refuse is left to a reconcile pass a minute away.
func quietReceiver(c *Config) {
	c.ReconcileEvery, c.HeartbeatEvery = time.Minute, 400*time.Millisecond
}

// shutdownPlan is the plan worker id logged at its shutdown: sessions per
// receiver.
func shutdownPlan(t *testing.T, e *env, id string) map[string]int {
	t.Helper()
	for line := range strings.SplitSeq(e.logs.String(), "\n") {
		var l struct {
			Worker  string         `json:"worker_id"`
			Message string         `json:"message"`
			Plan    map[string]int `json:"plan"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Worker == id && l.Message == "shutting down: handing sessions off" {
			return l.Plan
		}
	}
	t.Fatalf("%s logged no shutdown plan", id)
	return nil
}

// A session whose receiver will not take it at the shutdown (here nobody
// listens at c's advertised address) is offered to another receiver of
// the plan, not released for anyone: the receivers have no work queue and
// reconcile once a minute, so only that offer can move c's part in time.
func TestShutdownOffersARefusedSessionToAnotherReceiver(t *testing.T) {
	e := newEnv(t)
	a := e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	ids := e.streaming(4, 5)
	e.queueless = true
	b := e.worker(quietReceiver)
	c := e.worker(func(c *Config) { quietReceiver(c); c.AdvertiseAddr = "127.0.0.1:1" })
	a.stop()
	if plan := shutdownPlan(t, e, a.ID()); plan[b.ID()] != 2 || plan[c.ID()] != 2 {
		t.Fatalf("shutdown plan %v, want 2 each for %s and %s", plan, b.ID(), c.ID())
	}
	testwait.Eventually(t, 10*time.Second, "every session delivering from b", func() bool {
		for _, id := range ids {
			if len(byWorker(e.sink.get(id), b.ID())) < 5 {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		contiguous(t, e.sink.get(id))
		if it := e.item(id); it.Owner != b.ID() || it.Epoch != 2 {
			t.Fatalf("%s: owner %s epoch %d, want %s at 2 (given, no release between)", id, it.Owner, it.Epoch, b.ID())
		}
	}
	if n := strings.Count(e.logs.String(), "(offered to another)"); n != 2 {
		t.Fatalf("%d sessions offered to another receiver, want c's 2", n)
	}
}

// A worker that declares another dead spreads its sessions over the fleet
// instead of claiming them all: the receivers have no work queue and
// reconcile only once a minute, so only the direct path (POST /handoff with
// the dead tenure) can give them their part.
func TestTakeoverHandsSessionsToReceivers(t *testing.T) {
	e := newEnv(t)
	a := e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	ids := e.streaming(6, 5)
	e.queueless = true
	quiet := func(c *Config) { c.ReconcileEvery = time.Minute }
	b, c := e.worker(quiet), e.worker(quiet)
	a.kill()
	testwait.Eventually(t, testTTL+testHeartbeat+10*time.Second, "every session delivering from b or c", func() bool {
		for _, id := range ids {
			if len(byWorker(e.sink.get(id), b.ID()))+len(byWorker(e.sink.get(id), c.ID())) < 5 {
				return false
			}
		}
		return true
	})
	owned := map[string]int{}
	for _, id := range ids {
		owned[e.item(id).Owner]++
	}
	if owned[b.ID()] != 3 || owned[c.ID()] != 3 {
		t.Fatalf("owners after the takeover: %v, want 3 each for %s and %s", owned, b.ID(), c.ID())
	}
	if !strings.Contains(e.logs.String(), `"message":"taking over: handing sessions to receivers"`) {
		t.Fatal("no takeover logged")
	}
}

// POST /handoff names the field it refuses, and a takeover it is asked for
// is done only when the receiver itself reads the previous owner as not
// alive: a peer's word (or anyone's who reaches the admin port) cannot move
// a live worker's session.
func TestHandoffEndpointChecksItsInputAndTheDeadOwner(t *testing.T) {
	e := newEnv(t)
	a := e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	id := e.session(nil)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "a's messages", func() bool { return e.sink.count(id) >= 3 })
	e.queueless = true
	b := e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	post := func(q string) (int, string) {
		res := adminDo(t, http.MethodPost, "http://"+b.AdminAddr()+"/handoff?"+q)
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	for _, c := range []struct{ q, field string }{
		{"connection_id=", "connection_id"},
		{"connection_id=" + id + "&prev_epoch=2", "prev_owner"},
		{"connection_id=" + id + "&prev_owner=" + a.ID() + "&prev_epoch=x", "prev_epoch"},
		{"connection_id=" + id + "&prev_owner=" + a.ID() + "&prev_epoch=0", "prev_epoch"},
	} {
		if code, body := post(c.q); code != http.StatusBadRequest || !strings.Contains(body, c.field) {
			t.Errorf("POST /handoff?%s: %d %s, want 400 naming %s", c.q, code, body, c.field)
		}
	}
	it := e.item(id)
	if b.partsFlowing(time.Minute) {
		t.Fatal("no takeover's part told yet, and b says parts flow")
	}
	if code, body := post(fmt.Sprintf("connection_id=%s&prev_owner=%s&prev_epoch=%d", id, it.Owner, it.Epoch)); code != http.StatusAccepted {
		t.Fatalf("a takeover request: %d %s, want 202 (the claim is checked in the background)", code, body)
	}
	// A takeover's part told holds the gone workers' grace
	// (lease.Config.Announcing), as an announced tenure does.
	if !b.partsFlowing(time.Minute) {
		t.Fatal("a takeover's part told, and b says no parts flow")
	}
	testwait.Holds(t, 3*testHeartbeat, "a keeps its session: it is alive", func() bool {
		cur := e.item(id)
		return cur.Owner == a.ID() && cur.Epoch == it.Epoch
	})
	// A given tenure is named in the body, with its secret: a bad body is
	// refused naming the field, and a live tenure named without the secret
	// only its owner holds is not taken (409, the owner keeps it).
	give := func(body string) (int, string) {
		res := adminDoBody(t, http.MethodPost, "http://"+b.AdminAddr()+"/handoff?given=1&connection_id="+id, strings.NewReader(body))
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(out)
	}
	for _, c := range []struct{ body, field string }{
		{`{"owner":"w1","epoch":1,"seq":3,"secret":"s","extra":1}`, "body"},
		{`{"epoch":1,"seq":3,"secret":"s"}`, "owner"},
		{`{"owner":"w1","epoch":0,"seq":3,"secret":"s"}`, "epoch"},
		{`{"owner":"w1","epoch":1,"seq":-2,"secret":"s"}`, "seq"},
		{`{"owner":"w1","epoch":1,"seq":3}`, "secret"},
	} {
		if code, body := give(c.body); code != http.StatusBadRequest || !strings.Contains(body, c.field) {
			t.Errorf("POST /handoff?given=1 %s: %d %s, want 400 naming %s", c.body, code, body, c.field)
		}
	}
	forged := fmt.Sprintf(`{"owner":%q,"epoch":%d,"seq":3,"secret":"a guess"}`, it.Owner, it.Epoch)
	if code, body := give(forged); code != http.StatusConflict {
		t.Fatalf("a live tenure given without its secret: %d %s, want 409", code, body)
	}
	if cur := e.item(id); cur.Owner != a.ID() || cur.Epoch != it.Epoch {
		t.Fatalf("a forged given tenure moved the session: %+v", cur)
	}
}

// A directed hand-off is paced by its sender, so its receiver does not make
// it wait for the claims-per-second bucket: a receiver admitting one claim
// every 20 s still takes 6 hand-offs at once.
func TestDirectedHandoffsSkipTheClaimRate(t *testing.T) {
	e := newEnv(t)
	a := e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	ids := e.streaming(6, 3)
	e.queueless = true
	b := e.worker(func(c *Config) { c.ReconcileEvery, c.ClaimsPerSecond = time.Minute, 0.05 })
	a.stop()
	testwait.Eventually(t, 10*time.Second, "every session delivering from b (the bucket would admit 1 in the first 20 s)", func() bool {
		for _, id := range ids {
			if len(byWorker(e.sink.get(id), b.ID())) < 1 {
				return false
			}
		}
		return true
	})
}

// flushClock is a sink that records when it is flushed (the worker flushes
// before each release).
type flushClock struct {
	sink.Handler
	mu    sync.Mutex
	at    []time.Time
	times *flushClock // where the times go (shared by a worker's handlers)
}

func (f *flushClock) Flush(ctx context.Context) error {
	f.times.mu.Lock()
	f.times.at = append(f.times.at, time.Now())
	f.times.mu.Unlock()
	return sink.Flush(ctx, f.Handler)
}

func (f *flushClock) sorted() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.SortedFunc(slices.Values(f.at), time.Time.Compare)
}

func TestStopClosesTheSocketAndNobodyReclaims(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 2; i++ {
		e.worker(func(c *Config) { c.ReconcileEvery = 300 * time.Millisecond })
	}
	id := e.session(nil)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "messages", func() bool { return e.sink.count(id) >= 5 })
	stopped := time.Now()
	e.stop(id)
	// The owner reads its mailbox at its next heartbeat.
	testwait.Eventually(t, testHeartbeat+testRPC+slack, "the socket closed", func() bool { return e.feed.Session(id).Open == 0 })
	if took := time.Since(stopped); took > testHeartbeat+testRPC+slack {
		t.Fatalf("closed %s after the stop", took)
	}
	if code := e.ended(id, 0).ClientCode; code != int(websocket.StatusNormalClosure) {
		t.Fatalf("closed with %d, want 1000", code)
	}
	// Released, then, through the time the lease would have expired and
	// been reconciled: nobody connects again, nobody owns it.
	testwait.Eventually(t, 5*time.Second, "released after the stop", func() bool { return e.owner(id) == nil })
	testwait.Holds(t, testTTL+2*300*time.Millisecond, "one connection and no owner after the stop", func() bool {
		return len(e.feed.Records(id)) == 1 && e.owner(id) == nil
	})
	if it := e.item(id); it.Owner != "" || it.LastSeq < 5 {
		t.Fatalf("not released with its checkpoint: owner %q last_seq %d", it.Owner, it.LastSeq)
	}
}

func TestNewURLReconnects(t *testing.T) {
	e := newEnv(t)
	e.worker(nil)
	id := e.session(nil)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "messages", func() bool { return e.sink.count(id) >= 5 })
	changed := time.Now()
	e.update(id, "SET #u = :u, #g = #g + :one", map[string]string{"#u": schema.AttrSpec, "#g": schema.AttrGeneration},
		map[string]types.AttributeValue{":u": str(spectest.Stored(t, sessionSpec(e.feed.URL(id)+"?token=rotated"))), ":one": num(1)})
	e.mail(id) // as ingest does after a new generation of an owned session
	testwait.Eventually(t, testHeartbeat+testRPC+slack, "a connection to the new URL", func() bool {
		c := e.feed.Records(id)
		return len(c) >= 2 && bytes.Contains([]byte(c[len(c)-1].RequestURI), []byte("token=rotated"))
	})
	t.Logf("reconnected to the new ws_url %s after the change", time.Since(changed).Round(time.Millisecond))
	n := e.sink.count(id)
	testwait.Eventually(t, 5*time.Second, "messages from the new URL", func() bool { return e.sink.count(id) >= n+10 })
	contiguous(t, e.sink.get(id))
	if code := e.ended(id, 0).ClientCode; code != int(websocket.StatusNormalClosure) {
		t.Fatalf("old connection closed with %d, want 1000", code)
	}
}

// A worker whose record was declared DEAD (here written directly, without
// the watcher's TTL wait, which the lease tests cover) stops at its next
// heartbeat: every socket closes, nothing is delivered after, Run returns
// why, and another worker takes the session over with a newer epoch.
func TestWorkerDeclaredDeadStopsAtItsNextHeartbeat(t *testing.T) {
	e := newEnv(t)
	a := e.worker(nil)
	id := e.session(nil)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "messages", func() bool { return e.sink.count(id) >= 5 })
	declared := time.Now()
	e.updateKey(schema.WorkerKey(a.ID()), "SET #s = :dead, #l = :gone ADD #ep :one",
		map[string]string{"#s": schema.AttrWorkerState, "#l": schema.AttrWorkerList, "#ep": schema.AttrWorkerEpoch},
		map[string]types.AttributeValue{":dead": str(schema.WorkerDead), ":gone": str(schema.WorkerListGone), ":one": num(1)})
	bound := testHeartbeat + testRPC + slack
	testwait.Eventually(t, bound, "a's socket closed", func() bool { return len(e.feed.Records(id)) >= 1 && !e.feed.Records(id)[0].ClosedAt.IsZero() })
	closed := e.feed.Records(id)[0].ClosedAt
	t.Logf("declared dead: a's socket closed %s after", closed.Sub(declared).Round(time.Millisecond))
	for _, d := range byWorker(e.sink.get(id), a.ID()) {
		if d.at.After(closed) {
			t.Fatalf("a delivered seq %d at %v, after its socket closed at %v", d.seq, d.at, closed)
		}
	}
	select {
	case err := <-a.done:
		a.stopped = true
		if !errors.Is(err, lease.ErrWorkerDead) {
			t.Fatalf("a's Run returned %v, want ErrWorkerDead", err)
		}
	case <-time.After(bound):
		t.Fatal("a's Run did not return after it was declared dead")
	}
	// A worker that starts now (a has stopped) finds a's session among the
	// GONE worker's sessions and takes it over.
	b := e.worker(nil)
	testwait.Eventually(t, e.reconcileBound(), "b takes the session over", func() bool { return len(byWorker(e.sink.get(id), b.ID())) >= 5 })
	if it := e.item(id); it.Owner != b.ID() || it.Epoch != 2 {
		t.Fatalf("after the takeover: owner %s epoch %d", it.Owner, it.Epoch)
	}
}

func TestSourceDropReconnectsAndResumes(t *testing.T) {
	e := newEnv(t)
	e.worker(nil)
	id := e.session(nil)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "messages", func() bool { return e.sink.count(id) >= 10 })
	e.feed.Drop(id, websocket.StatusServiceRestart)
	testwait.Eventually(t, 5*time.Second, "a reconnect", func() bool { return len(e.feed.Records(id)) >= 2 })
	n := e.sink.count(id)
	e.feed.Drop(id, 0) // and once abruptly
	testwait.Eventually(t, 5*time.Second, "messages after two drops", func() bool { return e.sink.count(id) >= n+20 && len(e.feed.Records(id)) >= 3 })
	contiguous(t, e.sink.get(id))
	for _, c := range e.feed.Records(id)[1:] {
		if c.From < 2 {
			t.Fatalf("reconnect without resume: from=%d", c.From)
		}
	}
}

// tableProxy puts a fault proxy between the next workers e starts and
// DynamoDB (e.workerDB), and returns it; the test sets e.workerDB back to
// nil for workers that reach the table directly.
func (e *env) tableProxy() *faultnet.Proxy {
	e.t.Helper()
	ac, err := awsconfig.Load(context.Background(), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	proxy := proxyTo(e.t, "AWS_ENDPOINT_URL_DYNAMODB")
	e.workerDB = dynamodb.NewFromConfig(ac, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(proxy.URL()) })
	return proxy
}

// streamOn starts n sessions (streaming) and waits until worker a owns
// each.
func (e *env) streamOn(a *testWorker, n, min int) []string {
	e.t.Helper()
	ids := e.streaming(n, min)
	testwait.Eventually(e.t, 5*time.Second, fmt.Sprintf("a owns all %d", n), func() bool {
		for _, id := range ids {
			if !a.owns(id) {
				return false
			}
		}
		return true
	})
	return ids
}
