package dynamostore_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/enginetest"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
)

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, enginetest.Needs{Dynamo: true}))
}

// newTable creates a uniquely named table on the engine the environment
// points at and returns a client for it.
func newTable(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	enginetest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := awsconfig.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	table := leasetest.NewID("t")
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	return client, table
}

func harness(t testing.TB, client *dynamodb.Client, table string) leasetest.Harness {
	return leasetest.Harness{
		Store: dynamostore.New(client, table),
		Put: func(t testing.TB, it lease.Item) {
			t.Helper()
			m, err := dynamostore.Encode(it)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &table, Item: m}); err != nil {
				t.Fatalf("put %s: %v", it.ConnectionID, err)
			}
		},
		SetDesired: func(t testing.TB, id, state string) {
			if _, err := client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
				TableName:                &table,
				Key:                      map[string]types.AttributeValue{schema.AttrPk: &types.AttributeValueMemberS{Value: id}},
				UpdateExpression:         aws.String("SET #ds = :s, #sh = :sh"),
				ExpressionAttributeNames: map[string]string{"#ds": schema.AttrDesiredState, "#sh": schema.AttrIndexShard},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":s":  &types.AttributeValueMemberS{Value: state},
					":sh": &types.AttributeValueMemberS{Value: schema.IndexShardFor(state, id)},
				},
			}); err != nil {
				t.Errorf("set desired %s: %v", id, err)
			}
		},
		Restart: func(t testing.TB, id string) error { return restart(client, table, id) },
	}
}

// restart is ingest's start of a FAILED session, written the way ingest
// writes it (sessionitem.ClearFailed under sessionitem.FailedAt).
func restart(client *dynamodb.Client, table, id string) error {
	it, err := sessionitem.Get(context.Background(), client, table, id)
	if err != nil {
		return err
	}
	if it == nil || it.Generation == nil || it.FailedGeneration == nil {
		return fmt.Errorf("restart %s: not a FAILED item: %+v", id, it)
	}
	in, err := sessionitem.Update(table, id,
		sessionitem.ClearFailed(expression.Set(sessionitem.Generation, expression.Value(*it.Generation+1))),
		sessionitem.DesiredState.Equal(expression.Value(schema.StateStarted)).
			And(sessionitem.Generation.Equal(expression.Value(*it.Generation))).
			And(sessionitem.FailedAt(*it.Generation)))
	if err != nil {
		return err
	}
	_, err = client.UpdateItem(context.Background(), in)
	return err
}

func TestConformance(t *testing.T) {
	client, table := newTable(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Harness { return harness(t, client, table) }, leasetest.Options{RaceRounds: 200, Racers: 64})
}

func TestStatsCountRequests(t *testing.T) {
	client, table := newTable(t)
	h := harness(t, client, table)
	s := h.Store.(*dynamostore.Store)
	id := leasetest.NewID("stats")
	h.Put(t, leasetest.Started(id))
	now := time.Now()
	if _, err := s.Acquire(context.Background(), id, "w1", now.UnixMilli(), now.UnixMilli()+10_000); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(context.Background(), id, "w2", now.UnixMilli(), now.UnixMilli()+10_000); err == nil {
		t.Fatal("second acquire of a live lease succeeded")
	}
	st := s.Stats()
	if st[dynamostore.OpAcquire] != 1 || st[dynamostore.OpAcquireFailed] != 1 || st[dynamostore.OpClassifyRead] != 1 {
		t.Fatalf("stats = %v", st)
	}
}
