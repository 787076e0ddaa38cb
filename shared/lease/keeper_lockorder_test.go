package lease

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/testwait"
)

// countingStore serializes the fake store and counts renewals.
type countingStore struct {
	syncStore
	renews atomic.Int64
}

func (s *countingStore) Renew(ctx context.Context, t Token, now, exp, seq int64) (Item, error) {
	it, err := s.syncStore.Renew(ctx, t, now, exp, seq)
	if err == nil {
		s.renews.Add(1)
	}
	return it, err
}

// TestKeeperRenewalsAndTicksDoNotDeadlock runs the real Keeper loop with
// many leases and renewals finishing while ticks scan the held set: a renew
// completing must not take the Keeper's lock while holding its lease's lock
// (a tick takes them in the other order). Found by the capacity benchmark:
// a worker holding 2,000 leases on dynalite stopped renewing within seconds.
func TestKeeperRenewalsAndTicksDoNotDeadlock(t *testing.T) {
	const n = 2000
	var items []Item
	for i := 0; i < n; i++ {
		items = append(items, started(fmt.Sprintf("s%04d", i)))
	}
	st := &countingStore{syncStore: syncStore{newFakeStore(items...)}}
	cfg := DefaultConfig("w1")
	cfg.TTL, cfg.RenewEvery, cfg.SafetyMargin, cfg.Tick, cfg.MaxConcurrentRenews = 2*time.Second, 20*time.Millisecond, 500*time.Millisecond, time.Millisecond, 64
	k, err := NewKeeper(st, clock.Real{}, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := k.Acquire(context.Background(), fmt.Sprintf("s%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = k.Run(ctx); close(done) }()
	// Renewals keep coming: after the first wave, another n of them (every
	// lease renewed again) within a deadline; a deadlock stops them for good.
	testwait.Eventually(t, 10*time.Second, "a first round of renewals", func() bool { return st.renews.Load() >= n })
	before := st.renews.Load()
	testwait.Eventually(t, 10*time.Second, fmt.Sprintf("%d more renewals: deadlocked?", n), func() bool { return st.renews.Load() >= before+n })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("Keeper.Run did not return after its context ended: deadlocked (renewals %d)", st.renews.Load())
	}
}
