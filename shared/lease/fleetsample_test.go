package lease_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
)

// SampleOf draws, for each key, n distinct ids of the list, the same
// whatever the list's order; the samples of an AZ's 334 dead workers over
// the 666 survivors cover every survivor, none in many more samples than
// an even spread gives it (64 × 334 ÷ 666 ≈ 32), where one sample for
// every key would put all 334 takeovers on the same 64.
func TestSampleOfSpreadsTakeoversOverTheSurvivors(t *testing.T) {
	var survivors []string
	for i := range 666 {
		survivors = append(survivors, fmt.Sprintf("w-%03d", 3*(i/2)+1+i%2))
	}
	in := map[string]int{}
	for i := range 334 {
		dead := fmt.Sprintf("w-%03d", 3*i)
		s := lease.SampleOf(dead, survivors, lease.FleetSampleSize)
		rev := slices.Clone(survivors)
		slices.Reverse(rev)
		if again := lease.SampleOf(dead, rev, lease.FleetSampleSize); !slices.Equal(s, again) {
			t.Fatalf("%s: two samples of one list: %v and %v", dead, s[:3], again[:3])
		}
		if len(s) != lease.FleetSampleSize {
			t.Fatalf("%s: a sample of %d, want %d", dead, len(s), lease.FleetSampleSize)
		}
		seen := map[string]bool{}
		for _, id := range s {
			if seen[id] || !slices.Contains(survivors, id) {
				t.Fatalf("%s: %s twice or not in the list", dead, id)
			}
			seen[id] = true
			in[id]++
		}
	}
	least, most := 334, 0
	for _, id := range survivors {
		least, most = min(least, in[id]), max(most, in[id])
	}
	if least == 0 || most > 64 {
		t.Fatalf("survivors in %d to %d of the 334 samples: want every one in some, none in more than twice the mean (32)", least, most)
	}
	if got := lease.SampleOf("x", survivors[:10], 64); len(got) != 10 {
		t.Fatalf("a sample of 64 from 10 ids has %d, want all 10", len(got))
	}
	if got := lease.SampleOf("x", survivors, 0); len(got) != 0 {
		t.Fatalf("a sample of 0: %v", got)
	}
}

// A takeover's read of the fleet (FleetSample) is bounded: in a fleet
// larger than the sample it reads n records of its last refresh's
// membership and lists nothing (every alive record and a listing of the
// ALIVE index before: 100 + 100 items here); in a fleet of at most n
// others it lists afresh and reads everyone, including a worker that
// registered after the last refresh.
func TestFleetSampleReadsABoundedSample(t *testing.T) {
	ctx := context.Background()
	store := &itemCounter{Store: memstore.New()}
	clk := clock.NewFake(t0)
	ks := fleetOf(t, store, clk, 100)
	for range 3 {
		fleetRound(t, clk, ks)
	}
	me, dead := ks[0], "w001"
	items0 := store.items.Load()
	recs, err := me.FleetSample(ctx, dead, 16)
	if err != nil {
		t.Fatal(err)
	}
	if got := store.items.Load() - items0; got != 16 || len(recs) != 16 {
		t.Fatalf("a sample of 16 in a fleet of 100 read %d ids and records, returned %d: want 16 records and no listing", got, len(recs))
	}
	for _, r := range recs {
		if r.ID == dead || r.ID == "w000" || !r.Alive() {
			t.Fatalf("the sample holds %s (state %s): want alive workers other than the dead and the reader", r.ID, r.State)
		}
	}

	// A drain's sample is drawn from a listing made now: a worker that
	// registered since the last refresh can be in it.
	late, err := lease.NewKeeper(store, clk, lease.DefaultConfig("w-late"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Register(ctx); err != nil {
		t.Fatal(err)
	}
	items0 = store.items.Load()
	if recs, err = me.FleetSampleListed(ctx, "w000", 16); err != nil {
		t.Fatal(err)
	}
	if got := store.items.Load() - items0; got != 101+16 || len(recs) != 16 {
		t.Fatalf("a listed sample of 16 in a fleet of 101 read %d ids and records, returned %d: want the 101 ids listed and 16 records", got, len(recs))
	}
	if recs, err = me.FleetSampleListed(ctx, "w000", 200); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(recs, func(r lease.WorkerRecord) bool { return r.ID == "w-late" }) || len(recs) != 100 {
		t.Fatalf("a listed sample of up to 200 holds %d records, w-late among them %v: want every other worker, the one registered since the refresh too", len(recs), slices.ContainsFunc(recs, func(r lease.WorkerRecord) bool { return r.ID == "w-late" }))
	}

	small := fleetOf(t, memstore.New(), clk, 5)
	refreshAll(t, small)
	late, err = lease.NewKeeper(small[0].Store(), clk, lease.DefaultConfig("w-late"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Register(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err = small[0].FleetSample(ctx, "w001", 16)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	if !slices.Contains(ids, "w-late") || len(ids) != 6 {
		t.Fatalf("a fleet of 6 read %v: want everyone, the worker registered since the refresh too", ids)
	}
}
