package simddb

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/smithy-go"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/testkit/ddbrules"
)

// Operation names of the meters besides the lease.Store methods' (which
// are dynamostore's Op* names).
const (
	OpSeed   = "seed"   // Put: a whole session written as ingest seeds it
	OpIngest = "ingest" // Update, UpdateWorker: ingest's stop, start, mailbox writes
)

// Store is a lease.Store: the memory store's semantics with DynamoDB's
// costs, limits, latency and index lag. Safe for concurrent use; the
// model's state changes are serialized (latency is slept outside).
type Store struct {
	mem   *memstore.Store
	cfg   Config
	clk   clock.Clock
	table ddbrules.Table
	thr   *ddbrules.Throttler

	mu      sync.Mutex // the model: views, draws, before and after images
	views   map[string]*view
	streams map[string]uint64
	flying  map[string][2]int // calls in flight by key: [writes, reads]
	meters  *meters
	shard   atomic.Uint32
	hints   dynamostore.ReleaseHints // dynamostore's: which variant a release tries first
}

// New is an empty simulated table.
func New(cfg Config) (*Store, error) {
	for op, d := range cfg.Latency {
		if err := d.Check("simddb: latency of " + op); err != nil {
			return nil, err
		}
	}
	for ix, d := range cfg.Lag {
		if err := d.Check("simddb: lag of " + ix); err != nil {
			return nil, err
		}
	}
	if err := cfg.DefaultLag.Check("simddb: lag"); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Table == "" {
		cfg.Table = "sessions"
	}
	s := &Store{
		mem: memstore.New(), cfg: cfg, clk: cfg.Clock,
		table: ddbrules.TableOf(sessionitem.CreateTableInput(cfg.Table)),
		thr:   ddbrules.NewThrottler(cfg.Throughput),
		views: map[string]*view{}, streams: map[string]uint64{}, flying: map[string][2]int{}, meters: newMeters(),
	}
	for i := range s.table.Indexes {
		ix := &s.table.Indexes[i]
		s.views[ix.Name] = newView(ix)
	}
	return s, nil
}

// Mem is the memory store underneath (its Calls counter; its writes made
// directly bypass the model: no meters, no index views).
func (s *Store) Mem() *memstore.Store { return s.mem }

// Config is the store's configuration (defaults filled in).
func (s *Store) Config() Config { return s.cfg }

// Meter is a snapshot of the meters.
func (s *Store) Meter() Meter { return s.meters.snapshot() }

// Pending is how many entry images wait to reach each index.
func (s *Store) Pending() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for name, v := range s.views {
		out[name] = v.pendingCount()
	}
	return out
}

// LagEpisode holds index (every index when "") at least lag behind for
// dur: every write in the next dur reaches it no sooner than lag after.
func (s *Store) LagEpisode(index string, lag, dur time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	until := s.clk.Now().Add(dur)
	if index == "" {
		for _, v := range s.views {
			v.episodeLag, v.episodeUntil = lag, until
		}
		return nil
	}
	v := s.views[index]
	if v == nil {
		return fmt.Errorf("simddb: lag episode: no index %q", index)
	}
	v.episodeLag, v.episodeUntil = lag, until
	return nil
}

// HoldTable holds the table at fraction of its on-demand allowance for dur
// (ddbrules.Throttler.HoldTable).
func (s *Store) HoldTable(fraction float64, dur time.Duration) {
	s.thr.HoldTable(s.clk.Now(), s.cfg.Table, fraction, dur)
}

// HotKey makes one partition key value (a session id, "worker#" + id, an
// owner's id as a by_owner key) take fraction of its rate for dur.
func (s *Store) HotKey(value string, fraction float64, dur time.Duration) {
	s.thr.HotKey(s.clk.Now(), s.cfg.Table, value, fraction, dur)
}

// DrainKey empties the write buckets of one key value (table and index).
func (s *Store) DrainKey(value string) { s.thr.DrainKey(s.clk.Now(), s.cfg.Table, value) }

// ThrottleError is DynamoDB's answer to a request over its throughput, as
// the on-demand table answers it (ThrottlingException with its reasons).
// It is lease.ErrThrottled (errors.Is), as dynamostore maps the SDK's
// error, and a smithy.APIError with DynamoDB's code.
type ThrottleError struct {
	Reasons []ddbrules.Reason
}

