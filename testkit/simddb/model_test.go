package simddb_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/ddbrules"
	"github.com/wsfleet/wsfleet/testkit/simddb"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// acquire seeds session id and makes w (registered) its owner.
func acquire(t *testing.T, s *simddb.Store, id, w string) lease.Token {
	t.Helper()
	s.Put(leasetest.Started(id))
	it, err := s.Acquire(context.Background(), id, w, lease.From{})
	if err != nil {
		t.Fatal(err)
	}
	return lease.Token{ConnectionID: id, Owner: w, Epoch: it.Epoch}
}

// A key written above 1,000 write units a second is throttled, with
// DynamoDB's exception and reason, and nothing of the refused writes is
// applied; a cold key in the same second is not; the hot key takes writes
// again as its bucket refills. The meters show the hot key's busiest second
// at its rate.
func TestHotKeyThrottled(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newStore(t, simddb.Config{Clock: clk, Throughput: ddbrules.AWSThroughput()})
	ctx := context.Background()
	if err := s.Register(ctx, leasetest.Worker("w")); err != nil {
		t.Fatal(err)
	}
	hot, cold := acquire(t, s, "hot", "w"), acquire(t, s, "cold", "w")
	throttled := 0
	for seq := int64(1); seq <= 1500; seq++ {
		err := s.Checkpoint(ctx, hot, seq)
		var te *simddb.ThrottleError
		switch {
		case err == nil:
		case errors.Is(err, lease.ErrThrottled) && errors.As(err, &te):
			throttled++
			if te.ErrorCode() != "ThrottlingException" || te.Reasons[0].Reason != ddbrules.TableWriteKeyRange || !lease.IsTransient(err) {
				t.Fatalf("throttled as %v (%s)", err, te.ErrorCode())
			}
		default:
			t.Fatalf("checkpoint %d: %v", seq, err)
		}
		if seq%150 == 0 {
			if err := s.Checkpoint(ctx, cold, seq); err != nil {
				t.Fatalf("a cold key in the hot key's second: %v", err)
			}
		}
	}
	// The seed and the acquire took two units of the hot key's second
	// (the checkpoint is on the session item).
	if throttled != 502 {
		t.Errorf("%d of 1,500 one-unit writes in one second throttled, want 502 (1,000 units a second, two taken by the session's seed and its acquire)", throttled)
	}
	if got, err := s.Get(ctx, "hot"); err != nil || got.LastSeq != 998 {
		t.Fatalf("the hot key's checkpoint %d (%v), want 998: a throttled write applied", got.LastSeq, err)
	}
	clk.Advance(time.Second)
	if err := s.Checkpoint(ctx, hot, 2000); err != nil {
		t.Fatalf("a second later: %v", err)
	}
	m := s.Meter()
	if tm := s.TableMeter(); tm.Table != m.Table || !maps.Equal(tm.Throttled, m.Throttled) || !maps.Equal(tm.Ops, m.Ops) || tm.Partitions != nil {
		t.Errorf("TableMeter %+v, want Meter's table, ops and throttles (%+v) and no keys", tm, m)
	}
	ck := m.Partitions["hot"]
	if ck.Write.Peak != 1000 || !ck.Write.PeakAt.Equal(t0) || ck.Write.Total != 1001 {
		t.Errorf("hot session item: %+v, want a peak of 1,000 units at %s, 1,001 in all", ck.Write, t0)
	}
	if u := m.Ops["checkpoint"]; u.Throttled != 502 || u.WriteUnits != 999+10 {
		t.Errorf("checkpoint usage %+v", u)
	}
	if m.Throttled[ddbrules.TableWriteKeyRange] != 502 {
		t.Errorf("throttled by reason: %v", m.Throttled)
	}
}

