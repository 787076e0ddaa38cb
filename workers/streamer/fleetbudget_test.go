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
