package streamer

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// recordReads is a memstore that counts the worker ids and records its
// fleet-wide reads return (ListWorkers, GetWorkers).
type recordReads struct {
	*memstore.Store
	items atomic.Int64
}

func (c *recordReads) ListWorkers(ctx context.Context, list string, limit int) ([]string, error) {
	ids, err := c.Store.ListWorkers(ctx, list, limit)
	c.items.Add(int64(len(ids)))
	return ids, err
}

func (c *recordReads) GetWorkers(ctx context.Context, ids []string) ([]lease.WorkerRecord, error) {
	recs, err := c.Store.GetWorkers(ctx, ids)
	c.items.Add(int64(len(recs)))
	return recs, err
}

// roundReads is what one rebalancing round of a worker reads in a fleet of
// n other workers once their Keepers have refreshed: ids and records
// returned, and store calls.
func roundReads(t *testing.T, n int) (items, calls int64) {
	ctx := context.Background()
	w, st := fleetAround(t, n)
	items0, calls0 := st.items.Load(), st.Calls.Load()
	if err := w.rebalanceRound(ctx); err != nil {
		t.Fatal(err)
	}
	return st.items.Load() - items0, st.Calls.Load() - calls0
}

// fleetAround is a running worker (w-me) in a fleet of n other workers
// (w-000 …, each holding 10 of 100 sessions, with an admin address) once
// every Keeper has refreshed twice, on a store counting what fleet-wide
// reads return.
func fleetAround(t *testing.T, n int) (*Worker, *recordReads) {
	t.Helper()
	return fleetAroundWith(t, n, nil)
}

