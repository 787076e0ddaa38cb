// Package dynamodel owns the DynamoDB model: an HTTP server on 127.0.0.1
// that speaks DynamoDB's JSON protocol (X-Amz-Target
// DynamoDB_20120810.<Op>, application/x-amz-json-1.0) in front of a real
// dynalite (the primary, which holds the data and decides every write), and
// adds what dynalite does not do and DynamoDB does, each with a setting
// (Profile) and the documented default profile AWS:
//
//   - service latency per operation, with a tail and rare multi-second
//     spikes (profile.go);
//   - index lag and eventually consistent reads, answered by a second
//     dynalite fed the item images after a lag, with lag episodes
//     (mirror.go);
//   - throttling: per partition key value, per index key value, and a
//     table-level on-demand allowance, with DynamoDB's exceptions and
//     throttling reasons, and knobs to hold a table or a key down
//     (throttle.go);
//   - ambiguous errors: writes answered 500 before or after being applied,
//     or whose reply is dropped, with storms (faults.go);
//   - billing: capacity units metered as DynamoDB bills them (meter.go).
//
// The Dynalite profile adds nothing. The request path is proxy.go (the
// latency, the routing, what is forwarded as it is), writes.go and
// batchwrite.go (the writes), reads.go (the reads); the control endpoints
// for a model in its own process (cmd/dynamodel) are control.go. Every
// random draw comes from one RNG seeded by Config.Seed.
//
// Not modelled: transactions (dynalite has none: TransactWriteItems and
// TransactGetItems are forwarded and refused), PartiQL, streams, TTL
// expiry; Scan is routed like Query but throttled only at the table level;
// reads are billed on the items returned (see meter.go). It is a test
// harness: no shipped binary imports it (shared/archtest).
package dynamodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

// Config says how to start a model.
type Config struct {
	// Profile is the behaviour (AWS() or Dynalite(), or a changed copy).
	Profile Profile
	// Primary is the endpoint of a running dynalite to front. Empty: the
	// model starts one (Engines) and stops it on Close.
	Primary string
	// Engines is where the dynalites the model starts log (the primary's in
	// LogDir, the mirror's in LogDir/mirror) and where the primary keeps
	// its data (DataDir; in memory when empty). Port is the primary's.
	Engines enginetest.Options
	// Addr is the host:port the model listens on (default 127.0.0.1:0: a
	// free port); the host must be a loopback address.
	Addr string
	// Seed seeds the model's RNG (0: 1).
	Seed uint64
	// Log receives the model's own problems (the mirror not answering);
	// nil: discarded.
	Log io.Writer
}

// Model is a running DynamoDB model.
type Model struct {
	prof     Profile
	endpoint string
	primary  string
	srv      *http.Server
	ln       net.Listener
	client   *http.Client
	log      io.Writer

	started []*enginetest.Process // the dynalites the model started
	mirror  *mirror               // nil: no lagging state
	imaging bool                  // writes read the item before (lag, throttling or billing)

	rngMu sync.Mutex
	rng   *rand.Rand

	tables tableCache
	locks  keyLocks
	thr    *throttler
	faults faulter
	meter  meter

	closeOnce sync.Once
	closeErr  error
}

// Start starts a model (and the dynalites it needs) and serves it until
// Close. ctx bounds the start only.
func Start(ctx context.Context, cfg Config) (*Model, error) {
	prof := cfg.Profile
	if err := prof.check(); err != nil {
		return nil, err
	}
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dynamodel: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("dynamodel: address %q: the model listens on a loopback address only", addr)
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = 1
	}
	m := &Model{
		prof:   prof,
		log:    cfg.Log,
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		tables: tableCache{m: map[string]*tableInfo{}},
		faults: faulter{storms: map[Fault]storm{}},
		meter:  meter{on: prof.Meter, tables: map[string]*TableMeter{}},
		client: &http.Client{Transport: &http.Transport{
			Proxy: nil, MaxIdleConns: 512, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
			DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		}},
	}
	if m.log == nil {
		m.log = io.Discard
	}
	m.thr = newThrottler(prof.Throughput, time.Now)
	m.imaging = prof.Meter || prof.Throughput.Enabled() || !prof.Lag.IsZero()
	fail := func(err error) (*Model, error) {
		m.stopEngines()
		return nil, err
	}

	m.primary = cfg.Primary
	if m.primary == "" {
		p, err := enginetest.StartDynalite(cfg.Engines)
		if err != nil {
			return fail(fmt.Errorf("dynamodel: primary: %w", err))
		}
		m.started = append(m.started, p)
		m.primary = p.Endpoint()
	}
	if !prof.Lag.IsZero() {
		o := enginetest.Options{Root: cfg.Engines.Root, OnExit: cfg.Engines.OnExit}
		if cfg.Engines.LogDir != "" {
			o.LogDir = filepath.Join(cfg.Engines.LogDir, "mirror")
		}
		p, err := enginetest.StartDynalite(o)
		if err != nil {
			return fail(fmt.Errorf("dynamodel: mirror: %w", err))
		}
		m.started = append(m.started, p)
		m.mirror = newMirror(m, p.Endpoint())
		if err := m.mirror.sync(ctx); err != nil {
			m.mirror.close()
			return fail(fmt.Errorf("dynamodel: copying the primary's tables to the mirror: %w", err))
		}
	}

	m.ln, err = net.Listen("tcp", addr)
	if err != nil {
		if m.mirror != nil {
			m.mirror.close()
		}
		return fail(fmt.Errorf("dynamodel: listen: %w", err))
	}
	m.endpoint = "http://" + m.ln.Addr().String()
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(m.ln) }()
	return m, nil
}

