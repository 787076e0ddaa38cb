package streamer

import (
	"slices"
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease"
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
	ws, addrs := receivers(me, recs, "dead", func(id string) bool { return id == "gone" })
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
