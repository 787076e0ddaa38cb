//go:build fleetsim

package fleetsim

import (
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/testkit/simddb"
)

// The by-kind figures are the usage between two meter readings per
// worker-hour of the members' lives in between, without the harness's
// writes.
func TestOpRatesPerWorkerHourOfTheWindow(t *testing.T) {
	base := map[string]simddb.Usage{dynamostore.OpAcquire: {Calls: 10, ReadUnits: 4, ConditionFailed: 4, Throttled: 1}}
	now := map[string]simddb.Usage{
		dynamostore.OpAcquire: {Calls: 30, ReadUnits: 10, ConditionFailed: 8, Throttled: 4},
		simddb.OpSeed:         {Calls: 99, ReadUnits: 99},
	}
	t0 := time.Unix(0, 0)
	ms := []*Member{
		{Started: t0, Ended: t0.Add(2 * time.Hour)},                   // 1 h in the window
		{Started: t0.Add(90 * time.Minute)},                           // alive: 30 min
		{Started: t0, Ended: t0.Add(30 * time.Minute)},                // before it
		{Started: t0.Add(30 * time.Minute), Ended: t0.Add(time.Hour)}, // before it
	}
	h := workerHours(ms, t0.Add(time.Hour), t0.Add(2*time.Hour))
	if h != 1.5 {
		t.Fatalf("worker-hours %v, want 1.5", h)
	}
	got := opRates(now, base, h)
	want := OpRate{Calls: 20 / 1.5, ReadUnits: 6 / 1.5, Refused: 4 / 1.5, Throttled: 3 / 1.5}
	if len(got) != 1 || got[dynamostore.OpAcquire] != want {
		t.Fatalf("opRates %+v, want only acquire %+v", got, want)
	}
	if readUnitsOf(got) != 4 {
		t.Fatalf("read units %v, want 4", readUnitsOf(got))
	}
}
