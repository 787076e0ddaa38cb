//go:build fleetsim

package fleetsim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/draw"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/memqueue"
	"github.com/wsfleet/wsfleet/testkit/pipenet"
	"github.com/wsfleet/wsfleet/testkit/simddb"
	"github.com/wsfleet/wsfleet/workers/streamer"
)

// Config is one simulated fleet.
type Config struct {
	// Seed fixes the table's draws (latency, lag), the workers' skews and
	// their own draws (each worker's Deps.Rand is the seed's, derived by
	// its id).
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
	// ECS is the simulated ECS service (ecs.go); zero: DefaultECS().
	ECS ECSConfig
	// Queue, when set, changes the work queue (defaultQueue: SQS's
	// visibility timeout and the worker's long poll); its Seed is
	// Config.Seed.
	Queue func(*memqueue.Config)
	// ConnLimit is every source host's per-IP connection-rate limit
	// (feed.ConnLimit; each worker dials from an address of its own).
	ConnLimit feed.ConnLimit
	// Feed makes the sessions dial the test feed (testkit/feed) over
	// in-memory pipes through the worker's WebSocket client and HTTP
	// transport, ~100 KiB a session; off (the default), the light source
	// (lightsrc.go): the worker's session code above its connection, which
	// the source makes on each read, ~25 KiB a session (doc.go).
	Feed bool
	// StandbyShare, when above 0, makes every session's source one that
	// cannot replay (the feed's seq field, no resume parameter) and starts
	// that share of them with a hot standby (standby.go).
	StandbyShare float64
	// Watch are sessions whose every ownership call (each worker's
	// acquires, releases, hand-offs, and the listings that showed them)
	// is written to WatchTo as it happens: the history of a session
	// whose recovery was slow (Recovery.Slowest names them), replayed
	// by the same seed.
	Watch   []string
	WatchTo io.Writer
}

// Member is one worker of the fleet: the real streamer.Worker (New, Run).
type Member struct {
	ID    string
	Skew  time.Duration
	AZ    int // the ECS task's AZ (ecs.go)
	w     *streamer.Worker
	store *memberStore
	queue *memberQueue
	admin *pipenet.Net // its admin listener on the fleet's mesh
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
	src    source
	mesh   *pipenet.Mesh   // the workers' admin servers
	queue  *memqueue.Queue // the work queue every worker consumes
	// qlatMin, qlatMax bound a queue call's latency, drawn per worker
	// (memberQueue).
	qlatMin, qlatMax time.Duration
	rnd              *rand.Rand
	ecs              *ecs // under mu
	// handoffCalls counts the workers' POST /handoff requests (admin.go).
	handoffCalls atomic.Int64
	// sb is the standby sessions and the death declarations (standby.go).
	sb standbys
	// claims counts the workers' claims (claimrate.go).
	claims claimCounter
	watch  *watcher // Config.Watch's (nil: none)

	mu       sync.Mutex
	members  []*Member
	sessions []string
	starts   []time.Time // each session's start write, as sessions
	nextW    int
	steady   [2]*steadyMark // the steady window's start and end (steady.go)
	preFault *PreFault      // without a steady window (prefault.go)
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
	src, err := newSource(cfg)
	if err != nil {
		return nil, err
	}
	qc := defaultQueue(cfg.Seed)
	if cfg.Queue != nil {
		cfg.Queue(&qc)
		qc.Seed = cfg.Seed
	}
	// Each worker draws its calls' latency from its own stream
	// (memberQueue), not the queue's one.
	qlatMin, qlatMax := qc.LatencyMin, qc.LatencyMax
	qc.LatencyMin, qc.LatencyMax = 0, 0
	fl := &Fleet{
		cfg: cfg, Table: st, Record: newRecord(), t0: time.Now(), src: src,
		mesh: pipenet.NewMesh(), queue: memqueue.New(qc),
		rnd: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
	}
	fl.watch = newWatcher(cfg.Watch, cfg.WatchTo, fl.t0)
	fl.claims.t0 = fl.t0
	fl.ecs = newECS(cfg.ECS, cfg.Seed, fl.t0)
	fl.Record.produced = src.ProducedAt // the exact dark time (dark.go)
	fl.qlatMin, fl.qlatMax = qlatMin, qlatMax
	return fl, nil
}

