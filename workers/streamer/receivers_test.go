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

// A takeover leaves out of its receivers a worker whose heartbeat went
// quiet (older than half its TTL by this worker's clock): at an AZ's loss
// a third of a takeover's sample died with the declared worker, and the
// parts told to them came back to the work queue, claimed last. When more
// than half look quiet, this worker's own clock is off: none is left out.
func TestTakeoverLeavesOutQuietReceivers(t *testing.T) {
	now := time.Now().UnixMilli()
	rec := func(id string, ageMs int64) lease.WorkerRecord {
		return lease.WorkerRecord{ID: id, State: schema.WorkerAlive, AdminAddr: "10.0.0.9:8081", Capacity: 100,
			HeartbeatAtMs: now - ageMs, TTL: 10 * time.Second}
	}
	recs := []lease.WorkerRecord{rec("fresh", 1500), rec("fresh2", 200), rec("quiet", 11_000)}
	if q := quietOnes(recs, now); len(q) != 1 || !q["quiet"] {
		t.Fatalf("quiet %v, want [quiet]", q)
	}
	w := bareWorker(t, "me", memstore.New(), nil, nil)
	ws, addrs := w.fleetView(recs, "", quietOnes(recs, now))
	var ids []string
	for _, x := range ws {
		ids = append(ids, x.ID)
	}
	if !slices.Equal(ids, []string{"me", "fresh", "fresh2"}) || addrs["quiet"] != "" {
		t.Fatalf("receivers %v (addresses %v), want [me fresh fresh2]", ids, addrs)
	}
	if q := quietOnes([]lease.WorkerRecord{rec("a", 6000), rec("b", 7000), rec("c", 100)}, now); q != nil {
		t.Fatalf("two of three quiet (this worker's clock is off): %v, want none left out", q)
	}
}
