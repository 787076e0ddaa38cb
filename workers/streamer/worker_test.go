package streamer

// Worker tests on the in-memory store (no engines): admission, the admin
// endpoints, metrics, stop notifications and the shutdown deadline.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

type memWorker struct {
	*Worker
	store   *memstore.Store
	feed    *feed.Server
	sink    *recSink
	metrics *syncBuffer
	logs    *syncBuffer
	cancel  context.CancelFunc
	done    chan error
}

// startMem runs one worker (no work queue) on a memstore with n sessions
// seeded on a test feed.
func startMem(t *testing.T, n int, mod func(*Config), h sink.Handler) *memWorker {
	t.Helper()
	return startMemOn(t, memstore.New(), n, mod, h)
}

// startMemOn is startMem on st (faults installed before the worker runs).
func startMemOn(t *testing.T, st *memstore.Store, n int, mod func(*Config), h sink.Handler) *memWorker {
	t.Helper()
	return startMemThrough(t, st, nil, n, mod, h)
}

// startMemThrough is startMemOn with the worker's store calls going through
// wrap(st) (nil: st itself).
func startMemThrough(t *testing.T, st *memstore.Store, wrap func(lease.Store) lease.Store, n int, mod func(*Config), h sink.Handler) *memWorker {
	t.Helper()
	f := feed.StartForTest(t, feed.Config{Rate: feedRate, Mode: feed.ModeAllow})
	for i := range n {
		id := fmt.Sprintf("mem-%06d", i)
		st.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq,
			Spec: spectest.Stored(t, spec.Spec{WSURL: "ws://" + f.Addr() + "/feed/" + id, Resume: &spec.Resume{QueryParam: "from"}})})
	}
	cfg := testConfig("mem-worker")
	cfg.ReconcileEvery = 200 * time.Millisecond
	if mod != nil {
		mod(&cfg)
	}
	m := &memWorker{store: st, feed: f, sink: &recSink{by: map[string][]delivery{}}, metrics: &syncBuffer{}, logs: &syncBuffer{}, done: make(chan error, 1)}
	if h == nil {
		h = m.sink
	}
	log := logging.New(m.logs, schema.ServiceStreamer, "debug")
	var ws lease.Store = st
	if wrap != nil {
		ws = wrap(st)
	}
	w, err := New(cfg, Deps{Store: ws, Handler: h, Logger: &log, Metrics: m.metrics})
	if err != nil {
		t.Fatal(err)
	}
	m.Worker = w
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { m.done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-m.done
		if t.Failed() {
			t.Logf("logs:\n%s", m.logs.String())
		}
	})
	testwait.Eventually(t, 5*time.Second, "admin server", func() bool { return w.AdminAddr() != "" })
	return m
}

func getJSON(t *testing.T, url string, v any) int {
	t.Helper()
	resp := adminDo(t, http.MethodGet, url)
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode
}

func TestAdmissionStopsAtMaxSessions(t *testing.T) {
	m := startMem(t, 5, func(c *Config) { c.MaxSessions = 3 }, nil)
	testwait.Eventually(t, 5*time.Second, "3 sessions owned", func() bool { return m.owned() == 3 })
	testwait.Holds(t, 500*time.Millisecond, "3 owned and none free through more reconcile passes (MaxSessions 3)", func() bool {
		return m.owned() == 3 && m.free() == 0
	})
	out, err := claimer{m.Worker, pathQueue}.Claim(context.Background(), "mem-000004", nil, 0) // as the consumer and the reconciler call it
	if out != claim.AtCapacity && out != claim.OwnedHere {
		t.Fatalf("claim at capacity: %v %v", out, err)
	}
}