// Start0 is when the fleet was created (virtual).
func (fl *Fleet) Start0() time.Time { return fl.t0 }

// StartSessions writes n new STARTED sessions to the table as ingest does
// (the harness's writes, metered as seeds) and publishes a start
// notification for each on the work queue: a worker claims it from there
// (the fast path), or finds it by reconciliation.
func (fl *Fleet) StartSessions(n int) error { return fl.startSessions(n, true) }

// startSessions is StartSessions; announce false plays start notifications
// lost (the workers find the sessions by reconciliation only).
func (fl *Fleet) startSessions(n int, announce bool) error {
	fl.mu.Lock()
	base := len(fl.sessions)
	fl.mu.Unlock()
	started := make([]string, 0, n)
	for i := range n {
		id := fmt.Sprintf("s-%06d", base+i)
		host := id + ".src.test"
		if fl.cfg.Hosts > 0 {
			host = fmt.Sprintf("h%d.src.test", (base+i)%fl.cfg.Hosts)
		}
		enc, err := fl.sessionSpec(id, host, base+i).Stored()
		if err != nil {
			return fmt.Errorf("fleetsim: spec of %s: %w", id, err)
		}
		fl.Table.Put(lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: lease.NoSeq, Spec: enc})
		fl.mu.Lock()
		fl.sessions = append(fl.sessions, id)
		fl.starts = append(fl.starts, time.Now())
		fl.mu.Unlock()
		started = append(started, id)
	}
	if !announce {
		return nil
	}
	return fl.announce(schema.NotifyStart, started, 1)
}

// Sessions are the ids of the sessions started so far.
func (fl *Fleet) Sessions() []string {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return slices.Clone(fl.sessions)
}

