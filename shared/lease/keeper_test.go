package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func started(id string) lease.Item {
	return lease.Item{ConnectionID: id, DesiredState: schema.StateStarted, Spec: `{"ws_url":"wss://x.invalid/` + id + `"}`, Generation: 1, LastSeq: lease.NoSeq}
}

// recorder is an Observer that remembers what it heard.
type recorder struct {
	mu     sync.Mutex
	ended  map[string]error
	mail   []string
	died   []string
	hbErrs int
}

func (r *recorder) Heartbeat(_ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.hbErrs++
	}
}

func (r *recorder) Ended(h *lease.Held, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended == nil {
		r.ended = map[string]error{}
	}
	r.ended[h.ID()] = err
}

func (r *recorder) Mailbox(ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mail = append(r.mail, ids...)
}

func (r *recorder) WorkerDied(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.died = append(r.died, id)
}

// rig is a fleet of Keepers on one memstore and one fake clock (each
// Keeper's monotonic clock; the tests step every loop by hand).
type rig struct {
	t     *testing.T
	store *memstore.Store
	clk   *clock.Fake
	ctx   context.Context
}

func newRig(t *testing.T, items ...lease.Item) *rig {
	s := memstore.New()
	for _, it := range items {
		s.Put(it)
	}
	return &rig{t: t, store: s, clk: clock.NewFake(t0), ctx: context.Background()}
}

func (r *rig) keeper(id string) (*lease.Keeper, *recorder) {
	r.t.Helper()
	return r.keeperWith(id, nil)
}

