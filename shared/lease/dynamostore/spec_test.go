package dynamostore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// setSpec is ingest's start of a session with another configuration, as
// functions/ingest writes it: the new spec item first, then the session
// (spec_ref, generation + 1, an inline spec removed) under the generation
// read, then the superseded spec item deleted.
func setSpec(client *dynamodb.Client, table, id, spec string) error {
	ctx := context.Background()
	cur, err := sessionitem.Get(ctx, client, table, id)
	if err != nil {
		return err
	}
	if cur == nil || cur.Generation == nil {
		return fmt.Errorf("set spec %s: no item with a generation", id)
	}
	gen := *cur.Generation + 1
	ref := sessionitem.SpecRef(gen, spec)
	sp, err := sessionitem.EncodeSpec(id, ref, spec)
	if err != nil {
		return err
	}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: sp}); err != nil {
		return err
	}
	in, err := sessionitem.Update(table, id,
		expression.Set(sessionitem.SpecRefName, expression.Value(ref)).Set(sessionitem.Generation, expression.Value(gen)).Remove(sessionitem.Spec),
		sessionitem.Generation.Equal(expression.Value(*cur.Generation)))
	if err != nil {
		return err
	}
	if _, err := client.UpdateItem(ctx, in); err != nil {
		return err
	}
	if cur.SpecRef != "" {
		_, err = client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: sessionitem.Key(schema.SpecKey(id, cur.SpecRef))})
	}
	return err
}

// seedInline is dynamostore.Seed as an older ingest wrote the session: the
// spec inline, no spec item.
func seedInline(client *dynamodb.Client, table string, it lease.Item) error {
	m, err := dynamostore.Encode(it)
	if err != nil {
		return err
	}
	delete(m, schema.AttrSpecRef)
	if it.Spec != "" {
		m[schema.AttrSpec] = &types.AttributeValueMemberS{Value: it.Spec}
	}
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: m}); err != nil {
		return fmt.Errorf("seed inline %s: %w", it.ConnectionID, err)
	}
	return nil
}

func TestSpecConformance(t *testing.T) {
	client, table := newTable(t)
	h := harness(client, table)
	leasetest.RunSpec(t, func(*testing.T) leasetest.Harness { return h })
}

