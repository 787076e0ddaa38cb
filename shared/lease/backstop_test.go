package lease_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// A worker dies with both its watchers (a deploy's SIGKILLs, an AZ): nobody
// watches it any more, and before the backstop it was declared only after
// one of its watchers was (a TTL and a listing later per link). The fleet
// summary's writer reads every alive record each refresh and declares it
// (and its dead watchers) within the TTL and a few refreshes of their last
// heartbeat, while the workers still heartbeating are never declared. The
// watchers' own passes do not run here: only the summarizer declares.
func TestSummarizerDeclaresAWorkerWhoseWatchersDiedWithIt(t *testing.T) {
	store := memstore.New()
	clk := clock.NewFake(t0)
	ctx := context.Background()
	cfg := lease.DefaultConfig("x")
	ks := fleetOf(t, store, clk, 6)
	live := slices.Clone(ks)
	round := func() { fleetRound(t, clk, live) }
	round()
	round()
	head := store.Summary()
	if head == nil {
		t.Fatal("no summary written")
	}
	summarizer := head.Writer
	watchers := func(id string) []string {
		var out []string
		for _, k := range live {
			if slices.Contains(k.Targets(), id) {
				out = append(out, k.Config().Owner)
			}
		}
		return out
	}
	// A victim whose watchers are not the summarizer: it, and they, die.
	var kill []string
	for _, k := range ks {
		id := k.Config().Owner
		if w := watchers(id); id != summarizer && len(w) == cfg.Watchers && !slices.Contains(w, summarizer) {
			kill = append(w, id)
			break
		}
	}
	if kill == nil {
		t.Fatal("every worker is watched by the summarizer at this fleet's rendezvous order: pick another fleet")
	}
	live = slices.DeleteFunc(live, func(k *lease.Keeper) bool { return slices.Contains(kill, k.Config().Owner) })
	killedAt := clk.Now()
	bound := cfg.TTL + 3*cfg.RefreshEvery
	dead := func(id string) bool {
		rec, err := store.GetWorker(ctx, id)
		return err == nil && rec.State == schema.WorkerDead
	}
	for {
		round()
		for _, k := range live {
			if dead(k.Config().Owner) {
				t.Fatalf("%s, heartbeating, was declared dead", k.Config().Owner)
			}
		}
		n := 0
		for _, id := range kill {
			if dead(id) {
				n++
			}
		}
		if n == len(kill) {
			break
		}
		if clk.Now().Sub(killedAt) > bound {
			t.Fatalf("%d of %v declared dead %s after they stopped, want all within %s (TTL + 3 refreshes)", n, kill, clk.Now().Sub(killedAt), bound)
		}
	}
	t.Logf("%v (the victim's watchers, then the victim) declared dead by the summarizer %s after they stopped", kill, clk.Now().Sub(killedAt))
}

// After an outage of the table (every heartbeat stopped with it, the
// summarizer's reads failing), the summarizer's first read that answers
// starts every wait again: the workers, heartbeating again at once, are
// not declared dead on counters it saw before the outage.
func TestSummarizerBackstopWaitsAgainAfterAnOutage(t *testing.T) {
	store := &failingWorkers{Store: memstore.New()}
	clk := clock.NewFake(t0)
	ctx := context.Background()
	cfg := lease.DefaultConfig("x")
	ks := fleetOf(t, store, clk, 4)
	refresh := func() {
		for _, k := range ks {
			_ = k.RefreshWorkers(ctx) // fails while the store is down
		}
	}
	for range 3 {
		fleetRound(t, clk, ks)
	}
	// The table is unreachable for longer than the TTL: no heartbeat, no
	// read of the records.
	store.down.Store(true)
	for range 4 {
		clk.Advance(cfg.RefreshEvery)
		refresh()
	}
	store.down.Store(false)
	// Back: the summarizer's refresh comes before anyone's heartbeat.
	clk.Advance(cfg.RefreshEvery)
	refresh()
	beatAll(ks)
	for _, k := range ks {
		rec, err := store.GetWorker(ctx, k.Config().Owner)
		if err != nil || rec.State != schema.WorkerAlive {
			t.Fatalf("%s after the outage: %s, %v: declared dead on a counter seen before it", k.Config().Owner, rec.State, err)
		}
	}
}

// failingWorkers is a memstore whose fleet reads and heartbeats fail while
// down.
type failingWorkers struct {
	*memstore.Store
	down atomic.Bool
}

var errDown = errors.New("table unreachable")

func (f *failingWorkers) GetWorkers(ctx context.Context, ids []string) ([]lease.WorkerRecord, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.Store.GetWorkers(ctx, ids)
}

func (f *failingWorkers) ListWorkers(ctx context.Context, list string, limit int) ([]string, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.Store.ListWorkers(ctx, list, limit)
}

// An outage shorter than two refreshes but longer than the TTL (the chaos
// run's: TTL 4 s, refresh 5 s, DynamoDB frozen 8 s): the summarizer's head
// read fails during it, so it makes no pass and its wait must restart all
// the same. Found by the short chaos run: workers not yet heartbeating
// again were declared dead at the first pass after DynamoDB came back, and
// their sessions were 5 s late (bound 3.4 s).
func TestSummarizerBackstopWaitsAgainAfterAShortOutage(t *testing.T) {
	store := &failingWorkers{Store: memstore.New()}
	clk := clock.NewFake(t0)
	ctx := context.Background()
	var ks []*lease.Keeper
	for _, id := range []string{"w000", "w001", "w002", "w003"} {
		cfg := lease.DefaultConfig(id)
		cfg.TTL, cfg.SafetyMargin = 4*time.Second, time.Second
		k, err := lease.NewKeeper(store, clk, cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Register(ctx); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	every := ks[0].Config().RefreshEvery
	for range 3 {
		fleetRound(t, clk, ks)
	}
	// Down for one refresh: the head read fails (no pass), no heartbeat.
	store.down.Store(true)
	clk.Advance(every)
	for _, k := range ks {
		_ = k.RefreshWorkers(ctx)
	}
	store.down.Store(false)
	// Back: the summarizer's refresh comes before anyone's heartbeat.
	clk.Advance(every)
	for _, k := range ks {
		_ = k.RefreshWorkers(ctx)
	}
	for _, k := range ks {
		rec, err := store.GetWorker(ctx, k.Config().Owner)
		if err != nil || rec.State != schema.WorkerAlive {
			t.Fatalf("%s after a %s outage: %s, %v: declared dead on a counter seen before it", k.Config().Owner, every, rec.State, err)
		}
	}
}

func (f *failingWorkers) GetSummary(ctx context.Context) (lease.Summary, error) {
	if f.down.Load() {
		return lease.Summary{}, errDown
	}
	return f.Store.GetSummary(ctx)
}