// AddWorkers starts n more workers (New and Run, as the binary does, each
// with its admin server on the fleet's mesh and the shared work queue),
// one after the other, each after a
// gap drawn from the seed (1 to 997 ms, 1 to 99 in a fleet of more than 20): no two workers' timers (heartbeat,
// reconcile, checkpoint) fire at the same virtual instant, so that which of
// two racing workers reaches the table first is the seed's, not the
// scheduler's.
func (fl *Fleet) AddWorkers(n int) ([]*Member, error) {
	var out []*Member
	// 1–997 ms apart (about 2 a second); a fleet of more than 20 comes up
	// at Fargate's steady launch rate instead (20 tasks a second, ecs.go's
	// quota: 1–99 ms apart), or 1,000 workers would take 8 virtual minutes
	// to start.
	maxGap := 997
	if n > 20 {
		maxGap = 99
	}
	for range n {
		fl.mu.Lock()
		gap := time.Duration(1+fl.rnd.IntN(maxGap)) * time.Millisecond
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
	return fl.addWorkerAZ(tweak, -1)
}

// addWorkerAZ starts a worker as a task in az (-1: placed now, ecs.go).
func (fl *Fleet) addWorkerAZ(tweak func(*memberStore), az int) (*Member, error) {
	fl.mu.Lock()
	id := fmt.Sprintf("w-%03d", fl.nextW)
	fl.nextW++
	var skew time.Duration
	if fl.cfg.Skew > 0 {
		skew = time.Duration(fl.rnd.Int64N(int64(2*fl.cfg.Skew)+1)) - fl.cfg.Skew
	}
	fl.mu.Unlock()
	cfg := fl.workerConfig(id)
	log := logging.New(io.Discard, schema.ServiceStreamer, "error")
	ms := &memberStore{st: fl.Table, declared: fl.sb.declared, claims: &fl.claims, who: id, watch: fl.watch}
	if fl.cfg.StandbyShare > 0 {
		ms.acquired = fl.sb.acquired
	}
	if tweak != nil {
		tweak(ms)
	}
	mq := &memberQueue{q: fl.queue, lat: draw.New(fl.cfg.Seed).Derive(id).Stream("queue"), latMin: fl.qlatMin, latMax: fl.qlatMax, who: id, watch: fl.watch}
	w, err := streamer.New(cfg, streamer.Deps{
		Store: ms, Queue: mq, Handler: fl.Record, Logger: &log, Metrics: io.Discard,
		Clock: clock.Offset{Base: clock.Real{}, Skew: skew},
		Rand:  draw.New(fl.cfg.Seed).Derive(id), // the worker's draws: the fleet's seed and its id
	})
	if err != nil {
		return nil, fmt.Errorf("fleetsim: worker %s: %w", id, err)
	}
	w.SimOnClaim(func(path, sid, outcome string) {
		fl.claims.addPath(time.Now(), path, outcome)
		fl.watch.claim(sid, id, path, outcome)
	})
	fl.src.connect(w, workerAddr(id))
	admin, err := fl.serveAdmin(id, w)
	if err != nil {
		return nil, fmt.Errorf("fleetsim: worker %s: admin: %w", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Member{ID: id, Skew: skew, w: w, store: ms, queue: mq, admin: admin, Started: time.Now(), cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := w.Run(ctx)
		w.SimOnClaim(nil) // its observer ends with it
		m.done <- err
	}()
	fl.mu.Lock()
	if m.AZ = az; az < 0 {
		m.AZ = fl.placeLocked()
	}
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
	fl.crash(ms...)
}

// crash is Kill without its record.
func (fl *Fleet) crash(ms ...*Member) {
	for _, m := range ms {
		m.cutOff()
	}
	for _, m := range ms {
		m.cancel()
	}
	for _, m := range ms {
		m.Err = <-m.done
		m.Ended = time.Now()
	}
}

// cutOff is the instant of a kill -9 of m (Kill, ECS's SIGKILL): cut off
// the table and the work queue, its admin port refusing, every session
// abandoned. Its goroutines end after.
func (m *Member) cutOff() {
	m.store.cut.Store(true)
	m.queue.cut.Store(true)
	_ = m.admin.Close() // its port refuses from now on
	m.w.SimCrash()
}

// Term plays a SIGTERM of m: its graceful shutdown (close, flush, release
// with the final checkpoint, LEFT), awaited.
func (fl *Fleet) Term(m *Member) {
	fl.Record.fault(Fault{Kind: "term", Workers: []string{m.ID}, At: time.Now(), Sessions: fl.ownedBy([]*Member{m})})
	m.cancel()
	m.Err = <-m.done
	m.Ended = time.Now()
}

// Close ends every worker still running as a kill -9 does (crash: no
// close, no release) and the source. The bubble ends only once every
// goroutine of the fleet has. Close comes after the judge (run): what the
// fleet does past it is in no figure, and a graceful stop of every worker
// at once is a run of its own at fleet size (1,000 workers planning moves
// to receivers that are stopping too, then 1,000,000 releases): stop 45's
// 1,000 × 1,000,000 AZ run sat at its memory limit for 20 minutes past
// its last virtual minute without writing its report.
func (fl *Fleet) Close() {
	fl.crash(fl.Running()...)
	fl.queue.Close()
	fl.src.Close()
}

// SourceOverlaps are the times two connections of one session were open at
// once, as the source saw them (feed.Stats.Overlaps).
func (fl *Fleet) SourceOverlaps() int { return fl.src.Overlaps() }

func ids(ms []*Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// workerConfig is worker id's configuration: the defaults, the fleet's
// settings, then the scenario's (Config.Worker).
func (fl *Fleet) workerConfig(id string) streamer.Config {
	cfg := streamer.DefaultConfig()
	cfg.WorkerID = id
	cfg.AdminAddr = "" // no socket: the admin server listens on the mesh (serveAdmin)
	if fl.cfg.StandbyShare > 0 {
		cfg.TenureHeader = standbyTenureHeader
	}
	if fl.cfg.Worker != nil {
		fl.cfg.Worker(&cfg)
	}
	return cfg
}