func (e *ThrottleError) Error() string {
	var rs []string
	for _, r := range e.Reasons {
		rs = append(rs, r.Reason+" on "+r.Resource)
	}
	return fmt.Sprintf("%s: api error ThrottlingException: %s (%s)", lease.ErrThrottled, e.ErrorMessage(), strings.Join(rs, ", "))
}

// Unwrap makes errors.Is(err, lease.ErrThrottled) true.
func (e *ThrottleError) Unwrap() error { return lease.ErrThrottled }

// ErrorCode is DynamoDB's exception name.
func (e *ThrottleError) ErrorCode() string { return "ThrottlingException" }

// ErrorMessage is DynamoDB's message.
func (e *ThrottleError) ErrorMessage() string {
	return "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly."
}

// ErrorFault is a client fault, as DynamoDB's 400.
func (e *ThrottleError) ErrorFault() smithy.ErrorFault { return smithy.FaultClient }

var _ smithy.APIError = (*ThrottleError)(nil)

// --- draws ---

// drawLocked is one draw of d from stream name (its own sequence, seeded by the
// store's seed and the name).
func (s *Store) drawLocked(d ddbrules.Dist, name string) time.Duration {
	if d.IsZero() {
		return 0
	}
	n := s.streams[name]
	s.streams[name] = n + 1
	h := fnv.New64a()
	h.Write([]byte(name))
	return d.Draw(rand.New(rand.NewPCG(s.cfg.Seed, h.Sum64()^n*0x9e3779b97f4a7c15)))
}

func (s *Store) draw(d ddbrules.Dist, name string) time.Duration {
	if d.IsZero() {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drawLocked(d, name)
}

func (s *Store) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return clock.Sleep(ctx, s.clk, d)
}

// --- requests ---

// request is one DynamoDB request a call stands for, as billed.
type request struct {
	op      string // GetItem, BatchGetItem, Query, PutItem, UpdateItem
	key     string // the item's Pk (a table request)
	write   bool
	failed  bool // a write whose condition failed
	units   float64
	entries []ddbrules.IndexWrite // what a write writes to the indexes
	index   string                // a Query: its index and key value (canonical)
	value   string
}

func (s *Store) demand(r request) ddbrules.Demand {
	d := ddbrules.Demand{Table: s.table.Name, TableARN: s.table.ARN, Write: r.write, Units: r.units}
	if r.index != "" {
		ix := s.table.Index(r.index)
		d.Partition, d.ReadIndex, d.ReadIndexARN = r.value, ix.Name, ix.ARN
		return d
	}
	d.Partition = "S:" + r.key
	d.Index = r.entries
	return d
}

// plan collects the requests of one call.
type plan struct {
	s    *Store
	reqs []request
	// admitted runs once the attempt is admitted (not throttled): what
	// makes a built answer the caller's (query).
	admitted func()
}

// write is a write of key that turned before into after.
func (p *plan) write(op, key string, before, after ddbrules.Item) {
	p.reqs = append(p.reqs, request{op: op, key: key, write: true,
		units: ddbrules.WriteUnits(max(sizeOf(before), sizeOf(after))), entries: p.s.table.IndexWrites(before, after)})
}

// refused is a write of key whose condition failed on cur (billed at its
// size, at least 1) and dynamostore's consistent read that classifies it.
func (p *plan) refused(op, key string, cur ddbrules.Item) {
	p.reqs = append(p.reqs, request{op: op, key: key, write: true, failed: true, units: ddbrules.WriteUnits(sizeOf(cur))})
	p.get(key, cur, true)
}

// get is a GetItem (or one key of a BatchGetItem) of key that found it.
func (p *plan) get(key string, it ddbrules.Item, consistent bool) {
	p.reqs = append(p.reqs, request{op: "GetItem", key: key, units: ddbrules.ReadUnits(sizeOf(it), consistent)})
}

// query is dynamostore's paged Query of index for key value value (limit
// 0: all), over the entries the index shows; it returns the entries taken.
func (p *plan) query(index, value string, entries []ddbrules.Item, limit, have int) []ddbrules.Item {
	var taken []ddbrules.Item
	for {
		page := len(entries)
		if limit > 0 {
			page = min(page, limit-have-len(taken), 1000)
		}
		bytes, n := 0, 0
		for n < page && bytes < 1<<20 {
			bytes += sizeOf(entries[n])
			n++
		}
		p.reqs = append(p.reqs, request{op: "Query", index: index, value: value, units: ddbrules.ReadUnits(bytes, false)})
		taken = append(taken, entries[:n]...)
		entries = entries[n:]
		if len(entries) == 0 || limit > 0 && have+len(taken) >= limit {
			return taken
		}
	}
}

