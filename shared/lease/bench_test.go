package lease

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// BenchmarkRules measures the pure decisions a store and the Keeper make per
// operation.
func BenchmarkRules(b *testing.B) {
	it := &Item{DesiredState: schema.StateStarted, Owner: "w1", Epoch: 3, ExpiresAtMs: 2_000, LastSeq: 10}
	tok := Token{ConnectionID: "a", Owner: "w1", Epoch: 3}
	b.Run("CanRenew", func(b *testing.B) {
		for b.Loop() {
			if CanRenew(it, tok, 1_000, 11) != nil {
				b.Fatal("refused")
			}
		}
	})
	b.Run("ClassifyRenewLost", func(b *testing.B) {
		stale := Token{ConnectionID: "a", Owner: "w1", Epoch: 2}
		for b.Loop() {
			if ClassifyRenew(it, stale, 1_000, 12_000, 11) == nil {
				b.Fatal("accepted")
			}
		}
	})
	b.Run("HeldValid", func(b *testing.B) {
		h := newHeld(Item{ConnectionID: "a", Owner: "w1", Epoch: 1}, time.Now(), DefaultConfig("w1"), time.Now(), time.Now)
		for b.Loop() {
			if !h.Valid() {
				b.Fatal("invalid")
			}
		}
	})
}

// BenchmarkKeeperTick measures one scheduling pass of the Keeper over n held
// leases (deadline checks plus the renewals that fall due), with a store that
// does no I/O. Renewals are spread over RenewEvery, so a pass starts about
// n × Tick / RenewEvery of them.
func BenchmarkKeeperTick(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("held=%d", n), func(b *testing.B) {
			var items []Item
			for i := 0; i < n; i++ {
				items = append(items, started(fmt.Sprintf("s%05d", i)))
			}
			st := newFakeStore(items...)
			clk := clock.NewFake(t0)
			cfg := DefaultConfig("w1")
			cfg.MaxConcurrentRenews = n
			k, err := NewKeeper(syncStore{st}, clk, cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i++ {
				if _, err := k.Acquire(context.Background(), fmt.Sprintf("s%05d", i)); err != nil {
					b.Fatal(err)
				}
				if i%(n/100+1) == 0 {
					clk.Advance(cfg.RenewEvery / 100) // spread the renew schedule
				}
			}
			b.ResetTimer()
			for b.Loop() {
				clk.Advance(cfg.Tick)
				k.tick(context.Background())
				k.wg.Wait()
			}
			if k.Count() != n {
				b.Fatalf("holding %d of %d", k.Count(), n)
			}
		})
	}
}

// syncStore serializes the unit tests' fake store for concurrent renewals.
type syncStore struct{ *fakeStore }

var storeMu = make(chan struct{}, 1)

func (s syncStore) Renew(ctx context.Context, t Token, now, exp, seq int64) (Item, error) {
	storeMu <- struct{}{}
	defer func() { <-storeMu }()
	return s.fakeStore.Renew(ctx, t, now, exp, seq)
}
