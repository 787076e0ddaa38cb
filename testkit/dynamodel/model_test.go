package dynamodel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/wsfleet/wsfleet/testkit/dynamodel"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// These tests run the real AWS SDK v2 DynamoDB client against a model in
// front of the test binary's dynalite (enginetest; under CI=true a missing
// engine fails the tests). Every test has its own model (and, when it
// lags, its own mirror) and its own table.

func TestMain(m *testing.M) { os.Exit(enginetest.Main(m, enginetest.Needs{Dynamo: true})) }

// logWriter sends the model's own log lines to the test log while the
// test runs.
type logWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// start starts a model with profile p in front of the test dynalite and
// returns it with a client that does not retry (every answer is seen).
func start(t *testing.T, p dynamodel.Profile) (*dynamodel.Model, *dynamodb.Client) {
	t.Helper()
	enginetest.Require(t)
	lw := &logWriter{t: t}
	m := dynamodel.StartT(t, dynamodel.Config{Profile: p, Primary: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), Log: lw, Seed: 42})
	t.Cleanup(func() {
		lw.mu.Lock()
		lw.done = true
		lw.mu.Unlock()
	})
	return m, client(m.Endpoint())
}

func client(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(endpoint),
		Region:       "us-east-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local"}, nil
		}),
		Retryer: aws.NopRetryer{},
	})
}

// profile is the profile that adds nothing, with billing on (writes read
// the item before, as they do in every other profile).
func profile() dynamodel.Profile {
	p := dynamodel.Dynalite()
	p.Meter = true
	return p
}

type tableSpec struct {
	billing    types.BillingMode
	projection types.ProjectionType // of the by_owner index on "owner" (none when "")
}

// createTable creates a table with partition key pk (S) through the model
// and deletes it when the test ends.
func createTable(t *testing.T, c *dynamodb.Client, spec tableSpec) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	}
	if spec.billing == types.BillingModeProvisioned {
		in.BillingMode = spec.billing
		in.ProvisionedThroughput = &types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(5), WriteCapacityUnits: aws.Int64(5)}
	}
	if spec.projection != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("owner"), AttributeType: types.ScalarAttributeTypeS})
		gsi := types.GlobalSecondaryIndex{
			IndexName:  aws.String("by_owner"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("owner"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: spec.projection},
		}
		if in.ProvisionedThroughput != nil {
			gsi.ProvisionedThroughput = in.ProvisionedThroughput
		}
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{gsi}
	}
	if _, err := c.CreateTable(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "the table is ACTIVE", func() bool {
		out, err := c.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		return err == nil && out.Table.TableStatus == types.TableStatusActive
	})
	t.Cleanup(func() {
		if _, err := c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
			t.Errorf("delete table %s: %v", name, err)
		}
	})
	return name
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func put(c *dynamodb.Client, table string, attrs ...string) error {
	it := map[string]types.AttributeValue{}
	for i := 0; i+1 < len(attrs); i += 2 {
		it[attrs[i]] = s(attrs[i+1])
	}
	_, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: it})
	return err
}

// get reads pk's attribute attr ("" when the item is absent).
func get(t *testing.T, c *dynamodb.Client, table, pk, attr string, consistent bool) string {
	t.Helper()
	out, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{"pk": s(pk)}, ConsistentRead: aws.Bool(consistent)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Item == nil {
		return ""
	}
	v, _ := out.Item[attr].(*types.AttributeValueMemberS)
	if v == nil {
		return "(none)"
	}
	return v.Value
}