// Each index lags on its own: by_owner 10 s, by_unowned 1 s,
// by_worker_list not at all; a consistent read (Get) never lags.
func TestIndexLagIsPerIndex(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newStore(t, simddb.Config{Clock: clk, Lag: map[string]ddbrules.Dist{
		schema.IndexByOwner:   {Median: 10 * time.Second},
		schema.IndexByUnowned: {Median: time.Second},
	}})
	ctx := context.Background()
	unowned := func() []string {
		ids, err := s.Unowned(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	owned := func() []string {
		got, err := s.OwnedBy(ctx, "w", 0)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, o := range got {
			ids = append(ids, o.ConnectionID)
		}
		return ids
	}
	s.Put(leasetest.Started("a"))
	if got := unowned(); len(got) != 0 {
		t.Fatalf("by_unowned shows a seed at once: %v", got)
	}
	clk.Advance(time.Second)
	if got := unowned(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("by_unowned a second after the seed: %v", got)
	}
	if err := s.Register(ctx, leasetest.Worker("w")); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.ListWorkers(ctx, schema.WorkerListAlive, 0); err != nil || !slices.Equal(ids, []string{"w"}) {
		t.Fatalf("by_worker_list (no lag): %v %v", ids, err)
	}
	if _, err := s.Acquire(ctx, "a", "w", lease.From{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "a"); got.Owner != "w" {
		t.Fatalf("a consistent read lags: %+v", got)
	}
	if got, o := unowned(), owned(); !slices.Equal(got, []string{"a"}) || len(o) != 0 {
		t.Fatalf("right after the acquire: unowned %v owned %v, want both indexes behind", got, o)
	}
	clk.Advance(time.Second)
	if got, o := unowned(), owned(); len(got) != 0 || len(o) != 0 {
		t.Fatalf("1 s after: unowned %v owned %v, want by_unowned caught up, by_owner not", got, o)
	}
	clk.Advance(9 * time.Second)
	if o := owned(); !slices.Equal(o, []string{"a"}) {
		t.Fatalf("10 s after: owned %v", o)
	}
	if p := s.Pending(); p[schema.IndexByOwner] != 0 || p[schema.IndexByUnowned] != 0 {
		t.Errorf("pending after catching up: %v", p)
	}
}

// An index whose writes are throttled back-pressures the base table (the
// write refused, nothing applied, reason IndexWriteKeyRangeThroughputExceeded
// on that index) and lags more than the others: the next writes that reach
// it take ThrottledLag longer, while by_unowned keeps its own lag.
func TestThrottledIndexLagsMore(t *testing.T) {
	clk := clock.NewFake(t0)
	s := newStore(t, simddb.Config{Clock: clk, Throughput: ddbrules.AWSThroughput(), ThrottledLag: 5 * time.Second, ThrottledFor: 10 * time.Second})
	ctx := context.Background()
	for _, w := range []string{"hot", "cold"} {
		if err := s.Register(ctx, leasetest.Worker(w)); err != nil {
			t.Fatal(err)
		}
	}
	s.Put(leasetest.Started("x"))
	s.Put(leasetest.Started("y"))
	s.HotKey("hot", 0, time.Minute) // by_owner key "hot" takes no writes
	_, err := s.Acquire(ctx, "x", "hot", lease.From{})
	var te *simddb.ThrottleError
	if !errors.As(err, &te) || te.Reasons[0].Reason != ddbrules.IndexWriteKeyRange || te.Reasons[0].Resource[len(te.Reasons[0].Resource)-len(schema.IndexByOwner):] != schema.IndexByOwner {
		t.Fatalf("acquire onto a throttled by_owner key: %v", err)
	}
	if got, _ := s.Get(ctx, "x"); got.Owner != "" || got.Epoch != 0 {
		t.Fatalf("the refused acquire applied: %+v", got)
	}
	if _, err := s.Acquire(ctx, "y", "cold", lease.From{}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.Unowned(ctx, 0); !slices.Equal(ids, []string{"x"}) {
		t.Fatalf("by_unowned (not throttled, no lag): %v", ids)
	}
	owned := func() int {
		o, err := s.OwnedBy(ctx, "cold", 0)
		if err != nil {
			t.Fatal(err)
		}
		return len(o)
	}
	if n := owned(); n != 0 {
		t.Fatal("by_owner, throttled a moment ago, shows the next write at once")
	}
	clk.Advance(5 * time.Second)
	if n := owned(); n != 1 {
		t.Fatal("by_owner has not caught up ThrottledLag after")
	}
	if m := s.Meter(); m.Throttled[ddbrules.IndexWriteKeyRange] != 1 || m.Ops["acquire"].Throttled != 1 {
		t.Errorf("meters: %+v %+v", m.Throttled, m.Ops["acquire"])
	}
}

// A small fleet for a while in a synctest bubble (virtual time), with AWS
// latency, lag and throttling: every worker heartbeats, takes its sessions,
// checkpoints them and lists the fleet. The same seed gives the same
// meters, to the busiest second of every key.
func TestSameSeedSameMeters(t *testing.T) {
	run := func(seed uint64) (m simddb.Meter) {
		synctest.Test(t, func(t *testing.T) {
			cfg := simddb.AWS()
			cfg.Seed = seed
			s := newStore(t, cfg)
			ctx := context.Background()
			for i := range 40 {
				s.Put(leasetest.Started(fmt.Sprintf("s%02d", i)))
			}
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() {
					id := fmt.Sprintf("w%d", w)
					if err := s.Register(ctx, leasetest.Worker(id)); err != nil {
						t.Error(err)
						return
					}
					var toks []lease.Token
					for i := w; i < 40; i += 8 {
						sid := fmt.Sprintf("s%02d", i)
						it, err := s.Acquire(ctx, sid, id, lease.From{})
						if err != nil {
							t.Error(err)
							return
						}
						toks = append(toks, lease.Token{ConnectionID: sid, Owner: id, Epoch: it.Epoch})
					}
					for tick := int64(1); tick <= 30; tick++ {
						time.Sleep(time.Second)
						if _, err := s.Heartbeat(ctx, id, 1, lease.Heartbeat{Seq: tick, AtMs: time.Now().UnixMilli()}); err != nil {
							t.Error(err)
						}
						if tick%5 == 0 {
							for _, tok := range toks {
								if err := s.Checkpoint(ctx, tok, tick*100); err != nil {
									t.Error(err)
								}
							}
							if _, err := s.ListWorkers(ctx, schema.WorkerListAlive, 0); err != nil {
								t.Error(err)
							}
							if _, err := s.OwnedBy(ctx, id, 0); err != nil {
								t.Error(err)
							}
						}
					}
				})
			}
			wg.Wait()
			m = s.Meter()
		})
		return m
	}
	a, b := run(42), run(42)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs of seed 42 metered differently:\n%+v\n%+v", a.Total(), b.Total())
	}
	if u := a.Total(); u.Calls == 0 || u.WriteUnits == 0 || a.Table.Write.Peak == 0 {
		t.Fatalf("nothing metered: %+v", u)
	}
	if a.Contended != 0 {
		t.Errorf("%d calls met another on their key: the run is not the seed's alone", a.Contended)
	}
}

// With the worker's retrying (WorkerRetry), a call throttled once is tried
// again after the SDK's jittered wait (virtual time, in a synctest bubble)
// and succeeds once its key's bucket refilled; each refused attempt is
// metered as throttled, only the one admitted is billed.
func TestThrottledCallIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStore(t, simddb.Config{Throughput: ddbrules.AWSThroughput(), Retry: simddb.WorkerRetry()})
		ctx := context.Background()
		if err := s.Register(ctx, leasetest.Worker("w")); err != nil {
			t.Fatal(err)
		}
		tok := acquire(t, s, "hot", "w")
		for seq := int64(1); seq <= 998; seq++ { // with the seed and the acquire: the bucket's 1,000 units
			if err := s.Checkpoint(ctx, tok, seq); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		if err := s.Checkpoint(ctx, tok, 1000); err != nil {
			t.Fatalf("a retried checkpoint: %v", err)
		}
		waited := time.Since(start)
		u := s.Meter().Ops["checkpoint"]
		if u.Throttled < 1 || u.Throttled > 2 || u.WriteUnits != 999 || waited <= 0 || waited > 2*time.Second+2*time.Second {
			t.Fatalf("after %s: %+v", waited, u)
		}
	})
}