// keeperWith is keeper with tweak applied to its default configuration.
func (r *rig) keeperWith(id string, tweak func(*lease.Config)) (*lease.Keeper, *recorder) {
	r.t.Helper()
	obs := &recorder{}
	cfg := lease.DefaultConfig(id)
	if tweak != nil {
		tweak(&cfg)
	}
	k, err := lease.NewKeeper(r.store, r.clk, cfg, obs, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := k.Register(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	return k, obs
}

func (r *rig) acquire(k *lease.Keeper, id string) *lease.Held {
	r.t.Helper()
	h, err := k.Acquire(r.ctx, id, nil)
	if err != nil {
		r.t.Fatalf("acquire %s: %v", id, err)
	}
	return h
}

// step advances the clock by d and runs one heartbeat and one tick of each
// live keeper, and one watch pass of each watcher.
func (r *rig) step(d time.Duration, live []*lease.Keeper, watchers []*lease.Keeper) {
	r.clk.Advance(d)
	for _, k := range live {
		k.HeartbeatNow(r.ctx)
		_ = k.TickNow(r.ctx)
	}
	for _, w := range watchers {
		w.WatchNow(r.ctx)
	}
}

func (r *rig) refresh(ks ...*lease.Keeper) {
	r.t.Helper()
	for _, k := range ks {
		if err := k.RefreshWorkers(r.ctx); err != nil {
			r.t.Fatal(err)
		}
	}
}

var errUnreachable = errors.New("engine unreachable")

// With the engine unreachable, every session is fenced at the worker's
// deadline (last successful heartbeat's send time + TTL - margin), not a
// tick later, and the fenced worker writes nothing afterwards.
func TestEngineUnreachableFencesEverySessionAtTheDeadline(t *testing.T) {
	r := newRig(t, started("a"), started("b"), started("c"))
	k, obs := r.keeper("w1")
	cfg := k.Config()
	var hs []*lease.Held
	for _, id := range []string{"a", "b", "c"} {
		hs = append(hs, r.acquire(k, id))
	}
	for _, h := range hs {
		h.Observe(5)
	}
	r.step(cfg.HeartbeatEvery, []*lease.Keeper{k}, nil) // one good heartbeat
	deadline := r.clk.Now().Add(cfg.TTL - cfg.SafetyMargin)
	if got := k.TrustedUntil(); !got.Equal(deadline) {
		t.Fatalf("trusted until %s, want %s", got, deadline)
	}
	calls := r.store.Calls.Load()
	r.store.SetFail(func(string) (error, bool) { return errUnreachable, false })
	for r.clk.Now().Add(cfg.HeartbeatEvery).Before(deadline) {
		r.step(cfg.HeartbeatEvery, []*lease.Keeper{k}, nil)
		for _, h := range hs {
			if !h.Valid() {
				t.Fatalf("%s fenced at %s, before the deadline %s", h.ID(), r.clk.Now(), deadline)
			}
		}
	}
	r.clk.Advance(deadline.Sub(r.clk.Now()) - time.Millisecond)
	for _, h := range hs {
		if !h.Valid() {
			t.Fatalf("%s fenced 1 ms before the deadline", h.ID())
		}
		if got := h.Remaining(); got != time.Millisecond { // what a sink request may still take
			t.Fatalf("%s: remaining %s 1 ms before the deadline", h.ID(), got)
		}
	}
	r.clk.Advance(time.Millisecond)
	for _, h := range hs {
		if h.Valid() || h.Remaining() != 0 { // Valid reads the clock: no tick needed
			t.Fatalf("%s still valid at the deadline (remaining %s)", h.ID(), h.Remaining())
		}
	}
	_ = k.TickNow(r.ctx)
	for _, h := range hs {
		select {
		case <-h.Done():
		default:
			t.Fatalf("%s not ended by the tick after the deadline", h.ID())
		}
		if !errors.Is(obs.ended[h.ID()], lease.ErrUntrusted) {
			t.Fatalf("%s ended with %v, want ErrUntrusted", h.ID(), obs.ended[h.ID()])
		}
	}
	r.store.SetFail(nil)
	before := r.store.Calls.Load()
	if err := k.Release(r.ctx, hs[0]); !errors.Is(err, lease.ErrUntrusted) {
		t.Fatalf("release by a fenced worker: %v", err)
	}
	hs[1].Observe(6) // something new to checkpoint
	if err := k.Checkpoint(r.ctx, hs[1]); !errors.Is(err, lease.ErrUntrusted) {
		t.Fatalf("checkpoint by a fenced worker: %v", err)
	}
	if _, err := k.Acquire(r.ctx, "c", nil); !errors.Is(err, lease.ErrUntrusted) {
		t.Fatalf("acquire by a fenced worker: %v", err)
	}
	if n := r.store.Calls.Load() - before; n != 0 {
		t.Fatalf("a fenced worker made %d store calls", n)
	}
	_ = calls
}

// A worker frozen (SIGSTOP) long enough to be declared dead delivers nothing
// when it wakes: its sessions are invalid before it runs a single step, its
// next heartbeat learns it is DEAD, and its writes fail; the watcher took its
// session over with a new epoch.
func TestWorkerWokenAfterDeathDeliversNothing(t *testing.T) {
	r := newRig(t, started("a"))
	a, _ := r.keeper("wa")
	b, bobs := r.keeper("wb")
	ha := r.acquire(a, "a")
	ha.Observe(7)
	if err := a.Checkpoint(r.ctx, ha); err != nil {
		t.Fatal(err)
	}
	r.refresh(a, b)
	if got := b.Targets(); len(got) != 1 || got[0] != "wa" {
		t.Fatalf("wb watches %v, want [wa]", got)
	}
	cfg := a.Config()
	// wa freezes now: only wb runs.
	for i := 0; bobs.diedCount() == 0; i++ {
		if i > 100 {
			t.Fatal("wa never declared dead")
		}
		r.step(cfg.WatchEvery(), []*lease.Keeper{b}, []*lease.Keeper{b})
	}
	cands, err := b.TakeoverOf(r.ctx, "wa")
	if err != nil || len(cands) != 1 || cands[0].Prev == nil || cands[0].Prev.Epoch != ha.Epoch() {
		t.Fatalf("takeover candidates %+v, %v", cands, err)
	}
	hb, err := b.Acquire(r.ctx, "a", cands[0].Prev)
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if hb.Epoch() != ha.Epoch()+1 || hb.Item().LastSeq != 7 {
		t.Fatalf("new tenure epoch %d last_seq %d, want %d and 7", hb.Epoch(), hb.Item().LastSeq, ha.Epoch()+1)
	}
	// wa wakes.
	if ha.Valid() {
		t.Fatal("wa's session is valid after waking from a freeze longer than its TTL")
	}
	a.HeartbeatNow(r.ctx)
	if err := a.TickNow(r.ctx); !errors.Is(err, lease.ErrWorkerDead) {
		t.Fatalf("tick after the heartbeat of a dead worker: %v, want ErrWorkerDead", err)
	}
	if err := a.Release(r.ctx, ha); !errors.Is(err, lease.ErrWorkerDead) {
		t.Fatalf("release by a dead worker: %v", err)
	}
	// At the store too: the dead worker's tenure is fenced out.
	if err := r.store.Checkpoint(r.ctx, ha.Token(), 9); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("store checkpoint by the dead tenure: %v", err)
	}
	if err := r.store.Release(r.ctx, ha.Token(), 9); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("store release by the dead tenure: %v", err)
	}
	if !hb.Valid() {
		t.Fatal("the new owner's tenure is not valid")
	}
}

func (r *recorder) diedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.died)
}

// Death needs the counter unchanged for a whole TTL on the watcher's clock:
// a heartbeating worker is never declared dead, and one that stops is
// declared at the first watch pass at or after (first receipt of its last
// counter) + TTL, not before.
func TestDeathOnlyAfterTheCounterStoodStillForTheTTL(t *testing.T) {
	r := newRig(t)
	a, _ := r.keeper("wa")
	b, bobs := r.keeper("wb")
	r.refresh(a, b)
	cfg := a.Config()
	for range 40 { // 20 s of normal life
		r.step(cfg.WatchEvery(), []*lease.Keeper{a, b}, []*lease.Keeper{b})
	}
	if n := bobs.diedCount(); n != 0 {
		t.Fatalf("a heartbeating worker was declared dead %d times", n)
	}
	// wa's last heartbeat was in the last step; wb received it in the same
	// step's watch pass (at this instant).
	firstSeen := r.clk.Now()
	for r.clk.Now().Before(firstSeen.Add(cfg.TTL)) {
		r.step(cfg.WatchEvery()/5, []*lease.Keeper{b}, []*lease.Keeper{b})
		if bobs.diedCount() != 0 && r.clk.Now().Before(firstSeen.Add(cfg.TTL)) {
			t.Fatalf("declared dead %s after the counter stopped, before the TTL %s", r.clk.Now().Sub(firstSeen), cfg.TTL)
		}
	}
	if bobs.diedCount() != 1 {
		t.Fatalf("not declared dead at first receipt + TTL (died %v)", bobs.died)
	}
	rec, err := r.store.GetWorker(r.ctx, "wa")
	if err != nil || rec.State != schema.WorkerDead || rec.DeclaredBy != "wb" || rec.List != schema.WorkerListGone {
		t.Fatalf("record after death: %+v, %v", rec, err)
	}
}