// owned is the pks the by_owner index lists for owner.
func owned(t *testing.T, c *dynamodb.Client, table, owner string) []string {
	t.Helper()
	out, err := c.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(table), IndexName: aws.String("by_owner"),
		KeyConditionExpression:    aws.String("#o = :o"),
		ExpressionAttributeNames:  map[string]string{"#o": "owner"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": s(owner)}})
	if err != nil {
		t.Fatal(err)
	}
	var pks []string
	for _, it := range out.Items {
		pks = append(pks, it["pk"].(*types.AttributeValueMemberS).Value)
	}
	slices.Sort(pks)
	return pks
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// Service latency: a GetItem takes the profile's latency on top of
// dynalite's; the spikes come on top of the body. Quantiles are compared
// with generous factors.
func TestServiceLatency(t *testing.T) {
	p := dynamodel.Dynalite()
	p.Latency = map[string]dynamodel.Dist{"GetItem": {Median: 20 * time.Millisecond, P99: 40 * time.Millisecond,
		SpikeShare: 0.1, SpikeMin: 400 * time.Millisecond, SpikeMax: 400 * time.Millisecond}}
	m, c := start(t, p)
	direct := client(m.Primary())
	table := createTable(t, c, tableSpec{})
	measure := func(c *dynamodb.Client, n int) []time.Duration {
		var ds []time.Duration
		for range n {
			t0 := time.Now()
			get(t, c, table, "absent", "v", true)
			ds = append(ds, time.Since(t0))
		}
		return ds
	}
	base := measure(direct, 30)
	ds := measure(c, 80)
	var body []time.Duration
	spikes := 0
	for _, d := range ds {
		if d >= 400*time.Millisecond {
			spikes++
		} else {
			body = append(body, d)
		}
	}
	p50, b50 := quantile(body, 0.5), quantile(base, 0.5)
	t.Logf("dynalite p50 %v; model: p50 %v, p90 %v, %d spikes of 80", b50, p50, quantile(body, 0.9), spikes)
	if p50 < 14*time.Millisecond || p50 > 60*time.Millisecond {
		t.Errorf("the model's p50 %v, want about 20ms (within [14ms, 60ms])", p50)
	}
	if p50 < b50+10*time.Millisecond {
		t.Errorf("the model's p50 %v is not dynalite's (%v) plus about 20ms", p50, b50)
	}
	if quantile(body, 0.9) <= quantile(body, 0.1) {
		t.Error("no spread in the latency body")
	}
	if spikes < 1 || spikes > 25 {
		t.Errorf("%d spikes in 80 requests, want about 8 (10%%)", spikes)
	}
	if slices.Max(ds) > 3*time.Second {
		t.Errorf("a request took %v, far beyond a spike", slices.Max(ds))
	}
}

// Index lag: a write is not on the index before the lag and is after it; a
// consistent GetItem sees it at once. A lag episode holds the index
// further behind (an owner change shows on the old owner's query).
func TestIndexLag(t *testing.T) {
	const lag = 1500 * time.Millisecond
	p := profile()
	p.Lag = dynamodel.Dist{Median: lag}
	m, c := start(t, p)
	table := createTable(t, c, tableSpec{projection: types.ProjectionTypeKeysOnly})

	t0 := time.Now()
	if err := put(c, table, "pk", "s1", "owner", "w1"); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, table, "s1", "owner", true); got != "w1" {
		t.Fatalf("a consistent GetItem right after the write: %q", got)
	}
	if got := owned(t, c, table, "w1"); len(got) != 0 {
		t.Fatalf("the index shows the write at once: %v", got)
	}
	testwait.Eventually(t, 10*time.Second, "the index shows the write", func() bool { return len(owned(t, c, table, "w1")) == 1 })
	if d := time.Since(t0); d < lag {
		t.Fatalf("the index showed the write after %v, before the lag (%v)", d, lag)
	}

	const episode = 4 * time.Second
	if err := m.LagEpisode(episode, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := put(c, table, "pk", "s1", "owner", "w2"); err != nil {
		t.Fatal(err)
	}
	testwait.Holds(t, episode/2, "the index is behind the episode's lag", func() bool {
		return slices.Equal(owned(t, c, table, "w1"), []string{"s1"}) && len(owned(t, c, table, "w2")) == 0
	})
	testwait.Eventually(t, 10*time.Second, "the owner change reaches the index", func() bool {
		return len(owned(t, c, table, "w1")) == 0 && slices.Equal(owned(t, c, table, "w2"), []string{"s1"})
	})
	if err := m.Settle(context.Background()); err != nil || m.Pending() != 0 {
		t.Fatalf("settle: %v, %d pending", err, m.Pending())
	}
}

// Eventually consistent reads (GetItem, Query, BatchGetItem without
// ConsistentRead) answer from the table as it was a lag ago; consistent
// ones from the table as it is.
func TestStaleEventuallyConsistentReads(t *testing.T) {
	p := profile()
	p.Lag = dynamodel.Dist{Median: 2 * time.Second}
	_, c := start(t, p)
	table := createTable(t, c, tableSpec{})
	if err := put(c, table, "pk", "k", "v", "1"); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "the eventually consistent read shows v=1", func() bool { return get(t, c, table, "k", "v", false) == "1" })
	if err := put(c, table, "pk", "k", "v", "2"); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c, table, "k", "v", false); got != "1" {
		t.Errorf("an eventually consistent GetItem right after the write: v=%q, want the stale 1", got)
	}
	if got := get(t, c, table, "k", "v", true); got != "2" {
		t.Errorf("a consistent GetItem right after the write: v=%q, want 2", got)
	}
	batch := func(consistent bool) string {
		out, err := c.BatchGetItem(context.Background(), &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			table: {Keys: []map[string]types.AttributeValue{{"pk": s("k")}}, ConsistentRead: aws.Bool(consistent)}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Responses[table]) != 1 {
			t.Fatalf("BatchGetItem: %v", out.Responses)
		}
		return out.Responses[table][0]["v"].(*types.AttributeValueMemberS).Value
	}
	query := func(consistent bool) string {
		out, err := c.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(table), ConsistentRead: aws.Bool(consistent),
			KeyConditionExpression: aws.String("pk = :k"), ExpressionAttributeValues: map[string]types.AttributeValue{":k": s("k")}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Items) != 1 {
			t.Fatalf("Query: %v", out.Items)
		}
		return out.Items[0]["v"].(*types.AttributeValueMemberS).Value
	}
	if b, q := batch(false), query(false); b != "1" || q != "1" {
		t.Errorf("eventually consistent BatchGetItem v=%s, Query v=%s; want the stale 1", b, q)
	}
	if b, q := batch(true), query(true); b != "2" || q != "2" {
		t.Errorf("consistent BatchGetItem v=%s, Query v=%s; want 2", b, q)
	}
	testwait.Eventually(t, 10*time.Second, "the eventually consistent read shows v=2", func() bool { return get(t, c, table, "k", "v", false) == "2" })
}