func sizeOf(it ddbrules.Item) int {
	if it == nil {
		return 0
	}
	return dynamostore.ItemSize(it)
}

// --- the call path ---

// image is one item a call may change: its images before and after.
type image struct {
	key           string // Pk
	session       string // a session id (the session item), or
	worker        string // a worker id
	s0, s1        *lease.Item
	w0, w1        *lease.WorkerRecord
	fleet         *fleetImage   // a fleet summary item (summary.go)
	before, after ddbrules.Item // the session's or worker's item
}

func (s *Store) snap(im *image, after bool) {
	switch {
	case im.fleet != nil:
		s.snapFleet(im, after)
	case im.session != "":
		it := s.mem.Session(im.session)
		if after {
			im.s1, im.after = it, sessionItem(it)
		} else {
			im.s0, im.before = it, sessionItem(it)
		}
	default:
		r := s.mem.Worker(im.worker)
		if after {
			im.w1, im.after = r, workerItem(r)
		} else {
			im.w0, im.before = r, workerItem(r)
		}
	}
}

func (s *Store) restore(im *image) {
	if im.fleet != nil {
		s.restoreFleet(im)
		return
	}
	if im.session != "" {
		s.mem.RestoreSession(im.session, im.s0)
		return
	}
	s.mem.RestoreWorker(im.worker, im.w0)
}

func sessionImage(id string) *image { return &image{key: id, session: id} }
func workerImage(id string) *image  { return &image{key: schema.WorkerKey(id), worker: id} }

// call runs one lease.Store call on key: its attempts (Config.Retry), each
// half the first request's latency, then under the model's lock the
// images before, apply (the memory store's rules), the images after, the
// requests the call stands for (bill), and admission; an attempt throttled
// is undone, and the call's last is answered with a ThrottleError. Then
// the rest of the latency. harness marks the harness's own writes: metered
// and charged, never throttled.
//
// bill runs on every attempt: a query builds its answer there, from the
// index's view as it is at that attempt, through query, which hands the
// caller only the admitted attempt's answer, as a retried request gets a
// new answer. Queries that appended to the caller's answer in bill
// answered a throttled attempt's entries again: a listing named every
// alive worker twice at 1,000 × 1,000,000, and a takeover's plan over it
// handed out more sessions than the dead worker held (the worker panicked;
// workers/streamer/takeover.go).
func (s *Store) call(ctx context.Context, op, first, key string, im *image, apply func() error, bill func(p *plan, now time.Time, err error), harness bool) error {
	streamKey := op + "\x00" + key // the call's streams: per operation and key
	kind := 1                      // a read
	if im != nil {
		kind = 0
	}
	s.mu.Lock()
	f := s.flying[key]
	if f[0] > 0 || kind == 0 && f[1] > 0 { // a write met, or met a read
		s.meters.contend()
	}
	f[kind]++
	s.flying[key] = f
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		f := s.flying[key]
		if f[kind]--; f == [2]int{} {
			delete(s.flying, key)
		} else {
			s.flying[key] = f
		}
		s.mu.Unlock()
	}()
	attempts, maxBackoff := s.cfg.Retry.MaxAttempts, s.cfg.Retry.MaxBackoff
	if dynamostore.Liveness(op) {
		attempts, maxBackoff = s.cfg.Retry.LivenessMaxAttempts, s.cfg.Retry.LivenessMaxBackoff
	}
	for attempt := 1; ; attempt++ {
		throttled, err := s.attempt(ctx, op, first, streamKey, im, apply, bill, harness)
		if !throttled || attempt >= attempts {
			return err
		}
		if serr := s.sleep(ctx, s.backoff(streamKey, attempt, maxBackoff)); serr != nil {
			return err
		}
	}
}