// A session naming a spec item that is gone for good (no newer one: a
// damaged table) is not acquired: the acquire fails and gives the tenure it
// wrote back, so the session is not left owned by a worker that never runs
// it.
func TestAcquireOfAMissingSpecGivesTheTenureBack(t *testing.T) {
	client, table := newTable(t)
	h := harness(client, table)
	s := h.Store.(*dynamostore.Store)
	id := leasetest.NewID("dangling")
	it := leasetest.Started(id)
	h.Put(t, it)
	if _, err := client.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: &table, Key: specKey(it)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(context.Background(), id, "w1", lease.From{}); err == nil {
		t.Fatal("acquire of a session whose spec item is gone succeeded")
	}
	got, err := sessionitem.Get(context.Background(), client, table, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.LeaseOwner != "" || got.UnownedShard == "" {
		t.Fatalf("after the failed acquire: owner %q, unowned_shard %q; want none, set", got.LeaseOwner, got.UnownedShard)
	}
}

// TestTenureUnits: one tenure (acquire, a release with the final
// checkpoint) of a session whose configuration carries a 1 KB
// Authorization header costs 1 write unit per write whatever the header:
// the session item the ownership writes are billed on holds no spec.
// Acquire 1 + 2 index (by_owner put, by_unowned delete), release 1 + 2
// index (by_owner delete, by_unowned put): 6 (a release of a stopped
// session moves no by_unowned entry: 5); the spec item costs one
// consistent read at the acquire. The checkpoint is on the session item,
// so the acquire fences it in its own write: no second write (7 with the
// checkpoint item's fence; 9 with the spec inline besides).
func TestTenureUnits(t *testing.T) {
	client, table := newTable(t)
	h := harness(client, table)
	s := h.Store.(*dynamostore.Store)
	ctx := context.Background()
	id := leasetest.NewID("tenure")
	it := leasetest.Started(id)
	it.Spec = leasetest.BigSpec(id, 1024)
	h.Put(t, it)
	got, err := s.Acquire(ctx, id, "w1", lease.From{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec != it.Spec {
		t.Fatalf("acquired spec %d bytes, want %d", len(got.Spec), len(it.Spec))
	}
	if err := s.Release(ctx, lease.Token{ConnectionID: id, Owner: "w1", Epoch: got.Epoch}, 42); err != nil {
		t.Fatal(err)
	}
	u := s.Units()
	var total int64
	for _, op := range []string{dynamostore.OpAcquire, dynamostore.OpRelease, dynamostore.OpCheckpoint} {
		total += u[op].TotalWriteUnits()
	}
	want := map[string]dynamostore.Usage{
		dynamostore.OpAcquire: {Writes: 1, Reads: 1, WriteUnits: 1, IndexWriteUnits: 2, ReadUnits: 1},
		dynamostore.OpRelease: {Writes: 1, WriteUnits: 1, IndexWriteUnits: 2},
	}
	for op, w := range want {
		if u[op] != w {
			t.Errorf("%s: %+v, want %+v", op, u[op], w)
		}
	}
	if total > 6 {
		t.Errorf("a tenure cost %d write units, want at most 6", total)
	}

	// Start to stop: the stopped session's release deletes only its
	// by_owner entry, and a checkpoint is 1 unit on the session item.
	s2 := dynamostore.New(client, table)
	id2 := leasetest.NewID("tenure-stop")
	it2 := leasetest.Started(id2)
	it2.Spec = leasetest.BigSpec(id2, 1024)
	h.Put(t, it2)
	got, err = s2.Acquire(ctx, id2, "w1", lease.From{})
	if err != nil {
		t.Fatal(err)
	}
	tok := lease.Token{ConnectionID: id2, Owner: "w1", Epoch: got.Epoch}
	if err := s2.Checkpoint(ctx, tok, 41); err != nil {
		t.Fatal(err)
	}
	h.SetDesired(t, id2, schema.StateStopped)
	// The worker learns of the stop by reading the session (its mailbox
	// or the stop notification: Keeper's re-read), which tells the store
	// to try the stopped variant first.
	if _, err := s2.Get(ctx, id2); err != nil {
		t.Fatal(err)
	}
	if err := s2.Release(ctx, tok, 42); err != nil {
		t.Fatal(err)
	}
	u = s2.Units()
	if c := u[dynamostore.OpCheckpoint]; c != (dynamostore.Usage{Writes: 1, WriteUnits: 1}) {
		t.Errorf("checkpoint: %+v, want one write of 1 unit, no index", c)
	}
	tenure := u[dynamostore.OpAcquire].TotalWriteUnits() + u[dynamostore.OpRelease].TotalWriteUnits()
	if tenure != 5 {
		t.Errorf("start to stop: %d write units (acquire %+v, release %+v), want 5", tenure, u[dynamostore.OpAcquire], u[dynamostore.OpRelease])
	}
}

// TestAcquireWithTheSpecItHasReadsNoSpec: an acquire that names the
// configuration it already has (a standby's promotion, From.Spec) reads no
// spec item when the session's ref names the same content, and reads it
// when the content differs.
func TestAcquireWithTheSpecItHasReadsNoSpec(t *testing.T) {
	client, table := newTable(t)
	h := harness(client, table)
	s := h.Store.(*dynamostore.Store)
	ctx := context.Background()
	acquireReads := func(known string) (reads int64, got lease.Item) {
		t.Helper()
		id := leasetest.NewID("knownspec")
		it := leasetest.Started(id)
		it.Spec = leasetest.BigSpec(id, 1024)
		h.Put(t, it)
		if known == "same" {
			known = it.Spec
		}
		before := s.Units()[dynamostore.OpAcquire].Reads
		got, err := s.Acquire(ctx, id, "w1", lease.From{Spec: known})
		if err != nil {
			t.Fatal(err)
		}
		if got.Spec != it.Spec {
			t.Fatalf("acquired spec %d bytes, want the session's %d", len(got.Spec), len(it.Spec))
		}
		return s.Units()[dynamostore.OpAcquire].Reads - before, got
	}
	if n, _ := acquireReads("same"); n != 0 {
		t.Errorf("acquire naming the session's own configuration read %d items, want 0", n)
	}
	if n, _ := acquireReads(`{"ws_url":"wss://other.invalid/"}`); n != 1 {
		t.Errorf("acquire naming another configuration read %d items, want 1 (the spec item)", n)
	}
}

// TestReleaseOfAStoppedSessionIsOneWrite: the owner of a stopped session
// re-reads it (its mailbox told it of the stop), then releases it: one
// write, the variant for a stopped session, 1 write unit and the by_owner
// entry's delete; before, the STARTED variant went first and was refused
// (a write unit and a consistent read more). A hint gone wrong (a start
// landed after the read) costs that refusal, and the release still lands.
func TestReleaseOfAStoppedSessionIsOneWrite(t *testing.T) {
	client, table := newTable(t)
	h := harness(client, table)
	s := h.Store.(*dynamostore.Store)
	ctx := context.Background()
	id := leasetest.NewID("stopped")
	it := leasetest.Started(id)
	it.Spec = leasetest.BigSpec(id, 1024)
	h.Put(t, it)
	got, err := s.Acquire(ctx, id, "w1", lease.From{})
	if err != nil {
		t.Fatal(err)
	}
	h.SetDesired(t, id, schema.StateStopped)
	if seen, err := s.Get(ctx, id); err != nil || seen.DesiredState != schema.StateStopped {
		t.Fatalf("get after the stop: %+v, %v", seen, err)
	}
	if err := s.Release(ctx, lease.Token{ConnectionID: id, Owner: "w1", Epoch: got.Epoch}, 42); err != nil {
		t.Fatal(err)
	}
	if u := s.Units()[dynamostore.OpRelease]; u != (dynamostore.Usage{Writes: 1, WriteUnits: 1, IndexWriteUnits: 1}) {
		t.Errorf("release of a stopped session: %+v, want one write of 1 unit and 1 index unit", u)
	}

	// Seen stopped, started again before the release: the hint is wrong.
	again, err := s.Acquire(ctx, id, "w1", lease.From{})
	if err == nil {
		t.Fatalf("acquire of a stopped session: %+v", again)
	}
	h.SetDesired(t, id, schema.StateStarted)
	again, err = s.Acquire(ctx, id, "w1", lease.From{})
	if err != nil {
		t.Fatal(err)
	}
	h.SetDesired(t, id, schema.StateStopped)
	if _, err := s.Get(ctx, id); err != nil {
		t.Fatal(err)
	}
	h.SetDesired(t, id, schema.StateStarted)
	if err := s.Release(ctx, lease.Token{ConnectionID: id, Owner: "w1", Epoch: again.Epoch}, 43); err != nil {
		t.Fatal(err)
	}
	cur, err := sessionitem.Get(ctx, client, table, id)
	if err != nil {
		t.Fatal(err)
	}
	if cur.LeaseOwner != "" || cur.UnownedShard == "" || cur.ReleaseSeq == nil || *cur.ReleaseSeq != 43 {
		t.Fatalf("after a release on a wrong hint: %+v", cur)
	}
}