// throttleReasons is err's throttling exception's reasons (nil when err is
// not one), and whether the SDK's retryer classifies err as a throttle.
func throttleReasons(err error) ([]types.ThrottlingReason, bool) {
	isThrottle := retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary
	var te *types.ThrottlingException
	if errors.As(err, &te) {
		return te.ThrottlingReasons, isThrottle
	}
	var pe *types.ProvisionedThroughputExceededException
	if errors.As(err, &pe) {
		return pe.ThrottlingReasons, isThrottle
	}
	return nil, isThrottle
}

// A hot key written at more than 1,000 write units a second is throttled
// (ThrottlingException, TableWriteKeyRangeThroughputExceeded, classified as
// a throttle by the SDK); another key is not; the writes admitted stay
// within the key's bucket.
func TestHotKeyThrottled(t *testing.T) {
	p := profile()
	p.Throughput = dynamodel.AWS().Throughput
	// The key's rate a tenth of AWS's 1,000 units a second: a write of 390
	// units (items are at most 400 KB) then fits its bucket once every 3.9
	// s, so eight writers throttle it however slowly a loaded machine sends
	// them. At AWS's rate the test depended on the machine's speed: a
	// clean-clone CI run sent 22 writes of 390 units in 13.3 s (645 units a
	// second) and none was throttled (at 200 units, 5.7 writes a second).
	const keyWCU = 100
	p.Throughput.PartitionWCU = keyWCU
	m, c := start(t, p)
	table := createTable(t, c, tableSpec{})
	const units = 390
	payload := strings.Repeat("x", units*1024-20)
	var ok atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	t0 := time.Now()
	stop := t0.Add(10 * time.Second)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first.Load() == nil && time.Now().Before(stop) {
				err := put(c, table, "pk", "hot", "v", payload)
				if err == nil {
					ok.Add(1)
				} else if first.CompareAndSwap(nil, &err) {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if first.Load() == nil {
		t.Fatalf("no write throttled in %v (%d admitted)", elapsed, ok.Load())
	}
	err := *first.Load()
	if coldErr := put(c, table, "pk", "cold", "v", payload); coldErr != nil {
		t.Errorf("a write to another key was refused: %v", coldErr)
	}
	var te *types.ThrottlingException
	reasons, isThrottle := throttleReasons(err)
	if !errors.As(err, &te) || !isThrottle {
		t.Fatalf("want a ThrottlingException the SDK classifies as a throttle, got %v (throttle: %v)", err, isThrottle)
	}
	if len(reasons) != 1 || aws.ToString(reasons[0].Reason) != "TableWriteKeyRangeThroughputExceeded" ||
		!strings.HasSuffix(aws.ToString(reasons[0].Resource), ":table/"+table) {
		t.Errorf("throttling reasons %+v", reasons)
	}
	// The bucket holds a second of the key's rate (at least one write) and
	// refills at that rate.
	if admitted := float64(ok.Load() * units); admitted > keyWCU*(elapsed.Seconds()+1)+units {
		t.Errorf("%v units admitted in %v, beyond the key's bucket", admitted, elapsed)
	}
	if u := m.Meter().Op(table, "PutItem"); u.Throttled == 0 || u.WriteUnits != float64((ok.Load()+1)*units) {
		t.Errorf("meter %+v, want the throttled writes counted and the %d admitted ones billed", u, ok.Load()+1)
	}
}

// The chaos knobs: a hot key held at a fraction of the partition rate
// (here on a provisioned table: ProvisionedThroughputExceededException with
// ThrottlingReasons), an on-demand table held at a fraction of its warm
// throughput, and a hot index key value.
func TestThrottlingKnobs(t *testing.T) {
	p := profile()
	p.Throughput = dynamodel.AWS().Throughput
	m, c := start(t, p)
	prov := createTable(t, c, tableSpec{billing: types.BillingModeProvisioned})
	m.HotKey(prov, "k", 0.001, time.Minute) // 1 write unit a second
	if err := put(c, prov, "pk", "k", "v", "1"); err != nil {
		t.Fatal(err)
	}
	err := put(c, prov, "pk", "k", "v", "2")
	var pe *types.ProvisionedThroughputExceededException
	reasons, isThrottle := throttleReasons(err)
	if !errors.As(err, &pe) || !isThrottle || len(reasons) != 1 || aws.ToString(reasons[0].Reason) != "TableWriteKeyRangeThroughputExceeded" {
		t.Fatalf("the hot key's second write: %v, reasons %+v", err, reasons)
	}
	if err := put(c, prov, "pk", "other", "v", "1"); err != nil {
		t.Fatalf("another key: %v", err)
	}

	onDemand := createTable(t, c, tableSpec{})
	m.HoldTable(onDemand, 0.0005, time.Minute) // 2 write units a second
	throttled := 0
	for i := range 10 {
		if err := put(c, onDemand, "pk", fmt.Sprint("k", i)); err != nil {
			var te *types.ThrottlingException
			if !errors.As(err, &te) {
				t.Fatalf("held table: %v", err)
			}
			throttled++
		}
	}
	if throttled < 5 {
		t.Errorf("a table held at 2 units a second admitted %d of 10 writes made at once", 10-throttled)
	}

	// A hot index key: the by_owner entries of w1 at 1 write unit a second;
	// the base keys are cold, another owner's entries are not throttled.
	indexed := createTable(t, c, tableSpec{projection: types.ProjectionTypeKeysOnly})
	m.HotKey(indexed, "w1", 0.001, time.Minute)
	if err := put(c, indexed, "pk", "a", "owner", "w1"); err != nil {
		t.Fatalf("the hot index key's first entry: %v", err)
	}
	err = put(c, indexed, "pk", "b", "owner", "w1")
	reasons, isThrottle = throttleReasons(err)
	if !isThrottle || len(reasons) != 1 || aws.ToString(reasons[0].Reason) != "IndexWriteKeyRangeThroughputExceeded" {
		t.Fatalf("the hot index key's second entry: %v, reasons %+v", err, reasons)
	}
	if err := put(c, indexed, "pk", "c", "owner", "w2"); err != nil {
		t.Fatalf("another index key value: %v", err)
	}
}

// Every index key value has a bucket of its own: a base write whose index
// entry exceeds it is throttled (IndexWriteKeyRangeThroughputExceeded, the
// index's ARN) and not applied (a PutItem is refused before it is applied,
// an UpdateItem after, and the item put back); another index key value is
// not throttled.
func TestIndexKeyThrottled(t *testing.T) {
	p := profile()
	p.Throughput = dynamodel.AWS().Throughput
	p.Throughput.IndexWCU = 20
	p.Throughput.Burst = 5 * time.Second // an index key's bucket: 100 units, refilled in 5 s
	_, c := start(t, p)
	table := createTable(t, c, tableSpec{projection: types.ProjectionTypeAll})
	big := strings.Repeat("x", 100*1024-40) // an entry of 100 index write units
	// u1 has no owner yet: it is in no index entry.
	if err := put(c, table, "pk", "u1", "v", big); err != nil {
		t.Fatal(err)
	}
	if err := put(c, table, "pk", "a", "owner", "w1", "v", big); err != nil {
		t.Fatalf("the first entry for w1 (a full bucket): %v", err)
	}
	check := func(what string, err error) {
		t.Helper()
		reasons, isThrottle := throttleReasons(err)
		if !isThrottle || len(reasons) != 1 || aws.ToString(reasons[0].Reason) != "IndexWriteKeyRangeThroughputExceeded" ||
			!strings.HasSuffix(aws.ToString(reasons[0].Resource), ":table/"+table+"/index/by_owner") {
			t.Fatalf("%s: %v, reasons %+v", what, err, reasons)
		}
	}
	check("a PutItem of a second entry for w1", put(c, table, "pk", "b", "owner", "w1", "v", big))
	if got := get(t, c, table, "b", "owner", true); got != "" {
		t.Errorf("the throttled PutItem was applied: owner %q", got)
	}
	_, err := c.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{"pk": s("u1")}, UpdateExpression: aws.String("SET #o = :w"),
		ExpressionAttributeNames: map[string]string{"#o": "owner"}, ExpressionAttributeValues: map[string]types.AttributeValue{":w": s("w1")}})
	check("an UpdateItem moving u1's entry to w1", err)
	if got := get(t, c, table, "u1", "owner", true); got != "(none)" {
		t.Errorf("the throttled UpdateItem was left applied: owner %q", got)
	}
	if err := put(c, table, "pk", "c", "owner", "w9", "v", big); err != nil {
		t.Errorf("an entry for another index key value: %v", err)
	}
}

