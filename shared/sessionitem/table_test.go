package sessionitem_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, enginetest.Needs{Dynamo: true}))
}

// The table as defined is accepted by the engine, its sparse indexes list
// only the items carrying their key, by_owner carries what a takeover needs,
// and the mailbox write adds to an ALIVE record's set only.
func TestTableIndexesAndMailbox(t *testing.T) {
	enginetest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := awsconfig.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	api := dynamodb.NewFromConfig(cfg)
	table := "t-items-" + time.Now().Format("150405.000000")
	if err := sessionitem.CreateTable(ctx, api, table); err != nil {
		t.Fatal(err)
	}
	gen := int64(1)
	put := func(m map[string]types.AttributeValue, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: m}); err != nil {
			t.Fatal(err)
		}
	}
	put(sessionitem.Encode(sessionitem.Item{ConnectionID: "a", DesiredState: schema.StateStarted, IndexShard: schema.IndexShardFor(schema.StateStarted, "a"), Generation: &gen, UnownedShard: schema.UnownedShardOf("a")}))
	put(sessionitem.Encode(sessionitem.Item{ConnectionID: "b", DesiredState: schema.StateStarted, IndexShard: schema.IndexShardFor(schema.StateStarted, "b"), Generation: &gen, LeaseOwner: "w1", LeaseEpoch: 4}))
	put(sessionitem.EncodeWorker(sessionitem.Worker{Key: schema.WorkerKey("w1"), State: schema.WorkerAlive, Epoch: 1, List: schema.WorkerListAlive}))
	put(sessionitem.EncodeWorker(sessionitem.Worker{Key: schema.WorkerKey("w2"), State: schema.WorkerDead, Epoch: 2, List: schema.WorkerListGone}))

	query := func(index, attr, value string) []map[string]types.AttributeValue {
		t.Helper()
		in, err := sessionitem.IndexQuery(table, index, attr, value, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := api.Query(ctx, in)
		if err != nil {
			t.Fatalf("query %s: %v", index, err)
		}
		return out.Items
	}
	if got := query(schema.IndexByUnowned, schema.AttrUnownedShard, schema.UnownedShardOf("a")); len(got) != 1 {
		t.Fatalf("by_unowned: %v", got)
	}
	owned := query(schema.IndexByOwner, schema.AttrLeaseOwner, "w1")
	if len(owned) != 1 {
		t.Fatalf("by_owner w1: %v", owned)
	}
	if it, err := sessionitem.Decode(owned[0]); err != nil || it.ConnectionID != "b" || it.LeaseEpoch != 4 || it.DesiredState != schema.StateStarted || *it.Generation != 1 {
		t.Fatalf("by_owner entry %+v (%v)", it, err)
	}
	if got := query(schema.IndexByWorkerList, schema.AttrWorkerList, schema.WorkerListGone); len(got) != 1 {
		t.Fatalf("by_worker_list GONE: %v", got)
	}
	if got := query(schema.IndexByState, schema.AttrIndexShard, schema.IndexShardFor(schema.StateStarted, "b")); len(got) != 1 {
		t.Fatalf("by_state: %v", got)
	}

	for _, w := range []string{"w1", "w2"} {
		in, err := sessionitem.MailboxAdd(table, w, "b")
		if err != nil {
			t.Fatal(err)
		}
		_, err = api.UpdateItem(ctx, in)
		var ccf *types.ConditionalCheckFailedException
		if (w == "w1") != (err == nil) || (err != nil && !errors.As(err, &ccf)) {
			t.Fatalf("mailbox of %s: %v", w, err)
		}
	}
	in, err := sessionitem.Update(table, schema.WorkerKey("w1"), expression.Delete(sessionitem.Mailbox, expression.Value(sessionitem.StringSet("b", "zz"))),
		sessionitem.WorkerState.Equal(expression.Value(schema.WorkerAlive)))
	if err != nil {
		t.Fatal(err)
	}
	in.ReturnValues = types.ReturnValueAllNew
	out, err := api.UpdateItem(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := sessionitem.DecodeWorker(out.Attributes); err != nil || len(w.Mailbox) != 0 || w.State != schema.WorkerAlive {
		t.Fatalf("after ack: %+v %v", w, err)
	}
}