// fleetAroundWith is fleetAround with the worker's Deps changed by tweak
// (nil: none).
func fleetAroundWith(t *testing.T, n int, tweak func(*Deps)) (*Worker, *recordReads) {
	t.Helper()
	ctx := context.Background()
	st := &recordReads{Store: memstore.New()}
	clk := clock.NewFake(clock.Real{}.Now())
	var ks []*lease.Keeper
	for i := range n {
		id := fmt.Sprintf("w-%03d", i)
		// Never heartbeating, the records age with the clock's refreshes:
		// a TTL long enough that a takeover's plan (directMoves, which
		// leaves out the quiet ones: lease.HeartbeatQuiet) still counts
		// them as receivers.
		lc := lease.DefaultConfig(id)
		lc.TTL = time.Minute
		k, err := lease.NewKeeper(st, clk, lc, nil, func() lease.Load {
			return lease.Load{Sessions: 10, Capacity: 100, AdminAddr: "10.0.0.1:8081"}
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Register(ctx); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	cfg := DefaultConfig()
	cfg.WorkerID, cfg.AdminAddr = "w-me", ""
	log := logging.New(io.Discard, schema.ServiceStreamer, "error")
	deps := Deps{Store: st, Clock: clk, Handler: &recSink{by: map[string][]delivery{}}, Logger: &log, Metrics: io.Discard}
	if tweak != nil {
		tweak(&deps)
	}
	w, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.keeper.Register(ctx); err != nil {
		t.Fatal(err)
	}
	ks = append(ks, w.keeper)
	for range 2 {
		clk.Advance(lease.DefaultConfig("x").RefreshEvery)
		for _, k := range ks {
			if err := k.RefreshWorkers(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	w.mu.Lock()
	w.state = stateRunning
	w.mu.Unlock()
	return w, st
}

// TestTakeoverReadsABoundedSampleOfTheFleet: the moves of a dead worker's
// sessions (a takeover's plan, directMoves) read at most
// lease.FleetSampleSize records in a fleet of 150 others and list nothing
// (150 ids and 150 records before: at an AZ's loss every takeover read the
// whole fleet at once), and still place every session within the
// sample's room; a drain's plan lists the ids afresh and reads a sample.
func TestTakeoverReadsABoundedSampleOfTheFleet(t *testing.T) {
	w, st := fleetAround(t, 150)
	items0 := st.items.Load()
	moves, err := w.directMoves("w-007", 500)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.items.Load() - items0; got > lease.FleetSampleSize {
		t.Fatalf("a takeover's plan read %d ids and records in a fleet of 150: want at most %d", got, lease.FleetSampleSize)
	}
	placed := 0
	for _, m := range moves {
		if m.To == "w-007" {
			t.Fatalf("a move to the dead worker: %+v", m)
		}
		placed += m.Count
	}
	if placed != 500 || len(moves) > lease.FleetSampleSize+1 {
		t.Fatalf("%d of 500 sessions placed over %d receivers: want all, over at most the sample and this worker", placed, len(moves))
	}
	// A drain's plan lists the fleet now (its ids) and reads a sample.
	items0 = st.items.Load()
	if moves, err = w.directMoves(w.cfg.WorkerID, 100); err != nil {
		t.Fatal(err)
	}
	if got := st.items.Load() - items0; got > 151+lease.FleetSampleSize || len(moves) == 0 {
		t.Fatalf("a drain's plan read %d ids and records in a fleet of 151 (%d moves): want the listing and at most %d records", got, len(moves), lease.FleetSampleSize)
	}
}

// TestRebalanceRoundReadsDoNotGrowWithTheFleet: a rebalancing round reads
// nothing about the other workers once a fleet summary exists (its plan is
// the head the Keeper's last refresh read), at 10 as at 100 workers. Before
// it, every round listed every ALIVE worker and read every record: 2 × N
// ids and records per worker and round.
func TestRebalanceRoundReadsDoNotGrowWithTheFleet(t *testing.T) {
	items10, calls10 := roundReads(t, 10)
	items100, calls100 := roundReads(t, 100)
	t.Logf("a round read %d ids/records in %d calls at 10 workers, %d in %d at 100", items10, calls10, items100, calls100)
	if items10 != 0 || items100 != 0 || calls100 > calls10 {
		t.Fatalf("a round read %d ids/records (%d calls) at 10 workers, %d (%d calls) at 100: want none", items10, calls10, items100, calls100)
	}
}

// TestSummaryPlanAndTheRoundsMoves: the summarizer's plan names each move's
// receiver with its admin address; a round acts on a head once, and never
// moves more than the worker's own count is above its share (the head
// counted its load from an older heartbeat).
func TestSummaryPlanAndTheRoundsMoves(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	clk := clock.NewFake(clock.Real{}.Now())
	cfg := DefaultConfig()
	cfg.WorkerID, cfg.AdminAddr, cfg.MaxSessions = "w-me", "", 100
	log := logging.New(io.Discard, schema.ServiceStreamer, "error")
	w, err := New(cfg, Deps{Store: st, Clock: clk, Handler: &recSink{by: map[string][]delivery{}}, Logger: &log, Metrics: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.state = stateRunning
	w.mu.Unlock()
	rec := func(id string, load int) lease.WorkerRecord {
		return lease.WorkerRecord{ID: id, State: schema.WorkerAlive, Load: load, Capacity: 100, AdminAddr: id + ":8081"}
	}
	p := w.summaryPlan([]lease.WorkerRecord{rec("w-a", 40), rec("w-b", 0), rec("w-me", 0)})
	if p.Capacity != 300 || len(p.Moves) == 0 {
		t.Fatalf("plan %+v", p)
	}
	addrs := map[string]string{}
	for _, x := range p.Peers {
		addrs[x.ID] = x.AdminAddr
	}
	for _, m := range p.Moves {
		if m.From != "w-a" || addrs[m.To] != m.To+":8081" {
			t.Fatalf("move %+v with peers %+v", m, p.Peers)
		}
	}

	// A head whose plan moves 5 from w-me, which holds nothing now.
	if err := st.PutSummary(ctx, lease.Summary{Version: 1, Writer: "w-a", Alive: 3, Load: 40, Capacity: 300, Members: 1, MembersBy: "w-a", Pages: 1,
		Peers: []lease.SummaryPeer{{ID: "w-b", AdminAddr: "w-b:8081"}}, Moves: []lease.SummaryMove{{From: "w-me", To: "w-b", Count: 5}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutMembers(ctx, 0, 1, "w-a", []string{"w-a", "w-b", "w-me"}); err != nil {
		t.Fatal(err)
	}
	if err := w.keeper.RefreshWorkers(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := w.roundPlan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.moves) != 0 || v.addrs["w-b"] != "w-b:8081" || v.share < 13 || v.share > 14 {
		t.Fatalf("round %+v: want no move (nothing above its share), w-b's address, a share of 40/3", v)
	}
	if _, moves, ok := w.keeper.TakeMoves(); !ok || len(moves) != 0 {
		t.Fatalf("the same head's moves taken twice: %v", moves)
	}
}
