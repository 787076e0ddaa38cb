package streamer

import (
	"slices"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/rebalance"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// A takeover's fleet comes from an index and eventually consistent reads:
// the worker it just declared dead may still read ALIVE there (DynamoDB's
// lag; seen on the model as sessions handed to a SIGSTOPped zombie, dark
// until the reservation lapsed). Receivers are never the worker whose
// sessions move, nor one this worker knows is gone, nor one that is not
// ALIVE or has no admin address.
func TestReceiversLeaveOutTheDeadAndTheGone(t *testing.T) {
	alive := func(id, addr string) lease.WorkerRecord {
		return lease.WorkerRecord{ID: id, State: schema.WorkerAlive, AdminAddr: addr, Capacity: 100}
	}
	left := alive("left", "10.0.0.5:8081")
	left.State = schema.WorkerLeft
	recs := []lease.WorkerRecord{
		alive("me", "10.0.0.1:8081"), alive("dead", "10.0.0.2:8081"), alive("gone", "10.0.0.3:8081"),
		alive("ok", "10.0.0.4:8081"), left, alive("noaddr", ""),
	}
	me := rebalance.Worker{ID: "me", Capacity: 100}
	ws, addrs := receivers(me, recs, "dead", func(r lease.WorkerRecord) bool { return r.ID == "gone" })
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	if !slices.Equal(ids, []string{"me", "ok"}) {
		t.Fatalf("receivers %v, want [me ok]", ids)
	}
	if len(addrs) != 1 || addrs["ok"] != "10.0.0.4:8081" {
		t.Fatalf("addresses %v", addrs)
	}
}

// A takeover's or a plan's fleet leaves out a worker whose heartbeat went
// quiet (older than half its TTL by this worker's clock): at an AZ's loss
// a third of a takeover's sample died with the declared worker, and the
// parts told to them came back to the work queue, claimed last.
func TestFleetViewLeavesOutQuietWorkers(t *testing.T) {
	w := bareWorker(t, "me", memstore.New(), nil, nil)
	now := w.deps.Clock.Now().UnixMilli()
	rec := func(id string, ageMs int64) lease.WorkerRecord {
		return lease.WorkerRecord{ID: id, State: schema.WorkerAlive, AdminAddr: "10.0.0.9:8081", Capacity: 100,
			HeartbeatAtMs: now - ageMs, TTL: 10 * time.Second}
	}
	ws, addrs := w.fleetView([]lease.WorkerRecord{rec("fresh", 1500), rec("quiet", 11_000)}, "")
	var ids []string
	for _, x := range ws {
		ids = append(ids, x.ID)
	}
	if !slices.Equal(ids, []string{"me", "fresh"}) || addrs["quiet"] != "" {
		t.Fatalf("receivers %v (addresses %v), want [me fresh]", ids, addrs)
	}
}
