//go:build fleetsim

package fleetsim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/pipenet"
	"github.com/wsfleet/wsfleet/testkit/simddb"
	"github.com/wsfleet/wsfleet/workers/streamer"
)

// Config is one simulated fleet.
type Config struct {
	// Seed fixes the table's draws (latency, lag) and the workers' skews.
	Seed uint64
	// Rate is each session's message rate (messages per second).
	Rate float64
	// Skew: each worker's clock is the bubble's offset by a skew drawn
	// from the seed in [-Skew, +Skew] (the rules measure durations only).
	Skew time.Duration
	// Table is the simulated DynamoDB (simddb.AWS() by default); its Seed
	// is Config.Seed.
	Table *simddb.Config
	// Hosts is how many source hosts the sessions are spread over (round
	// robin): a worker admits WSFLEET_DIALS_PER_HOST dials a second to one
	// host, so a failover onto one host is paced by it. 0: every session
	// its own host.
	Hosts int
	// Worker, when set, changes each worker's configuration.
	Worker func(*streamer.Config)
}

// Member is one worker of the fleet: the real streamer.Worker (New, Run).
type Member struct {
	ID    string
	Skew  time.Duration
	w     *streamer.Worker
	store *memberStore
	// Started and Ended bound its life (virtual); Ended is zero while it
	// runs.
	Started, Ended time.Time
	cancel         context.CancelFunc
	done           chan error
	Err            error
}

// Fleet is N real worker control planes on one simulated table, with
// simulated sessions, in one process. Create it, drive it and Close it
// inside a testing/synctest bubble (synctest.Test): every goroutine of the
// fleet is the bubble's, and time is virtual.
type Fleet struct {
	cfg    Config
	Table  *simddb.Store
	Record *Record
	t0     time.Time
	feed   *feed.Server
	pn     *pipenet.Net
	srv    *http.Server
	served chan struct{}
	rnd    *rand.Rand

	mu       sync.Mutex
	members  []*Member
	sessions []string
	nextW    int
	steady   [2]*steadyMark // the steady window's start and end (steady.go)
}

// New starts the fleet's source and table (no worker yet). Call it inside
// a synctest bubble.
func New(cfg Config) (*Fleet, error) {
	if cfg.Rate <= 0 {
		cfg.Rate = 1
	}
	tc := simddb.AWS()
	if cfg.Table != nil {
		tc = *cfg.Table
	}
	tc.Seed = cfg.Seed
	st, err := simddb.New(tc)
	if err != nil {
		return nil, fmt.Errorf("fleetsim: table: %w", err)
	}
	f, err := feed.New(feed.Config{Rate: cfg.Rate, Mode: feed.ModeAllow})
	if err != nil {
		return nil, fmt.Errorf("fleetsim: source: %w", err)
	}
	fl := &Fleet{
		cfg: cfg, Table: st, Record: newRecord(), t0: time.Now(), feed: f, pn: pipenet.New(),
		served: make(chan struct{}), rnd: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
	}
	fl.srv = &http.Server{Handler: f.Handler()}
	go func() { defer close(fl.served); _ = fl.srv.Serve(fl.pn) }()
	return fl, nil
}

// Start0 is when the fleet was created (virtual).
func (fl *Fleet) Start0() time.Time { return fl.t0 }

// StartSessions writes n new STARTED sessions to the table as ingest does
// (the harness's writes, metered as seeds); the workers find them by
// reconciliation (no work queue in the simulator).
func (fl *Fleet) StartSessions(n int) error {
	fl.mu.Lock()
	base := len(fl.sessions)
	fl.mu.Unlock()
	for i := range n {
		id := fmt.Sprintf("s-%06d", base+i)
		host := id + ".src.test"
		if fl.cfg.Hosts > 0 {
			host = fmt.Sprintf("h%d.src.test", (base+i)%fl.cfg.Hosts)
		}
		enc, err := spec.Spec{WSURL: "ws://" + host + feed.PathPrefix + id, Resume: &spec.Resume{QueryParam: feed.DefaultResumeParam}}.Stored()
		if err != nil {
			return fmt.Errorf("fleetsim: spec of %s: %w", id, err)
		}
		fl.Table.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq, Spec: enc})
		fl.mu.Lock()
		fl.sessions = append(fl.sessions, id)
		fl.mu.Unlock()
	}
	return nil
}

// Sessions are the ids of the sessions started so far.
func (fl *Fleet) Sessions() []string {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return slices.Clone(fl.sessions)
}

