package simddb_test

import (
	"os"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/simddb"
)

// The engine is needed only by TestBillsAsTheModel (the one-definition
// check against testkit/dynamodel); the others run on no engine.
func TestMain(m *testing.M) { os.Exit(enginetest.Main(m, enginetest.Needs{Dynamo: true})) }

func newStore(t testing.TB, cfg simddb.Config) *simddb.Store {
	t.Helper()
	s, err := simddb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// harness is memstore's conformance harness on the simulated store: ingest's
// writes go through the store's Update and UpdateWorker (metered, sent to
// the indexes after their lag).
func harness(s *simddb.Store) leasetest.Harness { return leasetest.InMemoryHarness(s) }

// With nothing on (no latency, no lag, no throttling) the store is the
// memory store with meters.
func TestConformance(t *testing.T) {
	s := newStore(t, simddb.Off())
	h := harness(s)
	leasetest.Run(t, func(*testing.T) leasetest.Harness { return h }, leasetest.Options{RaceRounds: 200, Racers: 64})
}

// With DynamoDB's behaviour on the real clock: AWS latency, each index
// lagging on its own, the documented throughput; every twentieth round of
// the race on a hot key (a fifth of a partition's rate, its burst drained,
// as dynamostore's run on the model does): the racers, throttled, try
// again. At 5 % (the model run's) the 64 racers' tries at that key took a
// minute and a half of the suite's run.
func TestConformanceAWS(t *testing.T) {
	cfg := simddb.AWS()
	cfg.Seed = 7
	// The racers retry a throttled acquire themselves (as a reconcile pass
	// would); the SDK's waits on top of theirs, up to 2 s each, made the
	// race a minute long (TestThrottledCallIsRetried covers them).
	cfg.Retry = simddb.Retry{}
	s := newStore(t, cfg)
	h := harness(s)
	hot := func(round int, id string) {
		if round%20 == 19 {
			s.HotKey(id, 0.2, 3*time.Second)
			s.DrainKey(id)
		}
	}
	start := time.Now()
	leasetest.Run(t, func(*testing.T) leasetest.Harness { return h }, leasetest.Options{RaceRounds: 200, Racers: 64, BeforeRace: hot})
	u := s.Meter().Total()
	t.Logf("conformance on simddb (aws): %s, %d calls, %d requests, %d throttled, %.1f write units, %.1f index write units, %.1f read units",
		time.Since(start).Round(time.Millisecond), u.Calls, u.Requests, u.Throttled, u.WriteUnits, u.IndexWriteUnits, u.ReadUnits)
	if u.Throttled == 0 {
		t.Error("the hot rounds throttled nothing")
	}
}

// The configuration suite on the simulated store (the memory store's
// semantics; the items billed as dynamostore's: a spec item of their own).
func TestSpecConformance(t *testing.T) {
	s := newStore(t, simddb.Off())
	h := harness(s)
	leasetest.RunSpec(t, func(*testing.T) leasetest.Harness { return h })
}