// Ambiguous errors: a write answered 500 before being applied is not
// applied, one answered 500 after is, and one whose reply is dropped (no
// HTTP response at all) is applied.
func TestAmbiguousErrors(t *testing.T) {
	m, c := start(t, profile())
	table := createTable(t, c, tableSpec{})
	for _, tc := range []struct {
		kind    dynamodel.Fault
		applied bool
	}{{dynamodel.FaultBefore, false}, {dynamodel.FaultAfter, true}, {dynamodel.FaultDrop, true}} {
		t.Run(string(tc.kind), func(t *testing.T) {
			if err := m.Storm(tc.kind, 1, time.Minute); err != nil {
				t.Fatal(err)
			}
			err := put(c, table, "pk", string(tc.kind), "v", "1")
			if err := m.Storm(tc.kind, 0, time.Minute); err != nil {
				t.Fatal(err)
			}
			var ise *types.InternalServerError
			var re *awshttp.ResponseError
			switch {
			case err == nil:
				t.Fatal("the write succeeded")
			case tc.kind == dynamodel.FaultDrop && errors.As(err, &re) && re.HTTPStatusCode() != 0:
				t.Fatalf("a dropped reply came back as an HTTP response: %v", err)
			case tc.kind != dynamodel.FaultDrop && !errors.As(err, &ise):
				t.Fatalf("want InternalServerError, got %v", err)
			}
			if got := get(t, c, table, string(tc.kind), "v", true) == "1"; got != tc.applied {
				t.Fatalf("applied: %v, want %v (error %v)", got, tc.applied, err)
			}
		})
	}
	if u := m.Meter().Op(table, "PutItem"); u.Faults != 3 || u.WriteUnits != 2 {
		t.Errorf("meter %+v: want 3 faults and the 2 applied writes billed", u)
	}
}