// A watcher with a shorter TTL than the watched worker's waits the worker's.
func TestWatcherWaitsTheLongerTTL(t *testing.T) {
	if got := lease.DeathAllowedAt(t0, 5*time.Second, 20*time.Second); !got.Equal(t0.Add(20 * time.Second)) {
		t.Fatalf("DeathAllowedAt = %s", got)
	}
	if got := lease.DeathAllowedAt(t0, 20*time.Second, 5*time.Second); !got.Equal(t0.Add(20 * time.Second)) {
		t.Fatalf("DeathAllowedAt = %s", got)
	}
}

// A heartbeat whose reply is lost after it was applied is followed by one
// with a new counter, which succeeds: liveness continues (the failure mode of
// dynamolock #280 was a retry refused by its own first attempt).
func TestAmbiguousHeartbeatThenRetryKeepsLiveness(t *testing.T) {
	r := newRig(t)
	k, obs := r.keeper("w1")
	cfg := k.Config()
	r.store.SetFail(func(op string) (error, bool) {
		if op == "heartbeat" {
			return context.DeadlineExceeded, true
		}
		return nil, false
	})
	r.step(cfg.HeartbeatEvery, []*lease.Keeper{k}, nil)
	r.store.SetFail(nil)
	rec1, _ := r.store.GetWorker(r.ctx, "w1")
	r.step(cfg.HeartbeatEvery, []*lease.Keeper{k}, nil)
	rec2, _ := r.store.GetWorker(r.ctx, "w1")
	if obs.hbErrs != 1 || rec1.HeartbeatSeq != 1 || rec2.HeartbeatSeq != 2 || rec2.State != schema.WorkerAlive {
		t.Fatalf("errors %d, counters %d then %d, state %s", obs.hbErrs, rec1.HeartbeatSeq, rec2.HeartbeatSeq, rec2.State)
	}
	if want := r.clk.Now().Add(cfg.TTL - cfg.SafetyMargin); !k.TrustedUntil().Equal(want) {
		t.Fatalf("trust not extended by the retry: %s, want %s", k.TrustedUntil(), want)
	}
}

// Mailbox entries are handed over once, and removed from the record by the
// heartbeat after the worker acked them.
func TestMailboxHandedOverOnceAndAckedByTheNextHeartbeat(t *testing.T) {
	r := newRig(t)
	k, obs := r.keeper("w1")
	cfg := k.Config()
	r.store.UpdateWorker("w1", func(rec *lease.WorkerRecord) { rec.Mailbox = append(rec.Mailbox, "s1", "s2") })
	r.step(cfg.HeartbeatEvery, []*lease.Keeper{k}, nil)
	r.step(cfg.HeartbeatEvery, []*lease.Keeper{k}, nil)
	if fmt.Sprint(obs.mail) != "[s1 s2]" {
		t.Fatalf("mailbox handed over %v, want [s1 s2] once", obs.mail)
	}
	k.Ack("s1")
	r.step(cfg.HeartbeatEvery, []*lease.Keeper{k}, nil)
	rec, _ := r.store.GetWorker(r.ctx, "w1")
	if fmt.Sprint(rec.Mailbox) != "[s2]" {
		t.Fatalf("mailbox after ack of s1: %v", rec.Mailbox)
	}
}

// ackRecorder records the acks each heartbeat carries.
type ackRecorder struct {
	lease.Store
	mu   sync.Mutex
	acks [][]string
}

func (a *ackRecorder) Heartbeat(ctx context.Context, id string, epoch int64, hb lease.Heartbeat) (lease.WorkerRecord, error) {
	a.mu.Lock()
	a.acks = append(a.acks, hb.Ack)
	a.mu.Unlock()
	return a.Store.Heartbeat(ctx, id, epoch, hb)
}

