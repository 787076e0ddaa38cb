package sessions_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// Issue 35, finding 5, end to end on the engine: ingest's own starts and
// stops, the workers' ownership core (lease.Keeper on dynamostore). Worker
// wa owns r1; r1 is stopped (wa is told through its mailbox) and wa dies
// before releasing it. The reconcilers clear the owner of that stopped
// session (no takeover moves a STOPPED one), wa's record moves to DONE and
// later expires; a restart is then ingest's start of a session without
// owner (unowned_shard set), so that a reconciler finds it though its
// notification is lost. Before, r1 kept wa as owner: the restart took
// ingest's has-owner branch (no unowned_shard, the mailbox of a record that
// no longer exists) and no reconciler ever listed it.
func TestRestartAfterTheOwnerDiedWhileStoppedIsFoundWithoutItsNotification(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	ws := e.workers(t, ctx)
	ls, clk, keeper := ws.ls, ws.clk, ws.keeper
	d := desired("r1", "wss://a.example.com/")
	if _, err := e.store.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	wa, wb := keeper("wa"), keeper("wb")
	if _, err := wa.Acquire(ctx, "r1", nil); err != nil {
		t.Fatalf("wa acquires r1: %v", err)
	}
	if res, err := e.store.Stop(ctx, "r1"); err != nil || res.Owner != "wa" || !res.OwnerNotified {
		t.Fatalf("stop of wa's session: %+v %v", res, err)
	}
	// wa dies before it reads its mailbox; its watcher wb declares it dead.
	rec, err := ls.GetWorker(ctx, "wa")
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.DeclareDead(ctx, "wa", rec.Epoch, rec.HeartbeatSeq, "wb", clk.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	// wb reconciles (every 5 s) past the index lag bound.
	bound := wb.Config().IndexLagBound
	for elapsed := time.Duration(0); elapsed <= bound+5*time.Second; elapsed += 5 * time.Second {
		if _, err := wb.Orphans(ctx, 10); err != nil {
			t.Fatalf("orphans: %v", err)
		}
		clk.Advance(5 * time.Second)
	}
	rec, err = ls.GetWorker(ctx, "wa")
	if err != nil {
		t.Fatal(err)
	}
	listBeforeExpiry := rec.List
	// A day after its death, the table's TTL deletes wa's record.
	if _, err := e.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &e.table, Key: sessionitem.Key(schema.WorkerKey("wa"))}); err != nil {
		t.Fatal(err)
	}
	// The restart; its notification (the API's, not the store's) is lost.
	res, err := e.store.Start(ctx, d)
	if err != nil || res.Outcome != sessions.Restarted {
		t.Fatalf("restart: %+v %v", res, err)
	}
	var cands []lease.Candidate
	testwait.Eventually(t, 5*time.Second, "the restarted session among the reconciler's candidates", func() bool {
		cands, err = wb.Orphans(ctx, 10)
		return err == nil && slices.ContainsFunc(cands, func(c lease.Candidate) bool { return c.ConnectionID == "r1" })
	})
	if res.Owner != "" || res.OwnerNotified {
		t.Fatalf("the restart was written as a start of an owned session: %+v", res)
	}
	if listBeforeExpiry != schema.WorkerListDone {
		t.Fatalf("wa's record past the bound, its only session cleared: %s, want DONE", listBeforeExpiry)
	}
	it, err := ls.Acquire(ctx, "r1", "wb", lease.From{})
	if err != nil || it.Generation != 2 || it.Owner != "wb" {
		t.Fatalf("wb acquires the restarted session: %+v %v", it, err)
	}
}
