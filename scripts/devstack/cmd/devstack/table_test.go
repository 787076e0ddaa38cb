package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

// storedWorker is a worker record as the table holds it.
type storedWorker struct{ State, List string }

// ddbClient is a DynamoDB client of a local engine's endpoint (no idle
// connections left behind).
func ddbClient(endpoint string) *dynamodb.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTPClient:  &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
}

// tableWorkers reads every worker record of the stack's table at endpoint
// (consistent reads): id → state and list.
func tableWorkers(t *testing.T, endpoint string) map[string]storedWorker {
	t.Helper()
	out := map[string]storedWorker{}
	for _, it := range scanTable(t, endpoint) {
		if pk := attrS(it, schema.AttrPk); strings.HasPrefix(pk, schema.WorkerKeyPrefix) {
			out[strings.TrimPrefix(pk, schema.WorkerKeyPrefix)] = storedWorker{State: attrS(it, schema.AttrWorkerState), List: attrS(it, schema.AttrWorkerList)}
		}
	}
	return out
}

// tableItems are the partition keys of the stack's table at endpoint (a
// session's is its id).
func tableItems(t *testing.T, endpoint string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, it := range scanTable(t, endpoint) {
		out[attrS(it, schema.AttrPk)] = true
	}
	return out
}

// scanTable reads the stack's whole table at endpoint (consistent reads).
func scanTable(t *testing.T, endpoint string) []map[string]types.AttributeValue {
	t.Helper()
	ddb := ddbClient(endpoint)
	var items []map[string]types.AttributeValue
	var start map[string]types.AttributeValue
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		page, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(schema.DefaultTableName), ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
		cancel()
		if err != nil {
			t.Fatalf("scan %s at %s: %v", schema.DefaultTableName, endpoint, err)
		}
		items = append(items, page.Items...)
		if len(page.LastEvaluatedKey) == 0 {
			return items
		}
		start = page.LastEvaluatedKey
	}
}

// stoppedStack is dynalite started again on a stopped stack's state
// folder dir (dir/data, as the next make dev opens it); t's cleanup stops
// it.
func stoppedStack(t *testing.T, root, dir string) string {
	t.Helper()
	dyn, err := enginetest.StartDynalite(enginetest.Options{Root: root, LogDir: t.TempDir(), DataDir: filepath.Join(dir, "data")})
	if err != nil {
		t.Fatalf("dynalite on the stopped stack's data: %v", err)
	}
	t.Cleanup(dyn.Stop)
	return dyn.Endpoint()
}

// stoppedStackWorkers are the worker records a stopped stack left in its
// state folder dir.
func stoppedStackWorkers(t *testing.T, root, dir string) map[string]storedWorker {
	t.Helper()
	return tableWorkers(t, stoppedStack(t, root, dir))
}

// stoppedStackItems are the partition keys a stopped stack left in its
// state folder dir.
func stoppedStackItems(t *testing.T, root, dir string) map[string]bool {
	t.Helper()
	return tableItems(t, stoppedStack(t, root, dir))
}

func attrS(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