// The reconciler's first pass, at start, claims what it finds: the worker
// is running (it has free capacity) before the pass runs. A worker that
// set its state after starting the loops could make that pass find no
// room, and the sessions waited a whole reconcile interval (an hour here);
// under load that lost the race now and then.
func TestTheFirstReconcilePassClaims(t *testing.T) {
	m := startMem(t, 5, func(c *Config) { c.ReconcileEvery = time.Hour }, nil)
	testwait.Eventually(t, 5*time.Second, "the 5 sessions owned after the first pass", func() bool { return m.owned() == 5 })
	if p := m.recon.Passes(); p != 1 {
		t.Fatalf("%d reconcile passes, want the first only", p)
	}
}

func TestAdminEndpoints(t *testing.T) {
	m := startMem(t, 2, nil, nil)
	base := "http://" + m.AdminAddr()
	testwait.Eventually(t, 5*time.Second, "2 sessions streaming", func() bool {
		return m.sink.count("mem-000000") > 3 && m.sink.count("mem-000001") > 3
	})
	var health map[string]string
	if code := getJSON(t, base+"/healthz", &health); code != 200 || health["status"] != "running" {
		t.Fatalf("/healthz %d %v", code, health)
	}
	var ready struct {
		Ready  bool
		Checks map[string]string
	}
	if code := getJSON(t, base+"/readyz", &ready); code != 200 || !ready.Ready || ready.Checks["table"] != "ok" {
		t.Fatalf("/readyz %d %+v", code, ready)
	}
	var st Status
	if code := getJSON(t, base+"/status", &st); code != 200 || st.Owned != 2 || len(st.Sessions) != 2 {
		t.Fatalf("/status %d %+v", code, st)
	}
	if host, _ := os.Hostname(); st.PID != os.Getpid() || st.Host != host {
		t.Fatalf("/status names pid %d host %q, want %d %q", st.PID, st.Host, os.Getpid(), host)
	}
	s := st.Sessions[0]
	if s.ConnectionID != "mem-000000" || s.Epoch != 1 || s.LastSeq < 1 || s.Messages < 1 || !s.Connected || s.Since.IsZero() {
		t.Fatalf("session status %+v", s)
	}
	u, err := url.Parse(s.URL)
	if err != nil || u.Host == "" {
		t.Fatalf("status URL %q: %v", s.URL, err)
	}
	for k, vs := range u.Query() {
		if len(vs) != 1 || vs[0] != spec.Redacted {
			t.Fatalf("status shows query value %s=%v: %s", k, vs, s.URL)
		}
	}
}

