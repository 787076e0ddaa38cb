// Package testenv owns the ingest tests' access to the local engines: SDK
// clients on the endpoints testkit/enginetest exported, a fresh table and
// queue per test, and clients that cannot reach anything (to test failures).
// Only tests import it.
package testenv

import (
	"context"
	"fmt"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

var (
	seq     atomic.Int64
	invalid = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
)

// Name returns a name unique to this test run, usable for a table or queue.
func Name(t testing.TB) string {
	n := invalid.ReplaceAllString(t.Name(), "-")
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	return fmt.Sprintf("ingest-%s-%d-%d", n, time.Now().UnixNano()%1e9, seq.Add(1))
}

// Config returns the SDK config for the local engines (enginetest.Require
// must have passed).
func Config(t testing.TB) aws.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := awsconfig.Load(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Env is one test's table and queue on the local engines.
type Env struct {
	AWS      aws.Config
	Dynamo   *dynamodb.Client
	SQS      *sqs.Client
	Table    string
	QueueURL string
	Queue    *sqsnotify.Queue // 1 s long-poll consumer of QueueURL
}

// New requires the engines and creates a fresh table and queue.
func New(t testing.TB) *Env {
	t.Helper()
	enginetest.Require(t)
	cfg := Config(t)
	e := &Env{AWS: cfg, Dynamo: dynamodb.NewFromConfig(cfg), SQS: sqs.NewFromConfig(cfg), Table: Name(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := sessionitem.CreateTable(ctx, e.Dynamo, e.Table); err != nil {
		t.Fatal(err)
	}
	q, err := sqsnotify.CreateQueues(ctx, e.SQS, Name(t), 30, 5)
	if err != nil {
		t.Fatal(err)
	}
	e.QueueURL = q.WorkURL
	e.Queue = sqsnotify.New(e.SQS, q.WorkURL, 1)
	return e
}

// DeadEndpoint is a loopback URL where nothing listens.
const DeadEndpoint = "http://127.0.0.1:1"

// DeadDynamo is a DynamoDB client that fails at once (connection refused,
// no retries).
func DeadDynamo(cfg aws.Config) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(DeadEndpoint)
		o.RetryMaxAttempts = 1
	})
}

// DeadSQS is an SQS client that fails at once.
func DeadSQS(cfg aws.Config) *sqs.Client {
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(DeadEndpoint)
		o.RetryMaxAttempts = 1
	})
}
