package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/schema"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeStore is a minimal in-memory store for the Keeper's unit tests (the
// full reference store is memstore, which imports this package).
type fakeStore struct {
	items map[string]*Item
	fail  func(op string) (err error, after bool)
	calls map[string]int
}

func newFakeStore(items ...Item) *fakeStore {
	s := &fakeStore{items: map[string]*Item{}, calls: map[string]int{}}
	for _, it := range items {
		c := it
		s.items[it.ConnectionID] = &c
	}
	return s
}

func (s *fakeStore) do(op, id string, apply func(*Item) error) (Item, error) {
	s.calls[op]++
	var ferr error
	var after bool
	if s.fail != nil {
		ferr, after = s.fail(op)
		if ferr != nil && !after {
			return Item{}, ferr
		}
	}
	it := s.items[id]
	if it == nil {
		return Item{}, ErrNotFound
	}
	next := *it
	if err := apply(&next); err != nil {
		return Item{}, err
	}
	*it = next
	if ferr != nil {
		return Item{}, ferr
	}
	return next, nil
}

func (s *fakeStore) Acquire(_ context.Context, id, owner string, stale, exp int64) (Item, error) {
	return s.do("acquire", id, func(it *Item) error {
		if err := CanAcquire(it, stale); err != nil {
			return err
		}
		it.Owner, it.ExpiresAtMs, it.Epoch = owner, exp, it.Epoch+1
		return nil
	})
}

func (s *fakeStore) Renew(_ context.Context, t Token, now, exp, seq int64) (Item, error) {
	return s.do("renew", t.ConnectionID, func(it *Item) error {
		if err := CanRenew(it, t, now, seq); err != nil {
			return err
		}
		it.ExpiresAtMs, it.LastSeq = exp, seq
		return nil
	})
}

func (s *fakeStore) Checkpoint(_ context.Context, t Token, seq int64) error {
	_, err := s.do("checkpoint", t.ConnectionID, func(it *Item) error {
		if err := CanFencedWrite(it, t, seq); err != nil {
			return err
		}
		it.LastSeq = seq
		return nil
	})
	return err
}

func (s *fakeStore) Release(_ context.Context, t Token, seq int64) error {
	_, err := s.do("release", t.ConnectionID, func(it *Item) error {
		if err := CanFencedWrite(it, t, seq); err != nil {
			return err
		}
		it.ExpiresAtMs, it.LastSeq = 0, seq
		return nil
	})
	return err
}

func (s *fakeStore) Fail(_ context.Context, t Token, gen, seq int64, reason string, atMs int64) error {
	_, err := s.do("fail", t.ConnectionID, func(it *Item) error {
		if err := CanFail(it, t, gen, seq); err != nil {
			return err
		}
		it.FailedGeneration, it.LastError, it.LastErrorAtMs, it.ExpiresAtMs, it.LastSeq = &gen, reason, atMs, FailedExpiresAtMs, seq
		return nil
	})
	return err
}

func (s *fakeStore) NoteError(_ context.Context, t Token, reason string, atMs int64) error {
	_, err := s.do("note_error", t.ConnectionID, func(it *Item) error {
		if err := CanNoteError(it, t); err != nil {
			return err
		}
		it.LastError, it.LastErrorAtMs = reason, atMs
		return nil
	})
	return err
}

func (s *fakeStore) Get(_ context.Context, id string) (Item, error) {
	if it := s.items[id]; it != nil {
		return *it, nil
	}
	return Item{}, ErrNotFound
}

func (s *fakeStore) Orphans(context.Context, int64, int) ([]Candidate, error) { return nil, nil }

var errTimeout = errors.New("i/o timeout")

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func started(id string) Item {
	return Item{ConnectionID: id, DesiredState: schema.StateStarted, Generation: 1, LastSeq: NoSeq}
}

type rig struct {
	t     *testing.T
	clk   *clock.Fake
	store *fakeStore
	k     *Keeper
	obs   *recObserver
}

type recObserver struct{ ended []error }

func (r *recObserver) Renewed(*Held, time.Duration, error) {}
func (r *recObserver) Ended(_ *Held, err error)            { r.ended = append(r.ended, err) }

func newRig(t *testing.T, items ...Item) *rig {
	clk := clock.NewFake(t0)
	st := newFakeStore(items...)
	obs := &recObserver{}
	k, err := NewKeeper(st, clk, DefaultConfig("w1"), obs)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, clk: clk, store: st, k: k, obs: obs}
}