func TestMetricsAreEMFWithTheSchemaNames(t *testing.T) {
	m := startMem(t, 2, func(c *Config) { c.MaxSessions = 4; c.MetricsEvery = 100 * time.Millisecond }, nil)
	testwait.Eventually(t, 5*time.Second, "a flush with 2 sessions owned", func() bool {
		return strings.Contains(m.metrics.String(), `"CapacityUtilization":50`)
	})
	var line map[string]any
	for _, l := range strings.Split(m.metrics.String(), "\n") {
		if strings.Contains(l, `"CapacityUtilization":50`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if line[schema.DimService] != schema.ServiceStreamer || line[schema.DimEnvironment] != "local" {
		t.Fatalf("dimensions: %v", line)
	}
	for _, name := range []string{schema.MetricOwnedSessions, schema.MetricFreeCapacity, schema.MetricMessagesIn, schema.MetricDuplicatesDropped, schema.MetricReconnects, schema.MetricSinkErrors, schema.MetricSeqMissingDropped} {
		if _, ok := line[name]; !ok {
			t.Errorf("EMF line without %s: %v", name, line)
		}
	}
	if line[schema.MetricOwnedSessions] != 2.0 || line[schema.MetricFreeCapacity] != 2.0 {
		t.Fatalf("owned %v free %v", line[schema.MetricOwnedSessions], line[schema.MetricFreeCapacity])
	}
	for _, name := range []string{schema.MetricAcquired, schema.MetricOrphansSeen, schema.MetricHeartbeatLatencyMs, schema.MetricAliveWorkers} {
		testwait.Eventually(t, 5*time.Second, name+" in an EMF line", func() bool { return strings.Contains(m.metrics.String(), `"`+name+`"`) })
	}
}

func TestStopNotificationClosesAtOnceWhenTheTableSaysStopped(t *testing.T) {
	// Heartbeats and audits far apart (and no mailbox entry): only the
	// notification can close it quickly.
	m := startMem(t, 1, func(c *Config) {
		c.LeaseTTL, c.HeartbeatEvery, c.SafetyMargin, c.ReconcileEvery = 30*time.Second, 10*time.Second, 2*time.Second, time.Minute
	}, nil)
	id := "mem-000000"
	testwait.Eventually(t, 5*time.Second, "messages", func() bool { return m.sink.count(id) > 3 })
	m.stopHint(context.Background(), id) // still STARTED: ignored
	testwait.Holds(t, 300*time.Millisecond, "a stop notification for a STARTED session leaves it open", func() bool {
		return m.feed.Session(id).Open == 1
	})
	m.store.Update(id, func(it *lease.Item) { it.DesiredState = schema.StateStopped })
	m.stopHint(context.Background(), id)
	testwait.Eventually(t, 2*time.Second, "closed", func() bool { return m.feed.Session(id).Open == 0 })
	testwait.Eventually(t, 2*time.Second, "feed sees the close", func() bool { return m.feed.Ended(id) })
	if code := m.feed.Records(id)[0].ClientCode; code != int(websocket.StatusNormalClosure) {
		t.Fatalf("closed with %d, want 1000", code)
	}
	testwait.Eventually(t, 2*time.Second, "released", func() bool {
		it, _ := m.store.Get(context.Background(), id)
		return it.Owner == "" && it.LastSeq > 0
	})
}

// blockingSink accepts the first messages, then blocks until its context
// ends: a sink that hangs during shutdown, ignoring its context's deadline
// (which ends at the tenure's trust deadline), until release is closed.
type blockingSink struct {
	mu      sync.Mutex
	n       int
	blocked chan struct{}
	release chan struct{}
}

func (b *blockingSink) Handle(ctx context.Context, m sink.Message) error {
	b.mu.Lock()
	b.n++
	n := b.n
	b.mu.Unlock()
	if n < 5 {
		return nil
	}
	if n == 5 {
		close(b.blocked)
	}
	<-b.release
	return ctx.Err()
}

func TestShutdownDeadlineAbandonsWhatCannotBeReleased(t *testing.T) {
	b := &blockingSink{blocked: make(chan struct{}), release: make(chan struct{})}
	m := startMem(t, 1, func(c *Config) { c.ShutdownDeadline = 2 * time.Second }, b)
	t.Cleanup(func() { close(b.release) }) // before startMem's cleanup
	<-b.blocked
	start := time.Now()
	m.cancel()
	err := <-m.done
	m.done <- err // for the cleanup
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("Run = %v, want a deadline error", err)
	}
	if took := time.Since(start); took > 2*time.Second+slack {
		t.Fatalf("shutdown took %s with a 2 s deadline", took)
	}
	it, _ := m.store.Get(context.Background(), "mem-000000")
	if it.Owner == "" {
		t.Fatal("released although the sink never accepted the message in flight")
	}
}

func TestRunTwiceIsRefused(t *testing.T) {
	m := startMem(t, 0, nil, nil)
	if err := m.Run(context.Background()); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("second Run = %v", err)
	}
}

// Worker's exported methods are what a program embedding the worker calls
// (the fleet simulator's Sim* seam exists in its build only): what
// internal/claim needs goes through claimer.
func TestWorkerExportsOnlyTheLibrarySurface(t *testing.T) {
	var got []string
	wt := reflect.TypeFor[*Worker]()
	for i := range wt.NumMethod() {
		if name := wt.Method(i).Name; !strings.HasPrefix(name, "Sim") {
			got = append(got, name)
		}
	}
	if want := []string{"AdminAddr", "AdminHandler", "ID", "Run", "Stats", "Status"}; !slices.Equal(got, want) {
		t.Errorf("Worker exports %v, want %v (a method another package of this module needs goes through an unexported adapter, as claimer)", got, want)
	}
}
