package lease_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// A heartbeat waits its RPCTimeout while the worker has trust to spare,
// and only until one period of trust is left once trust runs short; with
// less than that left (or trust lapsed) it is the last chance: RPCTimeout.
func TestHeartbeatTimeoutLeavesAPeriodOfTrust(t *testing.T) {
	ms := time.Millisecond
	sent := t0
	for _, c := range []struct {
		name        string
		left, every time.Duration // trust left at the send time, the period
		want        time.Duration
	}{
		{"defaults: 7 s of 8 left", 7000 * ms, 1000 * ms, 2000 * ms},
		{"the tests' settings: 1.2 s left, 200 ms period", 1200 * ms, 200 * ms, 1000 * ms},
		{"chaos's edge: 2 s left, 1 s period", 2000 * ms, 1000 * ms, 1000 * ms},
		{"a period and a little left", 1060 * ms, 1000 * ms, 60 * ms},
		{"under a period and the floor left: the last chance", 1040 * ms, 1000 * ms, 2000 * ms},
		{"lapsed", -ms, 1000 * ms, 2000 * ms},
	} {
		if got := lease.HeartbeatTimeout(sent, sent.Add(c.left), c.every, 2*time.Second, 50*ms); got != c.want {
			t.Errorf("%s: timeout %s, want %s", c.name, got, c.want)
		}
	}
}

// A failed heartbeat is followed by another at once only when the one on
// schedule could not have its whole RPCTimeout inside the trust left.
func TestHeartbeatAgainAtOnceOnlyWhenTrustIsAtRisk(t *testing.T) {
	every, rpc := time.Second, 2*time.Second
	if lease.HeartbeatAgainAtOnce(t0, t0.Add(7*time.Second), every, rpc) {
		t.Error("at the defaults (7 s of trust left) a failed heartbeat is sent again at once; want: a period later")
	}
	if !lease.HeartbeatAgainAtOnce(t0, t0.Add(2*time.Second), every, rpc) {
		t.Error("with 2 s of trust left (chaos's edge) a failed heartbeat waits its period; want: again at once")
	}
}

// A failed heartbeat with trust at risk is sent again a quarter period
// after the failed one's send (at once after one that hung, at most four a
// period after ones that fail fast), and not once trust had lapsed when it
// failed, nor when trust is not at risk.
func TestHeartbeatAgainAtSpacesRetriesAndStopsOnceTrustLapsed(t *testing.T) {
	every, rpc := time.Second, 2*time.Second
	until := t0.Add(2 * time.Second) // chaos's edge: trust at risk
	if at, ok := lease.HeartbeatAgainAt(t0, t0.Add(time.Second), until, every, rpc); !ok || !at.Equal(t0.Add(250*time.Millisecond)) {
		t.Errorf("hung for 1 s with trust at risk: again at %v (%v), want %v", at, ok, t0.Add(250*time.Millisecond))
	}
	if at, ok := lease.HeartbeatAgainAt(t0, t0.Add(time.Millisecond), until, every, rpc); !ok || !at.Equal(t0.Add(250*time.Millisecond)) {
		t.Errorf("refused at once: again at %v (%v), want a quarter period after the send", at, ok)
	}
	if _, ok := lease.HeartbeatAgainAt(t0, until, until, every, rpc); ok {
		t.Error("failed once trust had lapsed: sent again early; want the period")
	}
	if _, ok := lease.HeartbeatAgainAt(t0, t0.Add(time.Second), t0.Add(7*time.Second), every, rpc); ok {
		t.Error("at the defaults (7 s of trust left): sent again early; want the period")
	}
}

