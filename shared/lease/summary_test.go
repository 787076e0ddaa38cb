package lease_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
)

// itemCounter is a memstore that counts the worker ids and records its
// fleet-wide reads return (ListWorkers, GetWorkers): what grows with the
// fleet in a refresh.
type itemCounter struct {
	*memstore.Store
	items atomic.Int64
}

func (c *itemCounter) ListWorkers(ctx context.Context, list string, limit int) ([]string, error) {
	ids, err := c.Store.ListWorkers(ctx, list, limit)
	c.items.Add(int64(len(ids)))
	return ids, err
}

func (c *itemCounter) GetWorkers(ctx context.Context, ids []string) ([]lease.WorkerRecord, error) {
	recs, err := c.Store.GetWorkers(ctx, ids)
	c.items.Add(int64(len(recs)))
	return recs, err
}

// fleetOf registers n Keepers on store.
func fleetOf(t *testing.T, store lease.Store, clk clock.Clock, n int) []*lease.Keeper {
	t.Helper()
	var ks []*lease.Keeper
	for i := range n {
		k, err := lease.NewKeeper(store, clk, lease.DefaultConfig(fmt.Sprintf("w%03d", i)), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Register(context.Background()); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	return ks
}

// beatAll makes every Keeper of ks heartbeat now.
func beatAll(ks []*lease.Keeper) {
	for _, k := range ks {
		k.HeartbeatNow(context.Background())
	}
}

// refreshAll has every Keeper of ks refresh (RefreshWorkers), failing t on
// an error.
func refreshAll(t *testing.T, ks []*lease.Keeper) {
	t.Helper()
	for _, k := range ks {
		if err := k.RefreshWorkers(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// fleetRound is one refresh period of the live Keepers ks: the clock moves
// a RefreshEvery, every one heartbeats (or the summarizer's backstop
// would declare it dead), then every one refreshes.
func fleetRound(t *testing.T, clk *clock.Fake, ks []*lease.Keeper) {
	t.Helper()
	clk.Advance(lease.DefaultConfig("x").RefreshEvery)
	beatAll(ks)
	refreshAll(t, ks)
}

// steadyRefreshCost runs refresh rounds of a fleet of n (every Keeper
// refreshes every RefreshEvery) until the membership settled, then measures
// one round: the worker ids and records the fleet's refreshes read, and the
// store calls, per worker. Every Keeper's watch targets must be the
// rendezvous answer over the whole fleet.
func steadyRefreshCost(t *testing.T, n int) (items, calls float64) {
	store := &itemCounter{Store: memstore.New()}
	clk := clock.NewFake(t0)
	ks := fleetOf(t, store, clk, n)
	for range 3 {
		fleetRound(t, clk, ks)
	}
	// The last round's heartbeats come before the counting: only the
	// refreshes are counted.
	clk.Advance(lease.DefaultConfig("x").RefreshEvery)
	beatAll(ks)
	items0, calls0 := store.items.Load(), store.Calls.Load()
	refreshAll(t, ks)
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf("w%03d", i))
	}
	for i, k := range ks {
		if want := lease.Targets(all[i], all, lease.DefaultConfig("x").Watchers); !slices.Equal(k.Targets(), want) {
			t.Fatalf("%s watches %v, want %v", all[i], k.Targets(), want)
		}
	}
	return float64(store.items.Load()-items0) / float64(n), float64(store.Calls.Load()-calls0) / float64(n)
}

// TestRefreshReadsDoNotGrowWithTheFleet: a worker's refresh (the watch
// targets, every RefreshEvery) reads the same at 10 and at 100 workers.
// Before the fleet summary every refresh listed every ALIVE worker: the
// ids read per worker grew with the fleet (10 and 100), O(N²) fleet-wide.
// Now one worker lists and reads the records (2 × N items a round, 2 per
// worker amortized) and the others read one small head.
func TestRefreshReadsDoNotGrowWithTheFleet(t *testing.T) {
	items10, calls10 := steadyRefreshCost(t, 10)
	items100, calls100 := steadyRefreshCost(t, 100)
	t.Logf("per worker and refresh: %.2f ids/records and %.2f calls at 10 workers, %.2f and %.2f at 100", items10, calls10, items100, calls100)
	if items100 > 1.2*items10 || items100 > 3 {
		t.Fatalf("ids and records read per worker and refresh: %.2f at 100 workers vs %.2f at 10 (want ≤ 1.2 × and ≤ 3)", items100, items10)
	}
	if calls100 > 1.2*calls10 {
		t.Fatalf("store calls per worker and refresh: %.2f at 100 workers vs %.2f at 10", calls100, calls10)
	}
}

// TestSummarizerIsOneOfTheAliveByRendezvous: every worker computes the same
// order from the same list: exactly one writes first, the order is a
// permutation, and when the first leaves the second moves up; one join
// moves the first only if the newcomer ranks above it.
func TestSummarizerIsOneOfTheAliveByRendezvous(t *testing.T) {
	var alive []string
	for i := range 50 {
		alive = append(alive, fmt.Sprintf("w-%02d", i))
	}
	byRank := map[int]string{}
	for _, w := range alive {
		r := lease.SummarizerRank(w, alive)
		if _, dup := byRank[r]; dup || r < 0 || r >= len(alive) {
			t.Fatalf("%s ranks %d (ranks so far %v)", w, r, byRank)
		}
		byRank[r] = w
	}
	if lease.SummarizerRank("w-99", alive) != -1 {
		t.Fatal("a worker not in the list ranks")
	}
	rest := slices.DeleteFunc(slices.Clone(alive), func(w string) bool { return w == byRank[0] })
	if lease.SummarizerRank(byRank[1], rest) != 0 {
		t.Fatalf("with %s gone, %s does not write first", byRank[0], byRank[1])
	}
	shuffled := slices.Clone(alive)
	slices.Reverse(shuffled)
	if lease.SummarizerRank(byRank[0], shuffled) != 0 {
		t.Fatal("the order depends on the list's order")
	}
}

func TestSummaryDue(t *testing.T) {
	every := 5 * time.Second
	for _, c := range []struct {
		rank      int
		found     bool
		unchanged time.Duration
		want      bool
	}{
		{-1, false, 0, false},         // not alive in its own view
		{0, false, 0, true},           // cold start: the first three race
		{2, false, 0, true},           //
		{3, false, 0, false},          //
		{0, true, every / 2, true},    // the summarizer, every refresh
		{0, true, every / 4, false},   // another just wrote
		{1, true, 3*every - 1, false}, // second: only after three refreshes of no new head
		{1, true, 3 * every, true},    //
		{2, true, 4*every - 1, false}, // third: a refresh after the second
		{2, true, 4 * every, true},    //
		{40, true, 10 * every, false}, // far down: not yet
		{40, true, 42 * every, true},  // everyone ahead is gone: eventually
	} {
		if got := lease.SummaryDue(c.rank, c.found, c.unchanged, every); got != c.want {
			t.Errorf("SummaryDue(%d, %v, %s) = %v, want %v", c.rank, c.found, c.unchanged, got, c.want)
		}
	}
}

// TestNewWorkerWatchedAndDeadSummarizerReplaced: a worker that joins is
// watched (in its watchers' targets) within two refreshes; when the
// summarizer stops (crashed: no refresh, no heartbeat), the next worker in
// rendezvous order writes the head within SummaryTakeoverBound of its last
// write, and the membership it writes leaves the dead one out once its
// record is DEAD.
func TestNewWorkerWatchedAndDeadSummarizerReplaced(t *testing.T) {
	store := memstore.New()
	clk := clock.NewFake(t0)
	ctx := context.Background()
	cfg := lease.DefaultConfig("x")
	ks := fleetOf(t, store, clk, 6)
	live := slices.Clone(ks)
	round := func() { fleetRound(t, clk, live) }
	round()
	round()

	// A join: watched by its two rendezvous watchers within two refreshes.
	nk, err := lease.NewKeeper(store, clk, lease.DefaultConfig("w-new"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := nk.Register(ctx); err != nil {
		t.Fatal(err)
	}
	live = append(live, nk)
	ids := func(ks []*lease.Keeper) []string {
		var out []string
		for _, k := range ks {
			out = append(out, k.Config().Owner)
		}
		return out
	}
	watchedBy := func(target string) int {
		n := 0
		for _, k := range live {
			if slices.Contains(k.Targets(), target) {
				n++
			}
		}
		return n
	}
	for i := 1; watchedBy("w-new") < cfg.Watchers; i++ {
		if i > 2 {
			t.Fatalf("w-new watched by %d workers after two refreshes", watchedBy("w-new"))
		}
		round()
	}

	// The summarizer stops.
	head := store.Summary()
	if head == nil {
		t.Fatal("no summary written")
	}
	dead := head.Writer
	if lease.SummarizerRank(dead, ids(live)) != 0 {
		t.Fatalf("the head's writer %s is not first in rendezvous order", dead)
	}
	live = slices.DeleteFunc(live, func(k *lease.Keeper) bool { return k.Config().Owner == dead })
	lastWrite := clk.Now()
	bound := lease.SummaryTakeoverBound(cfg.RefreshEvery)
	for {
		round()
		if h := store.Summary(); h.Writer != dead {
			if h.Version <= head.Version {
				t.Fatalf("the head went from version %d to %d", head.Version, h.Version)
			}
			break
		}
		if clk.Now().Sub(lastWrite) > bound {
			t.Fatalf("no other worker wrote the head within %s of the last one", bound)
		}
	}
	// Its watchers declare it dead; the next head's membership leaves it out.
	rec, err := store.GetWorker(ctx, dead)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.DeclareDead(ctx, dead, rec.Epoch, rec.HeartbeatSeq, "test", clk.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	round()
	round()
	h := store.Summary()
	var members []string
	for n := range h.Pages {
		members = append(members, store.Members(n).IDs...)
	}
	slices.Sort(members)
	want := ids(live)
	slices.Sort(want)
	if !slices.Equal(members, want) {
		t.Fatalf("membership %v, want %v", members, want)
	}
}
