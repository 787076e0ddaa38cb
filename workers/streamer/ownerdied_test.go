package streamer

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// restart is ingest's start of a STOPPED session with the same
// configuration, written the way ingest writes it (its two conditional
// variants): generation + 1, STARTED, and unowned_shard only when the item
// has no owner; an owned one gets no unowned_shard (ingest then writes the
// owner's mailbox, which fails for a worker no longer ALIVE).
func (e *env) restart(id string) {
	e.t.Helper()
	it := e.item(id)
	u := expression.Set(sessionitem.DesiredState, expression.Value(schema.StateStarted)).
		Set(sessionitem.IndexShard, expression.Value(schema.IndexShardFor(schema.StateStarted, id))).
		Set(sessionitem.Generation, expression.Value(it.Generation+1))
	cond := sessionitem.DesiredState.Equal(expression.Value(schema.StateStopped)).
		And(sessionitem.Generation.Equal(expression.Value(it.Generation)))
	if it.Owner == "" {
		u, cond = sessionitem.Unowned(u, id), cond.And(sessionitem.NoOwner())
	} else {
		cond = cond.And(sessionitem.HasOwner())
	}
	in, err := sessionitem.Update(e.table, id, u, cond)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.db.UpdateItem(context.Background(), in); err != nil {
		e.t.Fatalf("restart of %s: %v", id, err)
	}
}

// Issue 35, finding 5, with workers: a is killed while it owns a session,
// the session is stopped before a is declared dead, so no takeover moves it;
// b's reconciler clears its owner. A day later a's record expires, and the
// session is started again with its notification lost: it is a start of a
// session without owner (by_unowned), which b's reconciler claims. Before,
// the session kept a as owner, the restart got no unowned_shard, and with
// a's record gone no reconciler ever listed it.
func TestRestartAfterTheOwnerDiedWhileStoppedIsClaimed(t *testing.T) {
	e := newEnv(t)
	a := e.worker(nil)
	id := e.session(nil)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "a's messages", func() bool { return e.sink.count(id) >= 1 })
	b := e.worker(nil)
	a.kill()
	e.stop(id) // a's record is still ALIVE: the mailbox write succeeds, nobody reads it
	// b declares a dead, then reconciles twice (the fix clears the owner
	// on the first pass).
	var passes int64
	testwait.Eventually(t, testTTL+testHeartbeat+slack, "a declared dead", func() bool {
		rec, err := b.store.GetWorker(context.Background(), a.ID())
		passes = b.recon.Passes()
		return err == nil && rec.State == schema.WorkerDead
	})
	testwait.Eventually(t, 2*e.reconcileBound(), "two reconcile passes of b", func() bool { return b.recon.Passes() >= passes+2 })
	if _, err := e.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &e.table, Key: sessionitem.Key(schema.WorkerKey(a.ID()))}); err != nil {
		t.Fatal(err) // the table's TTL, a day after the death
	}
	e.restart(id) // no notification
	testwait.Eventually(t, e.lostStartBound(), "the restarted session claimed by reconciliation", func() bool { return e.owner(id) == b })
	if it := e.item(id); it.Owner != b.ID() || it.Generation != 2 {
		t.Fatalf("after the restart: owner %q generation %d", it.Owner, it.Generation)
	}
}
