package streamer

import (
	"context"
	"io"
	"testing"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// With a fleet budget, a worker that has not listed the fleet yet does not
// claim at the whole budget's rate (it does not know how many share it:
// its share is 0, the pacer's floor); once it has, its share is the budget
// divided by the alive workers.
func TestFleetBudgetShareWaitsForTheFirstListing(t *testing.T) {
	st := memstore.New()
	cfg := DefaultConfig()
	cfg.WorkerID, cfg.FleetClaimsPerSecond = "w-new", 30
	log := zerolog.Nop()
	w, err := New(cfg, Deps{Store: st, Handler: sink.Discard, Logger: &log, Metrics: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.claimShare(); got != 0 {
		t.Fatalf("share before the first listing %.2f/s, want 0 (the pacer's floor)", got)
	}
	for _, id := range []string{"w-a", "w-b"} {
		k, err := lease.NewKeeper(st, clock.Real{}, lease.DefaultConfig(id), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Register(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.keeper.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.keeper.RefreshWorkers(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := w.claimShare(); got != 10 {
		t.Fatalf("share with 3 alive workers of a budget of 30/s: %.2f/s, want 10", got)
	}
}

// With a fleet summary, a worker's share of the budget is its room's part
// of the fleet's room (the head's): an empty worker in a fleet whose room
// is mostly elsewhere claims at less than an even share, one with most of
// it at more; a worker not yet in the head's membership claims at the
// even share; and no part is ever above the whole budget.
func TestFleetBudgetShareFollowsTheRoom(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	cfg := DefaultConfig()
	cfg.WorkerID, cfg.FleetClaimsPerSecond, cfg.MaxSessions = "w-new", 30, 100
	log := zerolog.Nop()
	w, err := New(cfg, Deps{Store: st, Handler: sink.Discard, Logger: &log, Metrics: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"w-a", "w-b", "w-new"} {
		k, err := lease.NewKeeper(st, clock.Real{}, lease.DefaultConfig(id), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Register(ctx); err != nil {
			t.Fatal(err)
		}
	}
	head := func(version int64, room int, members ...string) {
		t.Helper()
		if err := st.PutMembers(ctx, 0, version, "w-a", members); err != nil {
			t.Fatal(err)
		}
		if err := st.PutSummary(ctx, lease.Summary{Version: version, Writer: "w-a", Alive: 3, Capacity: 300, Room: room, Members: version, MembersBy: "w-a", Pages: 1}); err != nil {
			t.Fatal(err)
		}
		if err := w.keeper.RefreshWorkers(ctx); err != nil {
			t.Fatal(err)
		}
	}
	head(1, 1000, "w-a", "w-b")
	if got := w.claimShare(); got != 10 {
		t.Fatalf("share of a worker not in the head's membership: %.2f/s, want the even 10 (30/s over 3)", got)
	}
	head(2, 1000, "w-a", "w-b", "w-new")
	if got := w.claimShare(); got != 3 {
		t.Fatalf("share of 100 of the fleet's 1,000 room: %.2f/s, want 3 (30 × 100/1,000)", got)
	}
	head(3, 125, "w-a", "w-b", "w-new")
	if got := w.claimShare(); got != 24 {
		t.Fatalf("share of 100 of the fleet's 125 room: %.2f/s, want 24", got)
	}
	for _, c := range []struct {
		mine, fleet int
		want        float64
	}{{50, 100, 15}, {100, 50, 30}, {-5, 100, 0}, {0, 0, 0}} {
		if got := roomShare(30, c.mine, c.fleet); got != c.want {
			t.Errorf("roomShare(30, %d, %d) = %.2f, want %.2f", c.mine, c.fleet, got, c.want)
		}
	}
}