// StartT starts a model for t and closes it when t ends; it fails t when
// the model cannot start (it never skips: a test that may run without the
// engines calls enginetest.Require first).
func StartT(t testing.TB, cfg Config) *Model {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("dynamodel: close: %v", err)
		}
	})
	return m
}

// Endpoint is the model's URL (http://127.0.0.1:PORT), for the SDK's
// BaseEndpoint or AWS_ENDPOINT_URL_DYNAMODB.
func (m *Model) Endpoint() string { return m.endpoint }

// Primary is the endpoint of the dynalite that holds the data.
func (m *Model) Primary() string { return m.primary }

// Profile is the model's profile.
func (m *Model) Profile() Profile { return m.prof }

// Close stops serving, stops the mirror and the dynalites the model
// started.
func (m *Model) Close() error {
	m.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := m.srv.Shutdown(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = m.srv.Close()
		}
		if m.mirror != nil {
			m.mirror.close()
		}
		m.stopEngines()
		m.closeErr = err
	})
	return m.closeErr
}

func (m *Model) stopEngines() {
	for _, p := range m.started {
		p.Stop()
	}
	m.started = nil
}

// Meter is a snapshot of the billing counters (empty unless the profile's
// Meter is on).
func (m *Model) Meter() Meter { return m.meter.snapshot() }

// HoldTable holds table (every table when "") at fraction of its on-demand
// allowance for dur: a throttling storm. It acts on a model whose profile
// throttles (a Throughput with WarmWCU / WarmRCU), as AWS() does.
func (m *Model) HoldTable(table string, fraction float64, dur time.Duration) {
	m.thr.holdTable(table, fraction, dur)
}

// HotKey makes one partition key value of table (a string or number, as
// text) take only fraction of the partition's rate for dur: a hot key. The
// same value as a global secondary index's partition key (a by_owner entry
// of one worker) takes only fraction of the index key's write rate
// (IndexWCU): a hot index key. It acts on a model whose profile throttles
// partitions (PartitionWCU / PartitionRCU / IndexWCU), as AWS() does.
func (m *Model) HotKey(table, value string, fraction float64, dur time.Duration) {
	m.thr.hotKey(table, value, fraction, dur)
}

// DrainKey empties the write buckets of one partition key value of table
// (a string or number, as text), as a table key and as an index key (the
// index keys already written to): a key that has been hot has used its burst, so its next writes wait for the
// key's rate (with HotKey, its fraction of it) instead of spending a full
// bucket first. It acts on a model whose profile throttles partitions.
func (m *Model) DrainKey(table, value string) {
	m.thr.drainKey(table, value)
}

func (m *Model) logf(format string, args ...any) {
	fmt.Fprintf(m.log, "dynamodel: "+format+"\n", args...)
}

func (m *Model) draw(d Dist) time.Duration {
	if d.IsZero() {
		return 0
	}
	m.rngMu.Lock()
	defer m.rngMu.Unlock()
	return d.Draw(m.rng)
}

func (m *Model) float() float64 {
	m.rngMu.Lock()
	defer m.rngMu.Unlock()
	return m.rng.Float64()
}

// reply is an answer to a request: a status and a JSON body, or a dropped
// connection.
type reply struct {
	status int
	body   []byte
	drop   bool
}

func replyError(what string, rep *reply) error {
	if rep == nil {
		return nil
	}
	return fmt.Errorf("%s: %d %s", what, rep.status, rep.body)
}

// errType is the exception name of an error reply ("" for none).
func (r *reply) errType() string {
	if r.status == 200 {
		return ""
	}
	var e struct {
		Type string `json:"__type"`
	}
	_ = json.Unmarshal(r.body, &e)
	_, name, _ := strings.Cut(e.Type, "#")
	return name
}

// call sends op with body to a dynalite (the primary or the mirror),
// signed well enough for dynalite (which checks the form only).
func (m *Model) call(ctx context.Context, endpoint, op string, body []byte) (*reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", targetPrefix+op)
	req.Header.Set("X-Amz-Date", now.Format("20060102T150405Z"))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=dynamodel/"+now.Format("20060102")+
		"/us-east-1/dynamodb/aws4_request, SignedHeaders=host;x-amz-date, Signature=0")
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &reply{status: resp.StatusCode, body: b}, nil
}

// keyLocks serialize the requests on one item (striped: two items may
// share a lock).
type keyLocks struct {
	stripes [1024]sync.Mutex
}

// lock locks the stripes of ids (in order, each once) and returns the
// unlock.
func (l *keyLocks) lock(ids ...string) func() {
	var idx []int
	for _, id := range ids {
		h := fnv.New32a()
		h.Write([]byte(id))
		idx = append(idx, int(h.Sum32()%uint32(len(l.stripes))))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		l.stripes[i].Lock()
	}
	return func() {
		for _, i := range slices.Backward(idx) {
			l.stripes[i].Unlock()
		}
	}
}
