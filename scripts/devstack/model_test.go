package devstack

import (
	"context"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// The stack on the DynamoDB model (`make dev DEV_ARGS=-dynamo-model=aws`):
// every client goes through the model (its meter sees the table's
// requests), sessions are delivered, and a worker killed with -9 has its
// sessions taken over by the other, despite AWS latency, index lag and the
// profile's ambiguous errors.
func TestStackOnTheModel(t *testing.T) {
	cfg := testConfig(t, 2)
	cfg.DynamoModel = "aws"
	fastTimings(&cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := startStack(ctx, t, cfg)
	if st.Model == nil || st.ModelProc == nil || st.DynamoEndpoint() == st.Dynamo.Endpoint() {
		t.Fatalf("the stack's DynamoDB endpoint %s is not a model's", st.DynamoEndpoint())
	}
	sessions := []string{"m1", "m2", "m3", "m4", "m5", "m6"}
	for _, id := range sessions {
		if _, err := st.StartSession(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// delivering is whether every session's last sink record is past seq
	// and written by a worker other than not.
	delivering := func(past map[string]int64, not string) bool {
		last := st.Sinks().Last()
		for _, id := range sessions {
			r, ok := last[id]
			if !ok || r.Seq <= past[id] || r.WorkerID == not {
				return false
			}
		}
		return true
	}
	testwait.Eventually(t, time.Minute, "every session delivered on the model", func() bool { return delivering(nil, "") })
	// The victim is the worker delivering the first session.
	var victim *Worker
	for _, w := range st.Workers() {
		if w.ID() == st.Sinks().Last()[sessions[0]].WorkerID {
			victim = w
		}
	}
	if victim == nil {
		t.Fatalf("no worker of the stack delivers %s", sessions[0])
	}
	if err := victim.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	past := map[string]int64{}
	for id, r := range st.Sinks().Last() {
		past[id] = r.Seq
	}
	testwait.Eventually(t, time.Minute, "every session delivering again from the survivor after a kill -9", func() bool { return delivering(past, victim.ID()) })
	mt, err := st.Model.Meter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u := mt.Tables[cfg.Table].Total()
	if u.Requests == 0 || u.WriteUnits == 0 {
		t.Fatalf("the model metered %+v on %s: the clients did not go through it", u, cfg.Table)
	}
	t.Logf("through the model: %d requests, %.0f write units, %d answered ambiguously, %d throttled", u.Requests, u.WriteUnits, u.Faults, u.Throttled)
}