// step advances the clock by one Keeper tick, runs the tick and waits for
// the renewals it started.
func (r *rig) step() {
	r.clk.Advance(r.k.cfg.Tick)
	r.k.tick(context.Background())
	r.k.wg.Wait()
}

// runFor steps for d, calling each after every step; it stops early when
// each returns false.
func (r *rig) runFor(d time.Duration, each func() bool) {
	for end := r.clk.Now().Add(d); r.clk.Now().Before(end); {
		r.step()
		if each != nil && !each() {
			return
		}
	}
}

func (r *rig) acquire(id string) *Held {
	h, err := r.k.Acquire(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

func TestKeeperRenewsAndKeepsTheStoredExpiryAhead(t *testing.T) {
	r := newRig(t, started("a"))
	h := r.acquire("a")
	r.runFor(60*time.Second, func() bool {
		if !h.Valid() {
			t.Fatalf("lease invalid at %s", r.clk.Now().Sub(t0))
		}
		if exp := r.store.items["a"].ExpiresAtMs; exp-r.clk.Now().UnixMilli() < (r.k.cfg.TTL - r.k.cfg.RenewEvery*2).Milliseconds() {
			t.Fatalf("stored expiry only %d ms ahead at %s", exp-r.clk.Now().UnixMilli(), r.clk.Now().Sub(t0))
		}
		return true
	})
	if n := r.store.calls["renew"]; n < 15 || n > 21 {
		t.Fatalf("%d renewals in 60 s at every %s ±10%%", n, r.k.cfg.RenewEvery)
	}
}

func TestKeeperFencesItselfWhenTheStoreIsUnreachable(t *testing.T) {
	r := newRig(t, started("a"))
	h := r.acquire("a")
	r.runFor(5*time.Second, nil) // a renewal or so succeeds
	r.store.fail = func(string) (error, bool) { return errTimeout, false }
	storedExpiry := time.UnixMilli(r.store.items["a"].ExpiresAtMs)
	var fencedAt time.Time
	r.runFor(30*time.Second, func() bool {
		select {
		case <-h.Done():
			fencedAt = r.clk.Now()
			return false
		default:
			return true
		}
	})
	if fencedAt.IsZero() {
		t.Fatal("the keeper never gave up an unrenewable lease")
	}
	if !errors.Is(h.Err(), ErrUntrusted) {
		t.Fatalf("err = %v, want ErrUntrusted", h.Err())
	}
	// It stops trusting the lease a safety margin before the stored expiry,
	// and well before another worker may take it (expiry + skew).
	if slack := storedExpiry.Sub(fencedAt); slack < r.k.cfg.SafetyMargin-r.k.cfg.Tick {
		t.Fatalf("fenced only %s before the stored expiry, want ≥ %s", slack, r.k.cfg.SafetyMargin-r.k.cfg.Tick)
	}
	if h.Valid() || r.k.Holds("a") {
		t.Fatal("an untrusted lease is still valid or held")
	}
	if len(r.obs.ended) != 1 || !errors.Is(r.obs.ended[0], ErrUntrusted) {
		t.Fatalf("observer heard %v", r.obs.ended)
	}
}

func TestValidChecksTheDeadlineWithoutTheKeeperRunning(t *testing.T) {
	// A process paused (SIGSTOP, GC) past its deadline must not deliver on
	// waking, before any keeper tick has run.
	r := newRig(t, started("a"))
	h := r.acquire("a")
	deadline := h.TrustedUntil()
	if want := t0.Add(r.k.cfg.TTL - r.k.cfg.SafetyMargin); !deadline.Equal(want) {
		t.Fatalf("deadline %s, want %s", deadline, want)
	}
	r.clk.Advance(deadline.Sub(t0) - time.Millisecond)
	if !h.Valid() {
		t.Fatal("invalid before the deadline")
	}
	r.clk.Advance(time.Millisecond)
	if h.Valid() {
		t.Fatal("still valid at the deadline")
	}
}

func TestKeeperSeesStopWithinOneRenewInterval(t *testing.T) {
	r := newRig(t, started("a"))
	h := r.acquire("a")
	r.runFor(2*time.Second, nil)
	r.store.items["a"].DesiredState = schema.StateStopped
	stoppedAt := r.clk.Now()
	r.runFor(20*time.Second, func() bool { return h.Err() == nil })
	if !errors.Is(h.Err(), ErrStopped) {
		t.Fatalf("err = %v, want ErrStopped", h.Err())
	}
	bound := time.Duration(float64(r.k.cfg.RenewEvery)*(1+r.k.cfg.RenewJitter)) + r.k.cfg.Tick
	if took := r.clk.Now().Sub(stoppedAt); took > bound {
		t.Fatalf("stop seen after %s, bound %s", took, bound)
	}
	// The owner then releases, keeping the final checkpoint.
	h.Observe(99)
	if err := r.k.Release(context.Background(), h); err != nil {
		t.Fatal(err)
	}
	if it := r.store.items["a"]; it.ExpiresAtMs != 0 || it.LastSeq != 99 {
		t.Fatalf("after release: %+v", it)
	}
}

func TestKeeperSeesAStolenLease(t *testing.T) {
	r := newRig(t, started("a"))
	h := r.acquire("a")
	r.store.items["a"].Owner, r.store.items["a"].Epoch = "w2", h.Epoch()+1
	r.runFor(10*time.Second, func() bool { return h.Err() == nil })
	if !errors.Is(h.Err(), ErrLeaseLost) {
		t.Fatalf("err = %v, want ErrLeaseLost", h.Err())
	}
	if h.Valid() {
		t.Fatal("a lost lease is valid")
	}
	if err := r.k.Release(context.Background(), h); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("release of a lost lease: %v", err)
	}
	if it := r.store.items["a"]; it.Owner != "w2" || it.ExpiresAtMs == 0 {
		t.Fatalf("the loser's release touched the item: %+v", it)
	}
}

func TestAmbiguousRenewDoesNotLoseTheLease(t *testing.T) {
	// dynamolock #280: a renew that timed out but was applied made the next
	// renew fail. Here the next renew must succeed.
	r := newRig(t, started("a"))
	h := r.acquire("a")
	failed := 0
	r.store.fail = func(op string) (error, bool) {
		if op == "renew" && failed < 3 {
			failed++
			return errTimeout, true // applied, reply lost
		}
		return nil, false
	}
	r.runFor(60*time.Second, func() bool {
		if !h.Valid() {
			t.Fatalf("lease lost at %s after ambiguous renewals: %v", r.clk.Now().Sub(t0), h.Err())
		}
		return true
	})
	if failed != 3 {
		t.Fatalf("%d ambiguous renewals injected", failed)
	}
}

func TestRenewCarriesTheCheckpointAndGeneration(t *testing.T) {
	r := newRig(t, started("a"))
	h := r.acquire("a")
	h.Observe(41)
	h.Observe(42)
	h.Observe(7) // never backwards
	r.store.items["a"].Generation = 2
	r.store.items["a"].WSURL = "wss://new"
	r.runFor(5*time.Second, nil)
	if got := r.store.items["a"].LastSeq; got != 42 {
		t.Fatalf("checkpoint %d, want 42", got)
	}
	select {
	case <-h.Changed():
	default:
		t.Fatal("no change signal for a new generation")
	}
	if it := h.Item(); it.WSURL != "wss://new" || it.Generation != 2 {
		t.Fatalf("item not refreshed: %+v", it)
	}
}

func TestKeeperRunStopsWithItsContext(t *testing.T) {
	r := newRig(t, started("a"))
	r.acquire("a")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.k.Run(ctx) }()
	for r.clk.Waiters() == 0 {
		time.Sleep(time.Millisecond)
	}
	r.clk.Advance(4 * time.Second)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig("w").Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Owner = "" },
		func(c *Config) { c.TTL = 0 },
		func(c *Config) { c.SafetyMargin = c.Tick },
		func(c *Config) { c.RenewEvery = c.TTL }, // no room to renew before the deadline
		func(c *Config) { c.RenewJitter = 0.6 },
		func(c *Config) { c.MaxSkew = -1 },
		func(c *Config) { c.MaxConcurrentRenews = 0 },
	}
	for i, f := range bad {
		c := DefaultConfig("w")
		f(&c)
		if c.Validate() == nil {
			t.Errorf("bad config %d accepted: %+v", i, c)
		}
	}
}