// AddWorkers starts n more workers (New and Run, as the binary does, with
// no admin listener and no work queue), one after the other, each after a
// gap drawn from the seed (1 to 997 ms): no two workers' timers (heartbeat,
// reconcile, checkpoint) fire at the same virtual instant, so that which of
// two racing workers reaches the table first is the seed's, not the
// scheduler's.
func (fl *Fleet) AddWorkers(n int) ([]*Member, error) {
	var out []*Member
	for range n {
		fl.mu.Lock()
		gap := time.Duration(1+fl.rnd.IntN(997)) * time.Millisecond
		fl.mu.Unlock()
		time.Sleep(gap)
		m, err := fl.addWorker(nil)
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
	if len(out) > 0 {
		fl.Record.fault(Fault{Kind: "add", Workers: ids(out), At: out[0].Started})
	}
	return out, nil
}

func (fl *Fleet) addWorker(tweak func(*memberStore)) (*Member, error) {
	fl.mu.Lock()
	id := fmt.Sprintf("w-%03d", fl.nextW)
	fl.nextW++
	var skew time.Duration
	if fl.cfg.Skew > 0 {
		skew = time.Duration(fl.rnd.Int64N(int64(2*fl.cfg.Skew)+1)) - fl.cfg.Skew
	}
	fl.mu.Unlock()
	cfg := streamer.DefaultConfig()
	cfg.WorkerID = id
	cfg.AdminAddr = "" // no listener: nothing in the bubble waits on a socket
	if fl.cfg.Worker != nil {
		fl.cfg.Worker(&cfg)
	}
	log := logging.New(io.Discard, schema.ServiceStreamer, "error")
	ms := &memberStore{st: fl.Table}
	if tweak != nil {
		tweak(ms)
	}
	w, err := streamer.New(cfg, streamer.Deps{
		Store: ms, Handler: fl.Record, Logger: &log, Metrics: io.Discard,
		Clock: clock.Offset{Base: clock.Real{}, Skew: skew},
	})
	if err != nil {
		return nil, fmt.Errorf("fleetsim: worker %s: %w", id, err)
	}
	w.SimSetSessionTransport(&http.Transport{DialContext: fl.pn.DialContext, DisableKeepAlives: true})
	ctx, cancel := context.WithCancel(context.Background())
	m := &Member{ID: id, Skew: skew, w: w, store: ms, Started: time.Now(), cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- w.Run(ctx) }()
	fl.mu.Lock()
	fl.members = append(fl.members, m)
	fl.mu.Unlock()
	return m, nil
}

// Members are the workers started so far (ended ones included).
func (fl *Fleet) Members() []*Member {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return slices.Clone(fl.members)
}

// Running are the workers not yet ended.
func (fl *Fleet) Running() []*Member {
	var out []*Member
	for _, m := range fl.Members() {
		if m.Ended.IsZero() {
			out = append(out, m)
		}
	}
	return out
}

// ownedBy are the sessions the table says ms own (read under the rules'
// lock, unmetered: the simulator's look, not a worker's).
func (fl *Fleet) ownedBy(ms []*Member) []string {
	who := map[string]bool{}
	for _, m := range ms {
		who[m.ID] = true
	}
	var out []string
	for _, id := range fl.Sessions() {
		it, err := fl.Table.Mem().Get(context.Background(), id)
		if err == nil && who[it.Owner] {
			out = append(out, id)
		}
	}
	return out
}

// Kill plays a kill -9 of ms at once: each is cut off the table, its
// sessions are left without a close or a release, and its goroutines end.
func (fl *Fleet) Kill(ms ...*Member) {
	fl.Record.fault(Fault{Kind: "kill", Workers: ids(ms), At: time.Now(), Sessions: fl.ownedBy(ms)})
	for _, m := range ms {
		m.store.cut.Store(true)
		m.w.SimCrash()
	}
	for _, m := range ms {
		m.cancel()
	}
	for _, m := range ms {
		m.Err = <-m.done
		m.Ended = time.Now()
	}
}

// Term plays a SIGTERM of m: its graceful shutdown (close, flush, release
// with the final checkpoint, LEFT), awaited.
func (fl *Fleet) Term(m *Member) {
	fl.Record.fault(Fault{Kind: "term", Workers: []string{m.ID}, At: time.Now(), Sessions: fl.ownedBy([]*Member{m})})
	m.cancel()
	m.Err = <-m.done
	m.Ended = time.Now()
}

// Close stops every worker still running (gracefully) and the source. The
// bubble ends only once every goroutine of the fleet has.
func (fl *Fleet) Close() {
	running := fl.Running()
	for _, m := range running {
		m.cancel()
	}
	for _, m := range running {
		m.Err = <-m.done
		m.Ended = time.Now()
	}
	fl.feed.Close()
	_ = fl.srv.Close()
	<-fl.served
}

// SourceOverlaps are the times two connections of one session were open at
// once, as the source saw them (feed.Stats.Overlaps).
func (fl *Fleet) SourceOverlaps() int { return len(fl.feed.Stats().Overlaps) }

func ids(ms []*Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}
