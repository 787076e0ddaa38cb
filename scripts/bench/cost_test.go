package bench

import (
	"math"
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// One hour of 2 workers × 5,000 sessions at the defaults: 3,600
// heartbeats per worker (1 unit each), 60 checkpoints per session (1 unit
// each), a watcher's 4 reads/s, the by_owner audit's pages.
func sampleUnits() map[string]Usage {
	return map[string]Usage{
		dynamostore.OpHeartbeat:  {Writes: 7200, WriteUnits: 7200},
		dynamostore.OpCheckpoint: {Writes: 600_000, WriteUnits: 600_000},
		dynamostore.OpGetWorker:  {Reads: 28_800, ReadUnits: 28_800},
		dynamostore.OpOwnedBy:    {Reads: 1440, ReadUnits: 90_000},
		dynamostore.OpAcquire:    {}, // no request: left out
	}
}

func TestSplit(t *testing.T) {
	s := Split(sampleUnits(), 10_000, 2)
	if len(s.Kinds) != 4 {
		t.Fatalf("kinds: %+v", s.Kinds)
	}
	if s.Kinds[0].Kind != dynamostore.OpHeartbeat || s.Kinds[len(s.Kinds)-1].Category != dynamostore.CatReads {
		t.Fatalf("order (liveness first, reads last): %+v", s.Kinds)
	}
	live := s.Category(dynamostore.CatLiveness)
	// Measured at 5,000 sessions per worker: 7,200 / 10,000 = 0.72; at
	// the defaults' 1,000 per worker: 3,600 per worker-hour / 1,000 = 3.6.
	if !near(live.WRUPerSH, 0.72) || !near(live.NormWRUPerSH, 3.6) || !near(live.WRUPerWH, 3600) {
		t.Fatalf("liveness: %+v", live)
	}
	ck := s.Category(dynamostore.CatCheckpoint)
	if !near(ck.WRUPerSH, 60) || !near(ck.NormWRUPerSH, 60) {
		t.Fatalf("checkpoints scale with sessions: %+v", ck)
	}
	rd := s.Category(dynamostore.CatReads)
	// get_worker: per worker, 14,400 per worker-hour → 14.4; owned_by: per
	// session, 9.
	if !near(rd.NormRRUPerSH, 14.4+9) || !near(rd.RRUPerSH, 2.88+9) {
		t.Fatalf("reads: %+v", rd)
	}
	if !near(s.Total.NormWRUPerSH, 63.6) || s.Category(dynamostore.CatOwnership).WRUPerSH != 0 {
		t.Fatalf("total: %+v", s.Total)
	}
	if PerWorker(dynamostore.OpOwnedBy) || !PerWorker(dynamostore.OpUnowned) {
		t.Fatal("owned_by pages grow with the sessions; unowned is one pass per worker")
	}
}

func TestCeilingAndMonthly(t *testing.T) {
	// 63.6 WRU per session-hour: 40,000 × 3,600 / 63.6 = 2,264,150 sessions.
	if got := TableCeiling(63.6); got != 2264150 {
		t.Fatalf("ceiling: %d", got)
	}
	if TableCeiling(0) != 0 {
		t.Fatal("no writes: 0")
	}
	// 3,217 WRU per session-hour (before issue 13): 1,000 × 730 × 3,217 ×
	// $0.625 / 1e6 = $1,467.76.
	if got := MonthlyPer1000(3217, 0); math.Abs(got-1467.7563) > 0.01 {
		t.Fatalf("monthly: %v", got)
	}
	if got := MonthlyPer1000(0, 1); math.Abs(got-0.09125) > 1e-9 {
		t.Fatalf("reads: %v", got)
	}
}

func TestUnitsArithmetic(t *testing.T) {
	a := map[string]Usage{"heartbeat": {Writes: 10, WriteUnits: 10, ReadUnits: 0.5}}
	b := map[string]Usage{"heartbeat": {Writes: 25, WriteUnits: 25, IndexWriteUnits: 2, ReadUnits: 2}, "checkpoint": {Writes: 3, WriteUnits: 3}}
	d := diffUnits(b, a)
	if d["heartbeat"].Writes != 15 || d["heartbeat"].ReadUnits != 1.5 || d["checkpoint"].Writes != 3 {
		t.Fatalf("diff: %+v", d)
	}
	if IndexWriteUnits(d) != 2 {
		t.Fatalf("index: %d", IndexWriteUnits(d))
	}
	addUnits(a, b)
	if a["heartbeat"].Writes != 35 || a["checkpoint"].WriteUnits != 3 {
		t.Fatalf("add: %+v", a)
	}
	pt := PerTenure(map[string]Usage{"acquire": {Writes: 200, WriteUnits: 400, IndexWriteUnits: 300}}, 100, "acquire", "release")
	if len(pt) != 2 || pt[0].WRU != 7 || pt[0].IndexWRU != 3 || pt[0].Requests != 2 || pt[1].WRU != 0 {
		t.Fatalf("per tenure: %+v", pt)
	}
}

func TestStoreUnits(t *testing.T) {
	st := workerStats{WorkerID: "w1", StoreUnits: map[string]any{"heartbeat": map[string]any{"writes": 3, "write_units": 3, "read_units": 0.5}}}
	u, err := storeUnits(st)
	if err != nil || u["heartbeat"].WriteUnits != 3 || u["heartbeat"].ReadUnits != 0.5 {
		t.Fatalf("%+v %v", u, err)
	}
	if _, err := storeUnits(workerStats{WorkerID: "w2"}); err == nil {
		t.Fatal("no store_units: want an error")
	}
}
