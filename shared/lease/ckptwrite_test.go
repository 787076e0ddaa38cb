package lease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
)

// A scan's due checkpoints are written under one deadline by a goroutine
// per few of them (writeCheckpoints), not each with a goroutine, a context
// and a timer of its own (about 300 B of garbage per checkpoint, the
// capacity bench's largest steady allocation per session after the
// audit's; docs/worker.md, "Where a session's memory goes"): a round of 64
// checkpoints allocates less than one object per checkpoint.
func TestCheckpointRoundAllocatesPerScan(t *testing.T) {
	const n = 64
	r, k, hs := ckptRig(t, n, func(cfg *lease.Config) { cfg.CheckpointEvery = time.Second }, nil)
	seq := int64(0)
	round := func() {
		seq++
		for _, h := range hs {
			h.Observe(seq)
		}
		r.clk.Advance(k.Config().CheckpointEvery)
		if err := k.TickNow(r.ctx); err != nil {
			t.Fatal(err)
		}
	}
	round()
	allocs := testing.AllocsPerRun(20, round)
	for _, h := range hs {
		if got := h.Checkpointed(); got != seq {
			t.Fatalf("%s checkpointed %d after the rounds, want %d (every round writes every tenure's)", h.ID(), got, seq)
		}
	}
	t.Logf("%.0f allocations per round of %d checkpoints", allocs, n)
	if allocs >= n {
		t.Fatalf("a round of %d checkpoints: %.0f allocations, want fewer than one per checkpoint", n, allocs)
	}
}

// slowCheckpoints is a store whose checkpoints take d of the fake clock
// each.
type slowCheckpoints struct {
	lease.Store
	clk *clock.Fake
	d   time.Duration
}

func (s slowCheckpoints) Checkpoint(ctx context.Context, t lease.Token, seq int64) error {
	s.clk.Advance(s.d)
	return s.Store.Checkpoint(ctx, t, seq)
}

// A scan's checkpoints share one deadline: one whose turn comes later than
// a scan after the start (slow writes before it) is not sent under it but
// at the next scan, with a deadline of its own; it is not a failure (the
// tenure holds, nothing waits a RetryEvery), and every one lands.
func TestLateCheckpointsGoToTheNextScan(t *testing.T) {
	const n = 8
	r, k, hs := ckptRig(t, n, nil, func(r *rig) lease.Store {
		return slowCheckpoints{Store: r.store, clk: r.clk, d: 300 * time.Millisecond}
	})
	for _, h := range hs {
		h.Observe(7) // no checkpoint yet: the first is due at once
	}
	written := func() int {
		c := 0
		for _, h := range hs {
			if h.Err() != nil {
				t.Fatalf("%s ended: %v", h.ID(), h.Err())
			}
			if h.Checkpointed() == 7 {
				c++
			}
		}
		return c
	}
	if err := k.TickNow(r.ctx); err != nil {
		t.Fatal(err)
	}
	// Two writers (a goroutine per 4): each sends its first; a second
	// finds the scan a write of 300 ms old.
	if w := written(); w < 1 || w > 2 {
		t.Fatalf("the first scan wrote %d of %d checkpoints, want 1 or 2 (each writer's first)", w, n)
	}
	for scans := 1; written() < n; scans++ {
		if scans > n {
			t.Fatalf("%d scans wrote %d of %d checkpoints", scans, written(), n)
		}
		if err := k.TickNow(r.ctx); err != nil { // the clock as the writes left it: no RetryEvery
			t.Fatal(err)
		}
	}
}

// ckptRig is a rig with n started sessions and a Keeper of w1 holding them
// all, trusted for the whole test without a heartbeat (a TTL of a day),
// its config edited by edit and its store wrapped by store (either nil).
func ckptRig(t *testing.T, n int, edit func(*lease.Config), store func(*rig) lease.Store) (*rig, *lease.Keeper, []*lease.Held) {
	t.Helper()
	var items []lease.Item
	for i := range n {
		items = append(items, started(fmt.Sprintf("s-%02d", i)))
	}
	r := newRig(t, items...)
	cfg := lease.DefaultConfig("w1")
	cfg.TTL = 24 * time.Hour
	if edit != nil {
		edit(&cfg)
	}
	var st lease.Store = r.store
	if store != nil {
		st = store(r)
	}
	k, err := lease.NewKeeper(st, r.clk, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(r.ctx); err != nil {
		t.Fatal(err)
	}
	var hs []*lease.Held
	for _, it := range items {
		hs = append(hs, r.acquire(k, it.ConnectionID))
	}
	return r, k, hs
}