// Billing: a write of a 3.5 KB item costs 4 write units; an update of a
// 1.2 KB item to 0.5 KB costs 2 (the larger image); a failed condition
// costs the item as it is; index entries put, moved and deleted cost 1, 2
// and 1; reads cost 4 KB units, half when eventually consistent.
func TestBilling(t *testing.T) {
	m, c := start(t, profile())
	table := createTable(t, c, tableSpec{projection: types.ProjectionTypeKeysOnly})
	ctx := context.Background()
	// size = len("pk") + len(value) + len("data") + len(data)
	data := func(pk string, size int) string { return strings.Repeat("d", size-len("pk")-len(pk)-len("data")) }
	if err := put(c, table, "pk", "b1", "data", data("b1", 3584)); err != nil {
		t.Fatal(err)
	}
	if u := m.Meter().Op(table, "PutItem"); u.WriteUnits != 4 {
		t.Fatalf("a 3.5 KB item written: %v write units, want 4", u.WriteUnits)
	}
	if err := put(c, table, "pk", "b2", "data", data("b2", 1229)); err != nil {
		t.Fatal(err)
	}
	_, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": s("b2")},
		UpdateExpression: aws.String("SET #d = :d"), ExpressionAttributeNames: map[string]string{"#d": "data"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":d": s(data("b2", 512))}})
	if err != nil {
		t.Fatal(err)
	}
	if u := m.Meter().Op(table, "UpdateItem"); u.WriteUnits != 2 || u.Requests != 1 {
		t.Fatalf("a 1.2 KB item updated to 0.5 KB: %+v, want 2 write units", u)
	}
	_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": s("b2")},
		ConditionExpression: aws.String("attribute_not_exists(pk)")})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("the conditional put: %v", err)
	}
	if u := m.Meter().Op(table, "PutItem"); u.WriteUnits != 4+2+1 || u.ConditionFailed != 1 {
		t.Fatalf("after a failed condition on the 0.5 KB item: %+v, want 7 write units, 1 condition failed", u)
	}

	if err := put(c, table, "pk", "i1", "owner", "w1"); err != nil {
		t.Fatal(err)
	}
	if err := put(c, table, "pk", "i1", "owner", "w2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": s("i1")}}); err != nil {
		t.Fatal(err)
	}
	mt := m.Meter().Tables[table]
	if got := mt.IndexWriteUnits["by_owner"]; got != 1+2+1 {
		t.Errorf("index write units %v, want 4 (a put, a move, a delete)", got)
	}
	if u := mt.Ops["DeleteItem"]; u.WriteUnits != 1 || u.IndexWriteUnits != 1 {
		t.Errorf("the delete: %+v", u)
	}

	get(t, c, table, "b1", "data", true)
	get(t, c, table, "b1", "data", false)
	if u := m.Meter().Op(table, "GetItem"); u.ReadUnits != 1.5 || u.Requests != 2 {
		t.Errorf("a consistent and an eventually consistent read of 3.5 KB: %+v, want 1.5 read units", u)
	}
}

