package simddb_test

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/dynamodel"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/simddb"
)

// The one-definition check: the same lease.Store calls, made by dynamostore
// through the DynamoDB model (which bills the requests it sees on the wire)
// and made on the simulated store (which bills the requests dynamostore
// would send), cost the same write, index write and read units, index by
// index, and the same failed conditions.
func TestBillsAsTheModel(t *testing.T) {
	enginetest.Require(t)
	m := dynamodel.StartT(t, dynamodel.Config{Profile: dynamodel.Profile{Name: "meter", Meter: true}, Primary: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := awsconfig.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(m.Endpoint()) })
	table := leasetest.NewID("bills")
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	real := dynamostore.New(client, table)
	sim := newStore(t, simddb.Off())

	id := leasetest.NewID("s")
	seed := leasetest.Started(id)
	seed.Spec = `{"ws_url":"wss://x.invalid/","headers":{"Authorization":"Bearer ` + strings.Repeat("x", 1024) + `"}}` // 2 KB-class item
	other := leasetest.Started(leasetest.NewID("o"))
	other.LastSeq = 7
	if err := dynamostore.Seed(ctx, client, table, seed); err != nil {
		t.Fatal(err)
	}
	if err := dynamostore.Seed(ctx, client, table, other); err != nil {
		t.Fatal(err)
	}
	sim.Put(seed)
	sim.Put(other)

	w1, w2 := leasetest.NewID("w"), leasetest.NewID("w")
	at := int64(1_800_000_100_000)
	script := func(s lease.Store) {
		t.Helper()
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%T: %v", s, err)
			}
		}
		refused := func(err error) {
			t.Helper()
			if err == nil || errors.Is(err, lease.ErrThrottled) {
				t.Fatalf("%T: %v, want a refusal", s, err)
			}
		}
		must(s.Register(ctx, leasetest.Worker(w1)))
		must(s.Register(ctx, leasetest.Worker(w2)))
		refused(s.Register(ctx, leasetest.Worker(w1)))
		for seq := int64(1); seq <= 3; seq++ {
			_, err := s.Heartbeat(ctx, w1, 1, lease.Heartbeat{Seq: seq, AtMs: at + seq*1000, Load: 1, Capacity: 1000})
			must(err)
		}
		_, err := s.Heartbeat(ctx, w1, 1, lease.Heartbeat{Seq: 2, AtMs: at})
		refused(err)
		it, err := s.Acquire(ctx, id, w1, lease.From{})
		must(err)
		tok := lease.Token{ConnectionID: id, Owner: w1, Epoch: it.Epoch}
		_, err = s.Acquire(ctx, id, w2, lease.From{Prev: &lease.Token{ConnectionID: id, Owner: "x", Epoch: 99}})
		refused(err)
		for seq := int64(1); seq <= 3; seq++ {
			must(s.Checkpoint(ctx, tok, seq*1000))
		}
		refused(s.Checkpoint(ctx, lease.Token{ConnectionID: id, Owner: w2, Epoch: 9}, 5))
		must(s.NoteError(ctx, tok, 1, "dial: refused", at))
		must(s.Handoff(ctx, tok, 4000, w2, at))
		it, err = s.Acquire(ctx, id, w2, lease.From{})
		must(err)
		tok2 := lease.Token{ConnectionID: id, Owner: w2, Epoch: it.Epoch}
		it, err = s.Acquire(ctx, other.ConnectionID, w1, lease.From{})
		must(err)
		must(s.Fail(ctx, lease.Token{ConnectionID: other.ConnectionID, Owner: w1, Epoch: it.Epoch}, 1, 9, "gone", at))
		_, err = s.Get(ctx, id)
		must(err)
		_, err = s.Get(ctx, leasetest.NewID("missing"))
		refused(err)
		_, err = s.OwnedBy(ctx, w2, 0)
		must(err)
		_, err = s.Unowned(ctx, 0)
		must(err)
		_, err = s.ListWorkers(ctx, schema.WorkerListAlive, 0)
		must(err)
		_, err = s.GetWorkers(ctx, []string{w1, w2, "nobody"})
		must(err)
		_, err = s.GetWorker(ctx, w2)
		must(err)
		must(s.DeclareDead(ctx, w1, 1, 3, w2, at+20_000))
		must(s.Release(ctx, tok2, 5000))
		must(s.Leave(ctx, w2, 1, schema.WorkerListDone, at+30_000))
		must(s.MarkDone(ctx, w1))
	}
	script(real)
	script(sim)

	want := m.Meter().Tables[table]
	got := sim.Meter()
	wu, gu := want.Total(), got.Total()
	if wu.WriteUnits != gu.WriteUnits || wu.IndexWriteUnits != gu.IndexWriteUnits || wu.ReadUnits != gu.ReadUnits || wu.ConditionFailed != gu.ConditionFailed {
		t.Errorf("the model billed write %v, index write %v, read %v, %d failed conditions; simddb %v, %v, %v, %d",
			wu.WriteUnits, wu.IndexWriteUnits, wu.ReadUnits, wu.ConditionFailed, gu.WriteUnits, gu.IndexWriteUnits, gu.ReadUnits, gu.ConditionFailed)
	}
	for ix, units := range want.IndexWriteUnits {
		if g := got.Indexes[ix].Write.Total; g != units {
			t.Errorf("index %s: the model billed %v write units, simddb %v", ix, units, g)
		}
	}
	for ix, units := range want.IndexReadUnits {
		if g := got.Indexes[ix].Read.Total; math.Abs(g-units) > 1e-9 {
			t.Errorf("index %s: the model billed %v read units, simddb %v", ix, units, g)
		}
	}
	t.Logf("both billed %v write, %v index write, %v read units, %d failed conditions", gu.WriteUnits, gu.IndexWriteUnits, gu.ReadUnits, gu.ConditionFailed)
}

// A tenure (acquire, a release with the final checkpoint) of a session
// with a 1 KB Authorization header, billed as dynamostore's: the session
// item holds no spec, so each ownership write is 1 write unit; acquire 1 +
// 2 index, release 1 + 2 index (a STARTED session goes back to
// by_unowned): 6, against 7 with the checkpoint item's fence and 9 with
// the spec inline besides. The spec item is read once, at the acquire.
func TestTenureBill(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, simddb.Off())
	id := leasetest.NewID("tenure")
	it := leasetest.Started(id)
	it.Spec = leasetest.BigSpec(id, 1024)
	s.Put(it)
	got, err := s.Acquire(ctx, id, "w1", lease.From{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, lease.Token{ConnectionID: id, Owner: "w1", Epoch: got.Epoch}, 42); err != nil {
		t.Fatal(err)
	}
	m := s.Meter()
	var wu, reads float64
	for _, op := range []string{dynamostore.OpAcquire, dynamostore.OpRelease} {
		u := m.Ops[op]
		wu += u.WriteUnits + u.IndexWriteUnits
		reads += u.ReadUnits
	}
	if wu != 6 || reads != 1 {
		t.Errorf("a tenure billed %v write units (index included) and %v read units, want 6 and 1", wu, reads)
	}
}
