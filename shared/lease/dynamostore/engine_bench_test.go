package dynamostore_test

// What an acquire and its spec read cost the engine, one request after the
// other on one client: a takeover sends one acquire and one spec read per
// session, and on a serial engine (dynalite) their sum is the claim part's
// floor (docs/worker.md, "What a takeover costs the engine").
//
//	cd shared && go test -run '^$' -bench . -benchtime 200x ./lease/dynamostore/

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

// seeded puts n started sessions (with their spec items) on a new table.
func seeded(b *testing.B, n int) (client *dynamodb.Client, table string, items []lease.Item) {
	b.Helper()
	client, table = newTable(b)
	h := harness(client, table)
	for range n {
		it := leasetest.Started(leasetest.NewID("b"))
		h.Put(b, it)
		items = append(items, it)
	}
	return client, table, items
}

func specKey(it lease.Item) map[string]types.AttributeValue {
	return sessionitem.Key(schema.SpecKey(it.ConnectionID, sessionitem.SpecRef(it.Generation, it.Spec)))
}

// BenchmarkAcquire: Store.Acquire of an unowned session, its spec named
// (no spec read: the conditional write alone), and the same session item's
// owner set and unowned_shard removed by a plain update (the index entries
// the acquire moves, by_owner put and by_unowned deleted, without its
// condition and its other attributes): what the acquire's expressions cost
// the engine.
func BenchmarkAcquire(b *testing.B) {
	ctx := context.Background()
	b.Run("acquire", func(b *testing.B) {
		client, table, items := seeded(b, b.N)
		s := dynamostore.New(client, table)
		b.ResetTimer()
		for i := range b.N {
			if _, err := s.Acquire(ctx, items[i].ConnectionID, "w1", lease.From{Spec: items[i].Spec}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("owner-update", func(b *testing.B) {
		client, table, items := seeded(b, b.N)
		b.ResetTimer()
		for i := range b.N {
			in, err := sessionitem.Update(table, items[i].ConnectionID,
				expression.Set(sessionitem.LeaseOwner, expression.Value("w1")).Remove(sessionitem.UnownedShard),
				expression.AttributeExists(sessionitem.Pk))
			if err != nil {
				b.Fatal(err)
			}
			in.ReturnValues = types.ReturnValueAllOld
			out, err := client.UpdateItem(ctx, in)
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := out.Attributes[schema.AttrUnownedShard]; !ok {
				b.Fatal("the session had no unowned_shard: no by_unowned entry moved")
			}
		}
	})
}

// BenchmarkSpecRead: the acquire's spec read, one consistent GetItem per
// session, beside the same keys read 100 at a time (BatchGetItem, per
// key).
func BenchmarkSpecRead(b *testing.B) {
	ctx := context.Background()
	b.Run("get", func(b *testing.B) {
		client, table, items := seeded(b, b.N)
		b.ResetTimer()
		for i := range b.N {
			out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: specKey(items[i]), ConsistentRead: aws.Bool(true)})
			if err != nil {
				b.Fatal(err)
			}
			if len(out.Item) == 0 {
				b.Fatal("spec item not found: the benchmark would time a miss")
			}
		}
	})
	b.Run("batch-of-100", func(b *testing.B) {
		client, table, items := seeded(b, b.N)
		b.ResetTimer()
		for start := 0; start < b.N; start += 100 {
			var keys []map[string]types.AttributeValue
			for _, it := range items[start:min(start+100, b.N)] {
				keys = append(keys, specKey(it))
			}
			req := map[string]types.KeysAndAttributes{table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
			found := 0
			for len(req) > 0 {
				out, err := client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
				if err != nil {
					b.Fatal(err)
				}
				found += len(out.Responses[table])
				req = out.UnprocessedKeys
			}
			if found != len(keys) {
				b.Fatalf("found %d of %d spec items: the benchmark would time misses", found, len(keys))
			}
		}
	})
}
