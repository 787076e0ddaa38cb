package dynamostore_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"golang.org/x/sync/errgroup"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/enginetest"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/lease/leasetest"
	"github.com/wsfleet/wsfleet/shared/testwait"
)

// TestKeeperFencesItselfWhenDynamoDBDies kills a private dynalite while a
// Keeper holds a lease and checks that the Keeper reports the lease untrusted
// before the expiry it last stored — so it stops acting as owner before any
// other worker could take over.
func TestKeeperFencesItselfWhenDynamoDBDies(t *testing.T) {
	enginetest.Require(t)
	if os.Getenv("WSFLEET_ENGINES") == "external" {
		t.Skip("needs a dynalite of its own to kill")
	}
	engine, err := enginetest.StartDynalite(enginetest.Options{})
	if err != nil {
		t.Fatalf("start a private dynalite: %v", err)
	}
	defer engine.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := awsconfig.Load(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(engine.Endpoint()) })
	table := "fence"
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	h := harness(t, client, table)
	id := leasetest.NewID("fence")
	h.Put(t, leasetest.Started(id))

	lc := lease.DefaultConfig("w1")
	lc.TTL, lc.RenewEvery, lc.SafetyMargin, lc.MaxSkew = 3*time.Second, 800*time.Millisecond, time.Second, 200*time.Millisecond
	lc.RPCTimeout, lc.RetryEvery, lc.Tick = 500*time.Millisecond, 200*time.Millisecond, 20*time.Millisecond
	k, err := lease.NewKeeper(h.Store, clock.Real{}, lc, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, err := k.Acquire(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var g errgroup.Group
	g.Go(func() error { return k.Run(runCtx) })
	defer func() { stop(); _ = g.Wait() }()

	acquiredExpiry := held.Item().ExpiresAtMs
	testwait.Eventually(t, 5*time.Second, "a renewal while the engine is up", func() bool { return held.Item().ExpiresAtMs > acquiredExpiry })
	if !held.Valid() {
		t.Fatalf("lease invalid while the engine is up: %v", held.Err())
	}
	renewedExpiry := held.Item().ExpiresAtMs
	if renewedExpiry == 0 || renewedExpiry <= time.Now().UnixMilli() {
		t.Fatalf("no renewal while the engine was up (stored expiry %d)", renewedExpiry)
	}
	engine.Kill()

	select {
	case <-held.Done():
	case <-time.After(2 * lc.TTL):
		t.Fatal("the keeper did not give up the lease with DynamoDB down")
	}
	fencedAt := time.Now().UnixMilli()
	if !errors.Is(held.Err(), lease.ErrUntrusted) {
		t.Fatalf("err = %v, want ErrUntrusted", held.Err())
	}
	lastExpiry := held.Item().ExpiresAtMs // from the last successful renew
	if fencedAt >= lastExpiry {
		t.Fatalf("fenced at %d, not before the stored expiry %d", fencedAt, lastExpiry)
	}
	t.Logf("fenced %d ms before the stored expiry (margin %s)", lastExpiry-fencedAt, lc.SafetyMargin)
	if held.Valid() {
		t.Fatal("an untrusted lease is valid")
	}
}
