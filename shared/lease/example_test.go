package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// A worker's Keeper on the memory store and a fake clock: it registers,
// acquires a session, checkpoints what it delivered and releases it. A
// real worker also runs Keeper.Run (heartbeats, periodic checkpoints, the
// trust deadline); here the fake clock stands still unless advanced.
func Example() {
	ctx := context.Background()
	store := memstore.New()
	store.Put(lease.Item{ConnectionID: "s1", DesiredState: schema.StateStarted, Spec: `{"ws_url":"wss://feed.example/s1"}`,
		Generation: 1, LastSeq: lease.NoSeq})
	clk := clock.NewFake(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))

	k, err := lease.NewKeeper(store, clk, lease.DefaultConfig("worker-a"), nil, nil)
	if err != nil {
		panic(err)
	}
	if err := k.Register(ctx); err != nil { // trusted for TTL - SafetyMargin
		panic(err)
	}
	h, err := k.Acquire(ctx, "s1", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("held:", h.Token(), "trusted for", h.Remaining())

	h.Observe(41) // messages up to seq 41 delivered
	if err := k.Checkpoint(ctx, h); err != nil {
		panic(err)
	}
	it, _ := store.Get(ctx, "s1")
	fmt.Println("checkpointed:", it.LastSeq)

	clk.Advance(3 * time.Second) // no heartbeat: trust runs down
	fmt.Println("trusted for", h.Remaining())

	h.Observe(42)
	if err := k.Release(ctx, h); err != nil { // the final checkpoint
		panic(err)
	}
	it, _ = store.Get(ctx, "s1")
	fmt.Printf("released: owner %q, last seq %d, tenure ended: %v\n", it.Owner, it.LastSeq, errors.Is(h.Err(), lease.ErrReleased))
	// Output:
	// held: s1@1(worker-a) trusted for 8s
	// checkpointed: 41
	// trusted for 5s
	// released: owner "", last seq 42, tenure ended: true
}