// The aws profile end to end, through the SDK's standard retryer: a table
// and an item that were on the primary before the model started are copied
// to its lagging state; writes, reads and index queries work under its
// latency, lag and rare faults, and are metered.
func TestAWSProfile(t *testing.T) {
	enginetest.Require(t)
	primary := client(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	before := createTable(t, primary, tableSpec{projection: types.ProjectionTypeKeysOnly})
	if err := put(primary, before, "pk", "old", "owner", "w0"); err != nil {
		t.Fatal(err)
	}
	m, _ := start(t, dynamodel.AWS())
	c := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(m.Endpoint()), Region: "us-east-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local"}, nil
		}),
	})
	if got := get(t, c, before, "old", "owner", false); got != "w0" {
		t.Fatalf("an eventually consistent read of an item written before the model started: %q", got)
	}
	if got := owned(t, c, before, "w0"); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("the index of a table made before the model started: %v", got)
	}
	table := createTable(t, c, tableSpec{projection: types.ProjectionTypeKeysOnly})
	var want []string
	for i := range 40 {
		pk := fmt.Sprintf("s%02d", i)
		want = append(want, pk)
		if err := put(c, table, "pk", pk, "owner", "w1"); err != nil {
			t.Fatalf("put %s: %v", pk, err)
		}
		if got := get(t, c, table, pk, "owner", true); got != "w1" {
			t.Fatalf("consistent read of %s: %q", pk, got)
		}
	}
	testwait.Eventually(t, 20*time.Second, "the index lists all 40 items", func() bool {
		return slices.Equal(owned(t, c, table, "w1"), want)
	})
	if u := m.Meter().Op(table, "PutItem"); u.WriteUnits < 40 || u.Items < 40 {
		t.Errorf("meter %+v: want at least the 40 writes billed", u)
	}
	if got := m.Meter().Tables[table].IndexWriteUnits["by_owner"]; got < 40 {
		t.Errorf("index write units %v, want at least 40", got)
	}
}