// An entry acked twice before the next heartbeat (the mailbox's re-read and
// an audit's raced) goes out once: a set naming it twice is an invalid
// request on DynamoDB, and every later heartbeat would carry it again.
func TestMailboxEntryAckedTwiceIsSentOnce(t *testing.T) {
	r := newRig(t)
	store := &ackRecorder{Store: r.store}
	k, err := lease.NewKeeper(store, r.clk, lease.DefaultConfig("w1"), &recorder{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.store.UpdateWorker("w1", func(rec *lease.WorkerRecord) { rec.Mailbox = append(rec.Mailbox, "s1") })
	k.HeartbeatNow(r.ctx)
	k.Ack("s1")
	k.Ack("s1")
	k.HeartbeatNow(r.ctx)
	store.mu.Lock()
	last := store.acks[len(store.acks)-1]
	store.mu.Unlock()
	if fmt.Sprint(last) != "[s1]" {
		t.Fatalf("heartbeat acks %v, want [s1]", last)
	}
	if rec, _ := r.store.GetWorker(r.ctx, "w1"); len(rec.Mailbox) != 0 {
		t.Fatalf("mailbox after the ack: %v", rec.Mailbox)
	}
}

// Checkpoints are written only when last_seq advanced, once per interval: an
// idle session costs nothing.
func TestCheckpointOnlyWhenAdvanced(t *testing.T) {
	r := newRig(t, started("a"))
	k, _ := r.keeper("w1")
	h := r.acquire(k, "a")
	var writes int
	r.store.SetFail(func(op string) (error, bool) {
		if op == "checkpoint" {
			writes++
		}
		return nil, false
	})
	cfg := k.Config()
	for range 600 { // 10 idle minutes
		r.step(cfg.HeartbeatEvery, []*lease.Keeper{k}, nil)
	}
	if writes != 0 {
		t.Fatalf("%d checkpoints of an idle session", writes)
	}
	for i := range 600 { // 10 minutes at 1 msg/s
		h.Observe(int64(i))
		r.step(cfg.HeartbeatEvery, []*lease.Keeper{k}, nil)
	}
	if writes < 9 || writes > 11 {
		t.Fatalf("%d checkpoints in 10 busy minutes, want about 10", writes)
	}
	it, _ := r.store.Get(r.ctx, "a")
	if it.LastSeq < 540 {
		t.Fatalf("stored last_seq %d", it.LastSeq)
	}
}

// A session of a live worker cannot be taken; once its worker is seen not
// alive (here: it left without releasing), an acquire takes it over with a
// new epoch.
func TestTakeoverOnlyFromAWorkerSeenNotAlive(t *testing.T) {
	r := newRig(t, started("a"))
	a, _ := r.keeper("wa")
	b, _ := r.keeper("wb")
	ha := r.acquire(a, "a")
	_, err := b.Acquire(r.ctx, "a", nil)
	var held *lease.HeldError
	if !errors.As(err, &held) || held.Current.Owner != "wa" {
		t.Fatalf("acquire of a live worker's session: %v", err)
	}
	// wa leaves without releasing; wb's view of wa (read at the failed
	// acquire) is kept for one heartbeat period.
	if err := a.Leave(r.ctx); err != nil {
		t.Fatal(err)
	}
	if ha.Valid() {
		t.Fatal("a worker that left still trusts its session")
	}
	if _, err := b.Acquire(r.ctx, "a", nil); !errors.As(err, &held) {
		t.Fatalf("acquire within the cached view of wa: %v", err)
	}
	r.clk.Advance(a.Config().HeartbeatEvery)
	hb, err := b.Acquire(r.ctx, "a", nil)
	if err != nil {
		t.Fatalf("takeover from a worker that left: %v", err)
	}
	if hb.Epoch() != ha.Epoch()+1 {
		t.Fatalf("epoch %d after %d", hb.Epoch(), ha.Epoch())
	}
}

// A released session is unowned again and listed for anyone; a session whose
// owner left while owning it is listed with the tenure to take over.
func TestOrphansListsUnownedAndGoneWorkersSessions(t *testing.T) {
	r := newRig(t, started("a"), started("b"), started("c"))
	a, _ := r.keeper("wa")
	b, _ := r.keeper("wb")
	r.acquire(a, "a")
	hb := r.acquire(a, "b")
	if err := a.Release(r.ctx, hb); err != nil {
		t.Fatal(err)
	}
	if err := a.Leave(r.ctx); err != nil {
		t.Fatal(err)
	}
	cands, err := b.Orphans(r.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*lease.Token{}
	for _, c := range cands {
		got[c.ConnectionID] = c.Prev
	}
	if len(got) != 3 || got["b"] != nil || got["c"] != nil || got["a"] == nil || got["a"].Owner != "wa" {
		t.Fatalf("orphans %+v", cands)
	}
	for _, c := range cands {
		if _, err := b.Acquire(r.ctx, c.ConnectionID, c.Prev); err != nil {
			t.Fatalf("acquire %s: %v", c.ConnectionID, err)
		}
	}
	// wa owns nothing now, but an empty by_owner answer proves it only
	// IndexLagBound after wb first saw wa gone: the record stays GONE.
	if _, err := b.Orphans(r.ctx, 10); err != nil {
		t.Fatal(err)
	}
	if rec, _ := r.store.GetWorker(r.ctx, "wa"); rec.List != schema.WorkerListGone {
		t.Fatalf("wa within the index lag bound of leaving: %+v", rec)
	}
	r.clk.Advance(b.Config().IndexLagBound)
	if _, err := b.Orphans(r.ctx, 10); err != nil {
		t.Fatal(err)
	}
	rec, _ := r.store.GetWorker(r.ctx, "wa")
	if rec.List != schema.WorkerListDone || rec.State != schema.WorkerLeft {
		t.Fatalf("wa after its sessions moved and the bound passed: %+v", rec)
	}
}

// Rendezvous watching: every worker is watched by Watchers others (all of
// them when the fleet is smaller), every worker computes the same answer,
// and a worker joining moves few assignments.
func TestWatchersByRendezvous(t *testing.T) {
	var alive []string
	for i := range 50 {
		alive = append(alive, fmt.Sprintf("w%02d", i))
	}
	load := map[string]int{}
	for _, target := range alive {
		ws := lease.Watchers(target, alive, 2)
		if len(ws) != 2 || ws[0] == target || ws[1] == target || ws[0] == ws[1] {
			t.Fatalf("watchers of %s: %v", target, ws)
		}
		for _, w := range ws {
			load[w]++
		}
	}
	total := 0
	for _, w := range alive {
		total += len(lease.Targets(w, alive, 2))
		if load[w] > 10 {
			t.Fatalf("%s watches %d workers", w, load[w])
		}
	}
	if total != 100 {
		t.Fatalf("targets sum to %d, want 100", total)
	}
	if ws := lease.Watchers("a", []string{"a", "b"}, 2); fmt.Sprint(ws) != "[b]" {
		t.Fatalf("2-worker fleet: %v", ws)
	}
	moved := 0
	grown := append(append([]string(nil), alive...), "w99")
	for _, target := range alive {
		if fmt.Sprint(lease.Watchers(target, alive, 2)) != fmt.Sprint(lease.Watchers(target, grown, 2)) {
			moved++
		}
	}
	if moved > 10 {
		t.Fatalf("a join changed the watchers of %d of 50 workers", moved)
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	if err := lease.DefaultConfig("w").Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	c := lease.DefaultConfig("")
	c.SafetyMargin = c.Tick
	c.MaxConcurrentWrites = 0
	c.UnownedGrace = -time.Second
	err := c.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"owner is empty", "SafetyMargin", "MaxConcurrentWrites", "UnownedGrace"} {
		if !contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	c = lease.DefaultConfig("w")
	c.TTL = 3 * time.Second // 3 s - 2 s margin < 1 s heartbeat + 2 s RPC timeout
	if c.Validate() == nil {
		t.Fatal("TTL with no room for a heartbeat accepted")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A table outage longer than the TTL stops every heartbeat and every
// watcher's reads alike; when it ends, a watcher's wait starts again from
// its first answered read, so the workers that heartbeat again are not
// declared dead (they had fenced themselves; nobody is lost for nothing).
func TestOutageLongerThanTheTTLDeclaresNobodyDead(t *testing.T) {
	r := newRig(t)
	a, _ := r.keeper("wa")
	b, bobs := r.keeper("wb")
	r.refresh(a, b)
	cfg := a.Config()
	for range 4 {
		r.step(cfg.WatchEvery(), []*lease.Keeper{a, b}, []*lease.Keeper{a, b})
	}
	r.store.SetFail(func(string) (error, bool) { return errUnreachable, false })
	for range int(2 * cfg.TTL / cfg.WatchEvery()) {
		r.step(cfg.WatchEvery(), []*lease.Keeper{a, b}, []*lease.Keeper{a, b})
	}
	if a.Trusted() || b.Trusted() {
		t.Fatal("a worker trusts its sessions after an outage longer than its TTL")
	}
	r.store.SetFail(nil)
	// The watchers may read before the first heartbeats after the outage.
	for range 8 {
		r.clk.Advance(cfg.WatchEvery())
		a.WatchNow(r.ctx)
		b.WatchNow(r.ctx)
		a.HeartbeatNow(r.ctx)
		b.HeartbeatNow(r.ctx)
	}
	if n := bobs.diedCount(); n != 0 {
		t.Fatalf("%d workers declared dead after the outage", n)
	}
	if !a.Trusted() || !b.Trusted() {
		t.Fatal("the workers do not trust themselves again after the outage")
	}
}

// A tenure given to a receiver is taken by it while the giver is alive,
// resuming after the giver's final checkpoint; nobody else can take it
// with what the giver sent (the secret is of that tenure only), and the
// giver's fallback release then loses.
func TestGivenTenureTakenByItsReceiver(t *testing.T) {
	r := newRig(t, started("a"))
	w1, _ := r.keeper("w1")
	w2, _ := r.keeper("w2")
	w3, _ := r.keeper("w3")
	h := r.acquire(w1, "a")
	h.Observe(7)
	g, err := w1.Give(h)
	if err != nil {
		t.Fatal(err)
	}
	if h.Err() == nil {
		t.Fatal("the given tenure still held by its giver")
	}
	got, err := w2.AcquireGiven(r.ctx, "a", g)
	if err != nil || got.Epoch() != 2 || got.LastSeq() != 7 {
		t.Fatalf("the receiver's acquire of the given tenure: %v (epoch %d, last seq %d)", err, got.Epoch(), got.LastSeq())
	}
	if _, err := w3.AcquireGiven(r.ctx, "a", g); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("another worker with the giver's message: %v, want ErrHeld", err)
	}
	forged := lease.Given{Token: lease.Token{ConnectionID: "a", Owner: "w2", Epoch: 2}, Seq: 7, Secret: g.Secret}
	if _, err := w3.AcquireGiven(r.ctx, "a", forged); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("the receiver's live tenure named with the giver's secret: %v, want ErrHeld", err)
	}
	if err := w1.HandoffGiven(r.ctx, g, "w2"); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("the giver's fallback after the receiver took it: %v, want ErrLeaseLost", err)
	}
}

// A directed hand-off keeps the session for its receiver: another worker
// takes it only once the reservation is older than HandoffBound (its own
// wall clock), or at once when the receiver is seen draining or not alive.
func TestHandoffReservationBound(t *testing.T) {
	r := newRig(t, started("a"), started("b"), started("c"))
	w1, _ := r.keeper("w1")
	w2, _ := r.keeper("w2")
	w3, _ := r.keeper("w3")
	cfg := w1.Config()
	for _, id := range []string{"a", "b", "c"} {
		g, err := w1.Give(r.acquire(w1, id))
		if err != nil {
			t.Fatal(err)
		}
		if err := w1.HandoffGiven(r.ctx, g, "w2"); err != nil { // the receiver did not take it
			t.Fatal(err)
		}
	}
	_, err := w3.Acquire(r.ctx, "a", nil)
	var re *lease.ReservedError
	if !errors.As(err, &re) || re.To != "w2" {
		t.Fatalf("acquire of a reserved session within the bound: %v", err)
	}
	r.clk.Advance(cfg.HandoffBound)
	for _, k := range []*lease.Keeper{w1, w2, w3} { // keep everyone alive
		k.HeartbeatNow(r.ctx)
	}
	if h, err := w3.Acquire(r.ctx, "a", nil); err != nil || h.Epoch() != 2 {
		t.Fatalf("acquire after the bound: %v", err)
	}
	// c: its receiver is shutting down (draining: it claims nothing more);
	// w3 need not wait for the bound.
	r.store.Update("c", func(it *lease.Item) { it.HandoffAtMs = r.clk.Now().UnixMilli() })
	if _, err := w3.Acquire(r.ctx, "c", nil); !errors.As(err, &re) {
		t.Fatalf("acquire of a session reserved for a running receiver: %v", err)
	}
	r.store.UpdateWorker("w2", func(rec *lease.WorkerRecord) { rec.Draining = true })
	if h, err := w3.Acquire(r.ctx, "c", nil); err != nil || h.Epoch() != 2 {
		t.Fatalf("acquire of a session reserved for a draining receiver: %v", err)
	}
	// b: its receiver leaves; w3 need not wait for the bound (its view of
	// w2 is refreshed after a heartbeat period).
	if _, err := r.store.Get(r.ctx, "b"); err != nil {
		t.Fatal(err)
	}
	r.store.Update("b", func(it *lease.Item) { it.HandoffAtMs = r.clk.Now().UnixMilli() })
	if err := w2.Leave(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(cfg.HeartbeatEvery)
	w3.HeartbeatNow(r.ctx)
	if _, err := w3.Acquire(r.ctx, "b", nil); err != nil {
		t.Fatalf("acquire of a session reserved for a worker that left: %v", err)
	}
}

// A session that has no checkpoint yet is checkpointed as soon as a message
// was delivered (a new owner could not ask its source to resume); one that
// has a checkpoint waits an interval.
func TestFirstCheckpointOfASessionWithoutOne(t *testing.T) {
	withCkpt := started("b")
	withCkpt.LastSeq = 3
	r := newRig(t, started("a"), withCkpt)
	k, _ := r.keeper("w1")
	ha, hb := r.acquire(k, "a"), r.acquire(k, "b")
	ha.Observe(1)
	hb.Observe(4)
	r.step(k.Config().Tick, []*lease.Keeper{k}, nil)
	if got, _ := r.store.Get(r.ctx, "a"); got.LastSeq != 1 {
		t.Fatalf("a's checkpoint after its first message: %d, want 1", got.LastSeq)
	}
	if got, _ := r.store.Get(r.ctx, "b"); got.LastSeq != 3 {
		t.Fatalf("b checkpointed before its interval: %d, want 3", got.LastSeq)
	}
}

// checkpointed is a started session whose checkpoint is at seq.
func checkpointed(id string, seq int64) lease.Item {
	it := started(id)
	it.LastSeq = seq
	return it
}

// A session that has no checkpoint does not yield to a throttling store as
// the periodic checkpoints do (a crash before its first one loses what the
// source sends until the next owner dials, since that owner cannot ask the
// source to resume): its throttled checkpoint is retried at RetryEvery,
// doubling up to FirstCheckpointRetryMax of it, and lands within that of the
// throttling's end, while a session with a checkpoint still waits out
// CheckpointHold. Found by the fleet simulator (crash-throttled: 6,453 seqs
// lost when the busiest worker died 20 s after its sessions' first
// checkpoints were throttled and held for a minute).
func TestFirstCheckpointDoesNotYieldToThrottling(t *testing.T) {
	r := newRig(t, started("a"), checkpointed("b", 0))
	k, _ := r.keeper("w1")
	cfg := k.Config()
	ha, hb := r.acquire(k, "a"), r.acquire(k, "b")
	throttled := true
	var ckpts atomic.Int64
	r.store.SetFail(func(op string) (error, bool) {
		if op == "checkpoint" {
			ckpts.Add(1)
			if throttled {
				return fmt.Errorf("checkpoint: %w", lease.ErrThrottled), false
			}
		}
		return nil, false
	})
	seq := int64(0)
	run := func(d time.Duration) {
		for end := r.clk.Now().Add(d); r.clk.Now().Before(end); {
			seq++
			ha.Observe(seq)
			hb.Observe(seq)
			r.step(cfg.Tick, []*lease.Keeper{k}, nil)
		}
	}
	// Two checkpoint intervals of throttling: b's periodic checkpoint is
	// throttled once (at one interval) and then yields; a retries, backing
	// off to FirstCheckpointRetryMax × RetryEvery.
	run(2 * cfg.CheckpointEvery)
	ceiling := time.Duration(lease.FirstCheckpointRetryMax) * cfg.RetryEvery
	if n, most := ckpts.Load(), int64(2*cfg.CheckpointEvery/ceiling)+lease.FirstCheckpointRetryMax+2; n > most {
		t.Fatalf("%d checkpoint attempts in 2 intervals of throttling, want at most %d: a's retries did not back off", n, most)
	}
	if ha.Checkpointed() != lease.NoSeq || hb.Checkpointed() != 0 {
		t.Fatalf("checkpointed %d and %d while every checkpoint was throttled", ha.Checkpointed(), hb.Checkpointed())
	}
	throttled = false
	run(ceiling + cfg.Tick + 250*time.Millisecond)
	if got, _ := r.store.Get(r.ctx, "a"); ha.Checkpointed() == lease.NoSeq || got.LastSeq != ha.Checkpointed() {
		t.Fatalf("a (no checkpoint) checkpointed %d, stored %d, %v after the throttling ended: it yielded with the periodic ones",
			ha.Checkpointed(), got.LastSeq, ceiling)
	}
	if hb.Checkpointed() != 0 {
		t.Fatalf("b (a checkpoint) checkpointed %d right after the throttling ended: it did not wait out the hold", hb.Checkpointed())
	}
	for n, want := range map[int]time.Duration{1: 500 * time.Millisecond, 2: time.Second, 3: 2 * time.Second, 4: 4 * time.Second, 9: 4 * time.Second} {
		if got := lease.FirstCheckpointRetry(n, 500*time.Millisecond); got != want {
			t.Errorf("FirstCheckpointRetry(%d, 500ms) = %v, want %v", n, got, want)
		}
	}
}

// A store that throttles checkpoints gets fewer of them, not more: after a
// throttled one every session's periodic checkpoints wait CheckpointHold
// (one interval, then twice that, up to CheckpointHoldMax intervals) instead
// of retrying at RetryEvery, so that heartbeats keep the table's capacity;
// heartbeats go on meanwhile, and the first success ends the yield.
func TestThrottledCheckpointsYieldToHeartbeats(t *testing.T) {
	r := newRig(t, checkpointed("a", 0), checkpointed("b", 0))
	k, _ := r.keeper("w1")
	cfg := k.Config()
	ha, hb := r.acquire(k, "a"), r.acquire(k, "b")
	throttled := true
	var ckpts, beats atomic.Int64
	r.store.SetFail(func(op string) (error, bool) {
		switch op {
		case "checkpoint":
			ckpts.Add(1)
			if throttled {
				return fmt.Errorf("checkpoint: %w", lease.ErrThrottled), false
			}
		case "heartbeat":
			beats.Add(1)
		}
		return nil, false
	})
	seq := int64(0)
	run := func(d time.Duration) {
		for end := r.clk.Now().Add(d); r.clk.Now().Before(end); {
			seq++
			ha.Observe(seq)
			hb.Observe(seq)
			r.step(cfg.Tick, []*lease.Keeper{k}, nil)
		}
	}
	// Ten checkpoint intervals of throttling: at RetryEvery that would be
	// 2 × 10 × every / RetryEvery attempts; yielding, at most one or two per
	// session per hold (every, 2 every, 4 every, 4 every).
	run(10 * cfg.CheckpointEvery)
	if n := ckpts.Load(); n > 2*5 {
		t.Fatalf("%d checkpoint attempts in 10 intervals of throttling: they did not yield", n)
	}
	if beats.Load() < int64(10*cfg.CheckpointEvery/cfg.HeartbeatEvery)-1 {
		t.Fatalf("%d heartbeats in 10 checkpoint intervals", beats.Load())
	}
	if !ha.Valid() || !hb.Valid() {
		t.Fatal("a throttled checkpoint ended a tenure")
	}
	// The throttling ends: within the longest hold both sessions are
	// checkpointed again, and then every interval.
	throttled = false
	run(lease.CheckpointHoldMax*cfg.CheckpointEvery + cfg.CheckpointEvery)
	if ha.Checkpointed() < 1 || hb.Checkpointed() < 1 {
		t.Fatalf("checkpointed %d and %d after the throttling ended", ha.Checkpointed(), hb.Checkpointed())
	}
	before := ckpts.Load()
	run(3 * cfg.CheckpointEvery)
	if n := ckpts.Load() - before; n < 4 {
		t.Fatalf("%d checkpoints in 3 intervals after the yield ended, want one per session per interval", n)
	}
	for prev, want := range map[time.Duration]time.Duration{0: time.Minute, time.Minute: 2 * time.Minute, 2 * time.Minute: 4 * time.Minute, 4 * time.Minute: 4 * time.Minute} {
		if got := lease.CheckpointHold(prev, time.Minute); got != want {
			t.Errorf("CheckpointHold(%v, 1m) = %v, want %v", prev, got, want)
		}
	}
}

// countedKeeper is a registered Keeper id whose store (the rig's) counts
// its record reads and GONE listings.
func (r *rig) countedKeeper(id string) (*lease.Keeper, *getCounter) {
	r.t.Helper()
	store := &getCounter{Store: r.store, gets: map[string]int{}}
	k, err := lease.NewKeeper(store, r.clk, lease.DefaultConfig(id), &recorder{}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := k.Register(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	return k, store
}

// getCounter counts GetWorker calls per id, and the listings of the GONE
// workers.
type getCounter struct {
	lease.Store
	mu        sync.Mutex
	gets      map[string]int
	goneLists int
}

func (g *getCounter) ListWorkers(ctx context.Context, list string, limit int) ([]string, error) {
	if list == schema.WorkerListGone {
		g.mu.Lock()
		g.goneLists++
		g.mu.Unlock()
	}
	return g.Store.ListWorkers(ctx, list, limit)
}

func (g *getCounter) lists() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.goneLists
}

func (g *getCounter) GetWorker(ctx context.Context, id string) (lease.WorkerRecord, error) {
	g.mu.Lock()
	g.gets[id]++
	g.mu.Unlock()
	return g.Store.GetWorker(ctx, id)
}

func (g *getCounter) count(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gets[id]
}

// What a Keeper remembers of gone workers is bounded and expires: a name
// without a record (an unknown prev_owner in a hand-off request) is never
// remembered; a worker read DEAD is remembered for GoneMemory, and at most
// MaxGoneRemembered are; a worker id registered again after its ended
// record expired is alive again in the eyes of a Keeper that saw the old
// one dead.
func TestGoneMemoryIsBoundedAndExpires(t *testing.T) {
	r := newRig(t)
	k, store := r.countedKeeper("w1")
	// A name with no record: not alive, read each time, remembered never.
	for range 3 {
		if !k.NotAlive(r.ctx, "nobody") {
			t.Fatal("a worker without a record is alive")
		}
	}
	if n := store.count("nobody"); n != 3 || k.KnownGone("nobody") || k.GoneRemembered() != 0 {
		t.Fatalf("unknown name: %d reads, known gone %v, %d remembered", n, k.KnownGone("nobody"), k.GoneRemembered())
	}

	// A DEAD worker: remembered, not read again, until GoneMemory passes.
	old, _ := r.keeper("w2")
	cfg := old.Config()
	r.store.UpdateWorker("w2", func(rec *lease.WorkerRecord) { rec.State, rec.Epoch = schema.WorkerDead, rec.Epoch+1 })
	for i := range 2 {
		if !k.NotAlive(r.ctx, "w2") {
			t.Fatalf("dead worker alive at check %d", i)
		}
	}
	if store.count("w2") != 1 || !k.KnownGone("w2") {
		t.Fatalf("dead worker: %d reads, known gone %v", store.count("w2"), k.KnownGone("w2"))
	}
	// Its record expires (a day after it ended) and another process
	// registers the id: the Keeper, whose memory ended long before, sees it
	// alive.
	r.clk.Advance(lease.GoneMemory)
	if k.KnownGone("w2") {
		t.Fatalf("w2 still remembered gone after %v", lease.GoneMemory)
	}
	r.store.ExpireWorker("w2")
	reborn, err := lease.NewKeeper(r.store, r.clk, cfg, &recorder{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reborn.Register(r.ctx); err != nil {
		t.Fatalf("the id registered again after its record expired: %v", err)
	}
	if k.NotAlive(r.ctx, "w2") {
		t.Fatal("a worker id registered again is taken for the old, dead one")
	}

	// The bound.
	for i := range lease.MaxGoneRemembered + 50 {
		id := fmt.Sprintf("dead-%05d", i)
		if err := r.store.Register(r.ctx, lease.WorkerRecord{ID: id, State: schema.WorkerDead, Epoch: 2, List: schema.WorkerListGone}); err != nil {
			t.Fatal(err)
		}
		k.NotAlive(r.ctx, id)
	}
	if n := k.GoneRemembered(); n > lease.MaxGoneRemembered {
		t.Fatalf("%d workers remembered gone, at most %d", n, lease.MaxGoneRemembered)
	}
	if !k.KnownGone(fmt.Sprintf("dead-%05d", lease.MaxGoneRemembered+49)) {
		t.Fatal("the latest gone worker is not remembered")
	}
}

// hangingLists is a store whose listings (Unowned, ListWorkers, OwnedBy)
// hang until their context ends, as a table that stopped answering (a
// DynamoDB outage) leaves them.
type hangingLists struct{ lease.Store }

func (hangingLists) Unowned(ctx context.Context, _ int) ([]string, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hangingLists) ListWorkers(ctx context.Context, _ string, _ int) ([]string, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (hangingLists) OwnedBy(ctx context.Context, _ string, _ int) ([]lease.Owned, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// Every listing the reconcile pass makes (the audit, the orphans, a dead
// worker's sessions) ends at its deadline (4 × RPCTimeout) when the table
// does not answer: a pass hung in one would hold up every pass after it.
func TestListingsEndAtTheirDeadline(t *testing.T) {
	cfg := lease.DefaultConfig("a")
	cfg.RPCTimeout = 50 * time.Millisecond
	k, err := lease.NewKeeper(hangingLists{memstore.New()}, clock.NewFake(t0), cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background() // no deadline of its own
	for name, call := range map[string]func() error{
		"Audit":      func() error { _, err := k.Audit(ctx, nil); return err },
		"Orphans":    func() error { _, err := k.Orphans(ctx, 10); return err },
		"TakeoverOf": func() error { _, err := k.TakeoverOf(ctx, "b"); return err },
	} {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: %v, want its deadline exceeded", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s still waiting 5 s after a deadline of 4 × 50 ms", name)
		}
	}
}