// A query throttled and retried answers what its last attempt read, once:
// ListWorkers, Unowned and OwnedBy, with their index key values' read
// buckets small, each answered after a throttled attempt name every entry
// once (a retried call once answered every attempt's entries: a 1,000 ×
// 1,000,000 fleet simulation's takeover planned more sessions than the
// dead worker held).
func TestThrottledQueryAnswersOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th := ddbrules.AWSThroughput()
		th.IndexRCU, th.Burst = 0.2, time.Second
		s := newStore(t, simddb.Config{Throughput: th, Retry: simddb.WorkerRetry()})
		ctx := context.Background()
		for _, w := range []string{"w1", "w2", "w3"} {
			if err := s.Register(ctx, leasetest.Worker(w)); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 40 {
			s.Put(leasetest.Started(fmt.Sprintf("u%02d", i)))
			acquire(t, s, fmt.Sprintf("o%02d", i), "w1")
		}
		time.Sleep(time.Minute) // every index caught up, every bucket full
		queries := map[string]func() ([]string, error){
			"list_workers": func() ([]string, error) { return s.ListWorkers(ctx, schema.WorkerListAlive, 0) },
			"unowned":      func() ([]string, error) { return s.Unowned(ctx, 0) },
			"owned_by": func() ([]string, error) {
				owned, err := s.OwnedBy(ctx, "w1", 0)
				var ids []string
				for _, o := range owned {
					ids = append(ids, o.ConnectionID)
				}
				return ids, err
			},
		}
		want := map[string]int{"list_workers": 3, "unowned": 40, "owned_by": 40}
		retried := map[string]bool{}
		for round := 0; round < 200 && len(retried) < len(queries); round++ {
			for op, q := range queries {
				before := s.Meter().Ops[op].Throttled
				ids, err := q()
				if errors.Is(err, lease.ErrThrottled) {
					continue // every attempt throttled: no answer to check
				}
				if err != nil {
					t.Fatalf("%s: %v", op, err)
				}
				if s.Meter().Ops[op].Throttled > before {
					retried[op] = true
				}
				seen := map[string]bool{}
				for _, id := range ids {
					if seen[id] {
						t.Fatalf("%s named %s twice: %v", op, id, ids)
					}
					seen[id] = true
				}
				if len(ids) != want[op] {
					t.Fatalf("%s answered %d, want %d: %v", op, len(ids), want[op], ids)
				}
			}
		}
		for op := range queries {
			if !retried[op] {
				t.Errorf("%s was never answered after a throttled attempt: the check did not run (meter %+v)", op, s.Meter().Ops[op])
			}
		}
	})
}