// The control endpoints drive a model in another process: a storm, the
// meter, and a refusal of what they do not understand. A POST that took
// effect answers 200 with what is now in effect and until when (issue 42).
func TestControlEndpoints(t *testing.T) {
	m, c := start(t, profile())
	table := createTable(t, c, tableSpec{})
	type answer struct {
		Control  string         `json:"control"`
		InEffect map[string]any `json:"in_effect"`
		For      string         `json:"for"`
		Until    time.Time      `json:"until"`
	}
	post := func(path string) (int, answer) {
		t.Helper()
		resp, err := http.Post(m.Endpoint()+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a answer
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
				t.Fatalf("%s: the answer: %v", path, err)
			}
		}
		return resp.StatusCode, a
	}
	effect := func(path, control string, want map[string]any, d time.Duration) {
		t.Helper()
		before := time.Now()
		code, a := post(path)
		if code != http.StatusOK || a.Control != control || a.For != d.String() || !maps.Equal(a.InEffect, want) ||
			a.Until.Before(before.Add(d).Add(-time.Millisecond)) || a.Until.After(time.Now().Add(d)) {
			t.Fatalf("%s: %d %+v, want 200 with %s in effect %v for %s until about %s", path, code, a, control, want, d, before.Add(d))
		}
	}
	effect("/dynamodel/storm?kind=before&share=1&for=1m", "storm", map[string]any{"kind": "before", "share": 1.0}, time.Minute)
	var ise *types.InternalServerError
	if err := put(c, table, "pk", "k"); !errors.As(err, &ise) {
		t.Fatalf("a write in a storm of 500s: %v", err)
	}
	effect("/dynamodel/storm?kind=before&share=0&for=1m", "storm", map[string]any{"kind": "before", "share": 0.0}, time.Minute)
	effect("/dynamodel/hold?fraction=0.1&for=30s", "hold", map[string]any{"table": "*", "fraction": 0.1}, 30*time.Second)
	effect("/dynamodel/hold?fraction=1&for=0s&table="+table, "hold", map[string]any{"table": table, "fraction": 1.0}, 0)
	effect("/dynamodel/hotkey?table="+table+"&key=k&fraction=0.5&for=1s", "hotkey", map[string]any{"table": table, "key": "k", "fraction": 0.5}, time.Second)
	// The answer docs/local-stack.md shows, its time aside.
	doc, err := os.ReadFile("../../docs/local-stack.md")
	if err != nil {
		t.Fatal(err)
	}
	shown := regexp.MustCompile(`\{"control":"hold".*?"until":"[^"]*"\}`).Find(doc)
	resp, err := http.Post(m.Endpoint()+"/dynamodel/hold?fraction=0.1&for=1m", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	untilOut := regexp.MustCompile(`"until":"[^"]*"`)
	if w, g := untilOut.ReplaceAllString(string(shown), `"until":T`), untilOut.ReplaceAllString(strings.TrimSpace(string(got)), `"until":T`); w != g {
		t.Errorf("docs/local-stack.md shows hold?fraction=0.1&for=1m answering\n%s\nthe model answers\n%s", shown, got)
	}
	for _, bad := range []string{"/dynamodel/storm?kind=sideways&share=1&for=1m", "/dynamodel/hold?fraction=x&for=1m", "/dynamodel/lag?lag=1s&for=1m"} {
		if code, _ := post(bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, code) // lag: this model has no lagging state
		}
	}
	resp, err = http.Get(m.Endpoint() + "/dynamodel/meter")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var meter dynamodel.Meter
	if err := json.NewDecoder(resp.Body).Decode(&meter); err != nil {
		t.Fatal(err)
	}
	if u := meter.Op(table, "PutItem"); u.Faults != 1 || u.Requests != 1 {
		t.Errorf("the meter over HTTP: %+v", u)
	}
}