// One heartbeat that hangs (one of DynamoDB's latency spikes: seconds) does
// not cost the worker its trust, at the tightest timings Validate allows
// (TTL − SafetyMargin = HeartbeatEvery + RPCTimeout, as chaos runs): it
// gives up when a period of trust is left and the next is sent at once. With the
// whole RPCTimeout for it, and the next one a period later, the trust
// lapsed and the worker's session ended fenced. The Keeper's own loop on
// the real clock: the timeouts are real deadlines.
func TestHungHeartbeatDoesNotCostTheWorkerItsTrust(t *testing.T) {
	hs := &hangingHeartbeats{Store: memstore.New()}
	hs.Put(started("s1"))
	cfg := lease.DefaultConfig("w1")
	cfg.HeartbeatEvery, cfg.RPCTimeout = time.Second, 2*time.Second // chaos's settings
	cfg.TTL, cfg.SafetyMargin = 4*time.Second, time.Second
	cfg.IndexLagBound = 3 * time.Second
	obs := &recorder{}
	k, err := lease.NewKeeper(hs, clock.Real{}, cfg, obs, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := k.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Acquire(ctx, "s1", nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	defer func() { cancel(); <-done }()

	hs.hangNext.Store(true)
	testwait.Eventually(t, 5*cfg.HeartbeatEvery, "a heartbeat hung and two succeeded after it", func() bool {
		return hs.hung.Load() == 1 && hs.okAfterHang.Load() >= 2
	})
	if left := time.Duration(hs.left.Load()); left >= cfg.RPCTimeout {
		t.Errorf("the hung heartbeat had %s to answer, want less than RPCTimeout %s", left, cfg.RPCTimeout)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if err, ended := obs.ended["s1"]; ended {
		t.Fatalf("the session ended (%v) after one hung heartbeat; want it held", err)
	}
}

// hangingHeartbeats is a store whose next heartbeat, once hangNext is set,
// answers only when its context ends; left is the time it had, and
// okAfterHang counts the heartbeats that succeeded after it.
type hangingHeartbeats struct {
	*memstore.Store
	hangNext    atomic.Bool
	hung        atomic.Int32
	left        atomic.Int64
	okAfterHang atomic.Int32
}

func (s *hangingHeartbeats) Heartbeat(ctx context.Context, owner string, epoch int64, hb lease.Heartbeat) (lease.WorkerRecord, error) {
	if s.hangNext.CompareAndSwap(true, false) {
		if dl, ok := ctx.Deadline(); ok {
			s.left.Store(int64(time.Until(dl)))
		}
		s.hung.Add(1)
		<-ctx.Done()
		return lease.WorkerRecord{}, ctx.Err()
	}
	rec, err := s.Store.Heartbeat(ctx, owner, epoch, hb)
	if err == nil && s.hung.Load() > 0 {
		s.okAfterHang.Add(1)
	}
	return rec, err
}

// A heartbeat is current for one and a half intervals after the send of the
// last one that succeeded: a worker whose table stopped answering loses it
// within that, while it keeps its trust for most of the trust window; the
// next heartbeat that succeeds makes it current again.
func TestHeartbeatCurrentOnlyWhileNoneIsOverdue(t *testing.T) {
	clk := clock.NewFake(t0)
	cfg := lease.DefaultConfig("w1")
	cfg.HeartbeatEvery, cfg.RPCTimeout = time.Second, 2*time.Second
	cfg.TTL, cfg.SafetyMargin = 4*time.Second, time.Second
	cfg.IndexLagBound = 3 * time.Second
	k, err := lease.NewKeeper(memstore.New(), clk, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if k.HeartbeatCurrent() {
		t.Fatal("current before the registration")
	}
	ctx := context.Background()
	if err := k.Register(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(1400 * time.Millisecond)
	if !k.HeartbeatCurrent() {
		t.Fatal("not current 1.4 s after the registration, heartbeat every 1 s")
	}
	clk.Advance(200 * time.Millisecond)
	if k.HeartbeatCurrent() {
		t.Fatal("current 1.6 s after the last heartbeat that succeeded")
	}
	if !k.Trusted() {
		t.Fatal("the worker lost its trust 1.6 s after it, want it kept (trust window 3 s)")
	}
	k.HeartbeatNow(ctx)
	if !k.HeartbeatCurrent() {
		t.Fatal("not current right after a heartbeat succeeded")
	}
	clk.Advance(3 * time.Second)
	if k.HeartbeatCurrent() || k.Trusted() {
		t.Fatal("current or trusted after the trust window")
	}
}