// TestSafetyArgument checks the README's claim by brute force over clock
// offsets: with wall clocks within MaxSkew of each other, no other worker can
// acquire a lease before the holder's trust deadline plus the safety margin.
func TestSafetyArgument(t *testing.T) {
	cfg := DefaultConfig("w")
	maxSkew := cfg.MaxSkew
	for holderOff := -maxSkew / 2; holderOff <= maxSkew/2; holderOff += 50 * time.Millisecond {
		for takerOff := holderOff - maxSkew; takerOff <= holderOff+maxSkew; takerOff += 50 * time.Millisecond {
			sent := t0 // real time of the holder's last successful renew send
			expiry := ExpiresAtMs(sent.Add(holderOff), cfg.TTL)
			trusted := TrustedUntil(sent, cfg.TTL, cfg.SafetyMargin)
			// Find the first real millisecond at which the taker may acquire.
			for real := sent; ; real = real.Add(time.Millisecond) {
				if CanAcquire(&Item{DesiredState: schema.StateStarted, ExpiresAtMs: expiry}, StaleBeforeMs(real.Add(takerOff), maxSkew)) == nil {
					if gap := real.Sub(trusted); gap < cfg.SafetyMargin {
						t.Fatalf("holder off %s, taker off %s: takeover %s after the holder's deadline, want ≥ %s", holderOff, takerOff, gap, cfg.SafetyMargin)
					}
					break
				}
			}
		}
	}
}

