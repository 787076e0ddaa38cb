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
	ddb := ddbClient(endpoint)
	out := map[string]storedWorker{}
	var start map[string]types.AttributeValue
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		page, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(schema.DefaultTableName), ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
		cancel()
		if err != nil {
			t.Fatalf("scan %s at %s: %v", schema.DefaultTableName, endpoint, err)
		}
		for _, it := range page.Items {
			pk := attrS(it, schema.AttrPk)
			if strings.HasPrefix(pk, schema.WorkerKeyPrefix) {
				out[strings.TrimPrefix(pk, schema.WorkerKeyPrefix)] = storedWorker{State: attrS(it, schema.AttrWorkerState), List: attrS(it, schema.AttrWorkerList)}
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out
		}
		start = page.LastEvaluatedKey
	}
}

// stoppedStackWorkers are the worker records a stopped stack left in its
// state folder dir: dynalite started again on dir/data (as the next make
// dev does), read, and stopped.
func stoppedStackWorkers(t *testing.T, root, dir string) map[string]storedWorker {
	t.Helper()
	dyn, err := enginetest.StartDynalite(enginetest.Options{Root: root, LogDir: t.TempDir(), DataDir: filepath.Join(dir, "data")})
	if err != nil {
		t.Fatalf("dynalite on the stopped stack's data: %v", err)
	}
	defer dyn.Stop()
	return tableWorkers(t, dyn.Endpoint())
}

func attrS(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