// query runs a Query call (a read of an index's lagging view) whose
// answer build makes while it bills the pages read: each attempt builds
// its own, and the caller gets the admitted attempt's, never a throttled
// one's (TestThrottledQueryAnswersOnce).
func query[T any](s *Store, ctx context.Context, op, key string, build func(p *plan, now time.Time) T) (T, error) {
	var answer T
	err := s.call(ctx, op, "Query", key, nil, func() error { return ctx.Err() }, func(p *plan, now time.Time, _ error) {
		built := build(p, now)
		p.admitted = func() { answer = built }
	}, false)
	return answer, err
}

// backoff is the SDK's wait before retry attempt+1 (aws/retry's
// ExponentialJitterBackoff: a uniform draw from [0, 2^attempt s), at most
// maxBackoff), from the call's stream.
func (s *Store) backoff(streamKey string, attempt int, maxBackoff time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.drawLocked(ddbrules.Dist{SpikeShare: 1, SpikeMax: time.Duration(1<<min(attempt, 30)) * time.Second}, "retry\x00"+streamKey)
	if maxBackoff > 0 {
		d = min(d, maxBackoff)
	}
	return d
}

// attempt is one attempt of a call (see call); throttled: it was answered
// with a ThrottleError.
func (s *Store) attempt(ctx context.Context, op, first, streamKey string, im *image, apply func() error, bill func(p *plan, now time.Time, err error), harness bool) (throttled bool, err error) {
	if err = ctx.Err(); err != nil {
		return false, err
	}
	lat := s.draw(s.cfg.Latency[first], streamKey)
	if err = s.sleep(ctx, lat/2); err != nil {
		return false, err
	}
	s.mu.Lock()
	now := s.clk.Now()
	if im != nil {
		s.snap(im, false)
	}
	err = apply()
	if im != nil {
		s.snap(im, true)
	}
	p := &plan{s: s}
	bill(p, now, err)
	demands := make([]ddbrules.Demand, len(p.reqs))
	for i, r := range p.reqs {
		demands[i] = s.demand(r)
	}
	if harness {
		for _, d := range demands {
			s.thr.Charge(now, d)
		}
	} else if why := s.thr.Admit(now, demands...); why != nil {
		if im != nil {
			s.restore(im)
		}
		var reasons []string
		for _, r := range why {
			reasons = append(reasons, r.Reason)
			if r.Reason == ddbrules.IndexWriteKeyRange {
				for _, v := range s.views {
					if v.ix.ARN == r.Resource {
						v.throttledAt = now
					}
				}
			}
		}
		s.meters.throttle(op, reasons)
		s.mu.Unlock()
		if err := s.sleep(ctx, lat-lat/2); err != nil {
			return false, err
		}
		return true, &ThrottleError{Reasons: why}
	}
	s.meters.record(now, op, p.reqs)
	if p.admitted != nil {
		p.admitted()
	}
	if im != nil {
		s.propagateLocked(now, im)
	}
	rest := lat - lat/2 // then the call's other requests, one after another
	for i, r := range p.reqs {
		if i > 0 {
			rest += s.drawLocked(s.cfg.Latency[r.op], streamKey)
		}
	}
	s.mu.Unlock()
	if serr := s.sleep(ctx, rest); serr != nil {
		return false, serr // applied, and the caller gave up: an ambiguous answer
	}
	return false, err
}

// propagateLocked sends the entries im's write changed to each index's
// view, due after that index's lag.
func (s *Store) propagateLocked(now time.Time, im *image) {
	s.propagateItemLocked(now, im.key, im.before, im.after)
}

func (s *Store) propagateItemLocked(now time.Time, pk string, before, after ddbrules.Item) {
	for i := range s.table.Indexes {
		ix := &s.table.Indexes[i]
		if !ix.Global {
			continue
		}
		eb, _ := s.table.Entry(ix, before)
		ea, va := s.table.Entry(ix, after)
		if eb == nil && ea == nil || eb != nil && ea != nil && ddbrules.SameItem(eb, ea) {
			continue
		}
		v := s.views[ix.Name]
		lag := s.drawLocked(s.cfg.lagOf(ix.Name), "lag\x00"+ix.Name+"\x00"+pk)
		if now.Before(v.episodeUntil) {
			lag = max(lag, v.episodeLag)
		}
		if !v.throttledAt.IsZero() && now.Sub(v.throttledAt) < s.cfg.ThrottledFor {
			lag += s.cfg.ThrottledLag
		}
		v.send(pk, ea, va, now.Add(lag))
	}
}