// concurrencyStore serializes the fake store and records how many renewals
// were in flight at once.
type concurrencyStore struct {
	*fakeStore
	mu            sync.Mutex
	inFlight, max int
}

func (c *concurrencyStore) Renew(ctx context.Context, t Token, now, exp, seq int64) (Item, error) {
	c.mu.Lock()
	c.inFlight++
	if c.inFlight > c.max {
		c.max = c.inFlight
	}
	c.mu.Unlock()
	time.Sleep(time.Millisecond) // a store call takes time
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
	return c.fakeStore.Renew(ctx, t, now, exp, seq)
}

// TestRenewalsBeyondTheConcurrencyBoundWaitForASlotNotForATick: with 2
// renewals allowed in flight, 50 leases falling due together are all renewed
// from one tick (the bound limits concurrency, not the renewal rate).
func TestRenewalsBeyondTheConcurrencyBoundWaitForASlotNotForATick(t *testing.T) {
	var items []Item
	for i := 0; i < 50; i++ {
		items = append(items, started(fmt.Sprintf("s%02d", i)))
	}
	st := &concurrencyStore{fakeStore: newFakeStore(items...)}
	clk := clock.NewFake(t0)
	cfg := DefaultConfig("w1")
	cfg.MaxConcurrentRenews, cfg.RenewJitter = 2, 0
	k, err := NewKeeper(st, clk, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if _, err := k.Acquire(context.Background(), it.ConnectionID); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(cfg.RenewEvery)
	k.tick(context.Background())
	k.wg.Wait()
	if n := st.calls["renew"]; n != 50 {
		t.Fatalf("%d of 50 due renewals ran from one tick", n)
	}
	if st.max > 2 {
		t.Fatalf("%d renewals in flight at once, bound 2", st.max)
	}
	for _, it := range items {
		if got := st.items[it.ConnectionID].ExpiresAtMs; got != ExpiresAtMs(clk.Now(), cfg.TTL) {
			t.Fatalf("%s not renewed (expiry %d)", it.ConnectionID, got)
		}
	}
}

// Fail ends the tenure, stops renewing it and leaves the session FAILED with
// the reason and the final checkpoint; no observer call (the worker reports
// the failure itself), and the Keeper cannot acquire it again.
func TestKeeperFailStopsHoldingAndRecords(t *testing.T) {
	r := newRig(t, started("a"))
	h := r.acquire("a")
	h.Observe(9)
	at := r.clk.Now()
	if err := r.k.NoteError(context.Background(), h, "handshake refused: HTTP 503", at); err != nil {
		t.Fatalf("note error: %v", err)
	}
	if !h.Valid() {
		t.Fatal("NoteError ended the tenure")
	}
	if err := r.k.Fail(context.Background(), h, 1, "handshake refused: HTTP 401", at); err != nil {
		t.Fatalf("fail: %v", err)
	}
	if !errors.Is(h.Err(), ErrFailed) || r.k.Holds("a") || r.k.Count() != 0 {
		t.Fatalf("after Fail: err %v, holds %v, count %d", h.Err(), r.k.Holds("a"), r.k.Count())
	}
	it := *r.store.items["a"]
	if !it.Failed() || it.LastError != "handshake refused: HTTP 401" || it.LastErrorAtMs != at.UnixMilli() ||
		it.LastSeq != 9 || it.ExpiresAtMs != FailedExpiresAtMs {
		t.Fatalf("stored item after Fail: %+v", it)
	}
	renews := r.store.calls["renew"]
	r.runFor(30*time.Second, nil)
	if r.store.calls["renew"] != renews || len(r.obs.ended) != 0 {
		t.Fatalf("after Fail: %d more renews, observer heard %v", r.store.calls["renew"]-renews, r.obs.ended)
	}
	if _, err := r.k.Acquire(context.Background(), "a"); !errors.Is(err, ErrFailed) {
		t.Fatalf("acquire of a FAILED session: %v, want ErrFailed", err)
	}
}