// Control drives a model through its endpoints as the model's own methods
// do: a storm, its end, a refused control, the meter.
func TestControl(t *testing.T) {
	m, c := start(t, profile())
	table := createTable(t, c, tableSpec{})
	ctl := dynamodel.NewControl(m.Endpoint())
	ctx := context.Background()
	if err := ctl.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Storm(ctx, dynamodel.FaultBefore, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	var ise *types.InternalServerError
	if err := put(c, table, "pk", "k"); !errors.As(err, &ise) {
		t.Fatalf("a write in a storm of 500s: %v", err)
	}
	if err := ctl.Storm(ctx, dynamodel.FaultBefore, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := put(c, table, "pk", "k"); err != nil {
		t.Fatalf("a write after the storm: %v", err)
	}
	if err := ctl.LagEpisode(ctx, time.Second, time.Minute); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("a lag episode on a model without lag: %v, want a 400", err)
	}
	if err := ctl.HoldTable(ctx, table, 0.5, time.Second); err != nil {
		t.Error(err)
	}
	if err := ctl.HotKey(ctx, table, "k", 0.5, time.Second); err != nil {
		t.Error(err)
	}
	meter, err := ctl.Meter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u := meter.Op(table, "PutItem"); u.Faults != 1 || u.Requests != 2 {
		t.Errorf("the meter through Control: %+v", u)
	}
}

// The controls list themselves and refuse what they cannot do with a JSON
// reason naming the parameter (issue 42): a fraction above 1, a negative
// duration, a parameter the control does not take.
func TestControlRefusalsNameTheParameter(t *testing.T) {
	m, _ := start(t, profile())
	resp, err := http.Get(m.Endpoint() + "/dynamodel/")
	if err != nil {
		t.Fatal(err)
	}
	var list []struct{ Method, Path string }
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || len(list) == 0 {
		t.Fatalf("GET /dynamodel/: %d, %v, %d controls", resp.StatusCode, err, len(list))
	}
	for bad, param := range map[string]string{
		"/dynamodel/hold?fraction=2&for=1m":              "fraction",
		"/dynamodel/hold?fraction=0.5&for=-1m":           "for",
		"/dynamodel/hold?fraction=0.5&for=1m&fractoin=1": "fractoin",
		"/dynamodel/storm?kind=before&share=3&for=1m":    "share",
	} {
		resp, err := http.Post(m.Endpoint()+bad, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Param, Reason string }
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || err != nil || e.Param != param || e.Reason == "" {
			t.Errorf("%s: %d %+v (%v), want 400 naming %s", bad, resp.StatusCode, e, err, param)
		}
	}
}
