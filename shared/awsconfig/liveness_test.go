package awsconfig_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// fakeDynamo speaks enough of DynamoDB's JSON protocol for the store's
// liveness and claim writes: an UpdateItem of a worker record (a heartbeat,
// a death declaration) is answered ThrottlingException throttleRecord
// times, then applied (the record comes back); an UpdateItem of a session
// (a claim) is always ThrottlingException; anything else is refused with a
// ValidationException, which the SDK does not retry. It records every
// request as "<operation> <key>".
type fakeDynamo struct {
	throttleRecord int

	mu       sync.Mutex
	requests []string
	pending  int // throttled attempts of the current record write
}

func (f *fakeDynamo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	var in struct {
		Key, Item map[string]json.RawMessage
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var pk struct{ S string }
	if raw, ok := in.Key[schema.AttrPk]; ok {
		_ = json.Unmarshal(raw, &pk)
	} else if raw, ok := in.Item[schema.AttrPk]; ok {
		_ = json.Unmarshal(raw, &pk)
	}
	key := pk.S
	f.mu.Lock()
	f.requests = append(f.requests, op+" "+key)
	throttle := false
	switch {
	case op == "UpdateItem" && strings.HasPrefix(key, schema.WorkerKeyPrefix):
		if f.pending < f.throttleRecord {
			f.pending++
			throttle = true
		} else {
			f.pending = 0
		}
	case op == "UpdateItem":
		throttle = true
	default:
		f.mu.Unlock()
		reply(w, http.StatusBadRequest, map[string]any{"__type": "com.amazon.coral.validate#ValidationException", "message": "not modelled by the fake"})
		return
	}
	f.mu.Unlock()
	if throttle {
		reply(w, http.StatusBadRequest, map[string]any{
			"__type":  "com.amazonaws.dynamodb.v20120810#ThrottlingException",
			"message": "Throughput exceeds the current capacity of your table or index.",
		})
		return
	}
	n := func(x int) map[string]string { return map[string]string{"N": fmt.Sprint(x)} }
	reply(w, http.StatusOK, map[string]any{"Attributes": map[string]any{
		schema.AttrPk: map[string]string{"S": key}, schema.AttrWorkerState: map[string]string{"S": schema.WorkerAlive},
		schema.AttrWorkerEpoch: n(1), "hb_seq": n(1), "ttl_ms": n(10000), "load": n(0), "capacity": n(10), "started_at_ms": n(1),
		schema.AttrWorkerList: map[string]string{"S": schema.WorkerListAlive},
	}})
}

func reply(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// taken returns the requests so far and forgets them.
func (f *fakeDynamo) taken() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.requests
	f.requests = nil
	return out
}

// client is a DynamoDB client of srv with retryer r.
func client(srv *httptest.Server, r aws.Retryer) *dynamodb.Client {
	cfg := aws.Config{
		Region: "us-east-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test", Source: "test"}, nil
		}),
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.Retryer = r
	})
}

// noWait makes a retryer's backoff zero: the test counts attempts and
// tokens, never time.
func noWait(o *retry.StandardOptions) {
	o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
}

func quotaExceeded(err error) bool {
	var q ratelimit.QuotaExceededError
	return errors.As(err, &q)
}

// Issue 24: claims throttled until the bulk client's retry budget is gone
// leave the heartbeats, on the liveness client, all their retries; on one
// shared client (the wiring before) a heartbeat then gets none.
func TestHeartbeatsKeepTheirRetriesAfterThrottledClaimsDrainTheBulkBudget(t *testing.T) {
	ctx := context.Background()
	bulkSrv, liveSrv := &fakeDynamo{throttleRecord: 2}, &fakeDynamo{throttleRecord: 2}
	bulkHTTP, liveHTTP := httptest.NewServer(bulkSrv), httptest.NewServer(liveSrv)
	defer bulkHTTP.Close()
	defer liveHTTP.Close()
	bulk := client(bulkHTTP, awsconfig.BulkRetryer(3, noWait))
	live := client(liveHTTP, awsconfig.LivenessRetryer(lease.DefaultConfig("x").RPCTimeout, noWait))
	split := dynamostore.New(bulk, "t", dynamostore.WithLiveness(live))
	shared := dynamostore.New(bulk, "t") // one client for everything

	// Claims, every attempt throttled, until the budget refuses a retry.
	claims := 0
	for {
		_, err := split.Acquire(ctx, fmt.Sprintf("s-%d", claims), "w1", lease.From{})
		claims++
		if quotaExceeded(err) {
			break
		}
		if err == nil || claims > 1000 {
			t.Fatalf("claim %d: %v; want throttled until the retry quota is exceeded", claims, err)
		}
	}
	if got := len(bulkSrv.taken()); got != 3*(claims-1)+1 {
		t.Fatalf("bulk endpoint saw %d requests for %d claims (3 attempts each, then 1 without a retry token)", got, claims)
	}
	if n := len(liveSrv.taken()); n != 0 {
		t.Fatalf("claims reached the liveness endpoint: %d requests", n)
	}

	// Heartbeats, each throttled twice before it is applied: every one
	// succeeds on its third attempt, many times over what a budget of 500
	// tokens (5 a throttled retry) would allow.
	const beats = 200
	for i := 1; i <= beats; i++ {
		if _, err := split.Heartbeat(ctx, "w1", 1, lease.Heartbeat{Seq: int64(i + 1), AtMs: 1}); err != nil {
			t.Fatalf("heartbeat %d after the claims drained the bulk budget: %v", i, err)
		}
	}
	if got := liveSrv.taken(); len(got) != 3*beats {
		t.Fatalf("liveness endpoint saw %d requests for %d heartbeats, want 3 each", len(got), beats)
	}
	if err := split.DeclareDead(ctx, "w2", 1, 0, "w1", 1); err != nil {
		t.Fatalf("a death declaration after the claims drained the bulk budget: %v", err)
	}

	// The same heartbeat on the shared client gets no retry at all.
	_, err := shared.Heartbeat(ctx, "w1", 1, lease.Heartbeat{Seq: beats + 10, AtMs: 1})
	if !quotaExceeded(err) {
		t.Fatalf("heartbeat on the drained shared client: %v, want the retry quota exceeded", err)
	}
	if got := bulkSrv.taken(); len(got) != 1 {
		t.Fatalf("shared client: %d attempts %v, want 1 (no retry token)", len(got), got)
	}
}

// WithLiveness routes exactly the liveness path to the liveness client.
func TestStoreRoutesTheLivenessPathToItsClient(t *testing.T) {
	ctx := context.Background()
	bulkSrv, liveSrv := &fakeDynamo{}, &fakeDynamo{}
	bulkHTTP, liveHTTP := httptest.NewServer(bulkSrv), httptest.NewServer(liveSrv)
	defer bulkHTTP.Close()
	defer liveHTTP.Close()
	s := dynamostore.New(client(bulkHTTP, awsconfig.BulkRetryer(1)), "t",
		dynamostore.WithLiveness(client(liveHTTP, awsconfig.LivenessRetryer(2*time.Second))))
	// Errors are expected (the fake refuses what it does not model): only
	// where each request went matters.
	_ = s.Register(ctx, lease.WorkerRecord{ID: "w1", TTL: time.Second})
	_, _ = s.Heartbeat(ctx, "w1", 1, lease.Heartbeat{Seq: 2})
	_ = s.DeclareDead(ctx, "w2", 1, 0, "w1", 1)
	_ = s.Leave(ctx, "w1", 1, schema.WorkerListGone, 1)
	_, _ = s.GetWorker(ctx, "w2")
	_, _ = s.ListWorkers(ctx, schema.WorkerListAlive, 0)
	live := liveSrv.taken()
	_, _ = s.Acquire(ctx, "s1", "w1", lease.From{})
	_ = s.Checkpoint(ctx, lease.Token{ConnectionID: "s1", Owner: "w1", Epoch: 1}, 5)
	_, _ = s.Get(ctx, "s1")
	_, _ = s.Unowned(ctx, 1)
	_, _ = s.OwnedBy(ctx, "w1", 0)
	_, _ = s.GetWorkers(ctx, []string{"w1"})
	_ = s.MarkDone(ctx, "w2")
	bulk := bulkSrv.taken()
	wantLive := []string{"PutItem worker#w1", "UpdateItem worker#w1", "UpdateItem worker#w2", "UpdateItem worker#w1", "GetItem worker#w2", "Query "}
	if !slices.Equal(live, wantLive) {
		t.Fatalf("liveness client requests %q, want %q", live, wantLive)
	}
	for _, r := range bulk {
		if strings.HasPrefix(r, "PutItem worker#") || r == "GetItem worker#w2" {
			t.Fatalf("liveness request %q on the bulk client", r)
		}
	}
	if len(liveSrv.taken()) != 0 || !slices.Contains(bulk, "UpdateItem s1") || !slices.Contains(bulk, "UpdateItem worker#w2") {
		t.Fatalf("bulk client requests %q: want the claim and MarkDone there", bulk)
	}
	for _, op := range []string{dynamostore.OpAcquire, dynamostore.OpCheckpoint, dynamostore.OpRelease, dynamostore.OpMarkDone, dynamostore.OpGetWorkers} {
		if dynamostore.Liveness(op) {
			t.Fatalf("%s is on the liveness path", op)
		}
	}
}

// The liveness retryer has no budget and waits that fit its call: with the
// lease defaults its retries are over before the store call's timeout,
// which Config.Validate keeps inside the trust window.
func TestLivenessRetryerHasNoBudgetAndFitsTheTrustWindow(t *testing.T) {
	cfg := lease.DefaultConfig("x")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r := awsconfig.LivenessRetryer(cfg.RPCTimeout)
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException"}
	if !r.IsErrorRetryable(throttled) || r.MaxAttempts() != awsconfig.LivenessMaxAttempts {
		t.Fatalf("retryable %v, max attempts %d", r.IsErrorRetryable(throttled), r.MaxAttempts())
	}
	capped := awsconfig.LivenessMaxBackoff(cfg.RPCTimeout)
	for attempt := 1; attempt < r.MaxAttempts(); attempt++ {
		for range 200 {
			if d, err := r.RetryDelay(attempt, throttled); err != nil || d > capped {
				t.Fatalf("retry delay after attempt %d: %s %v, want at most %s", attempt, d, err, capped)
			}
		}
	}
	total := time.Duration(r.MaxAttempts()-1) * capped
	if total > cfg.RPCTimeout/2 || cfg.RPCTimeout > cfg.TTL-cfg.SafetyMargin-cfg.HeartbeatEvery {
		t.Fatalf("waits up to %s in a call of %s, trust window %s", total, cfg.RPCTimeout, cfg.TTL-cfg.SafetyMargin)
	}
	for i := range 10_000 {
		if _, err := r.GetRetryToken(context.Background(), throttled); err != nil {
			t.Fatalf("liveness retry token %d refused: %v", i, err)
		}
	}
	// A bulk retryer's budget is its own: draining one leaves another full.
	drained, fresh := awsconfig.BulkRetryer(3), awsconfig.BulkRetryer(3)
	refused := 0
	for range 200 {
		if _, err := drained.GetRetryToken(context.Background(), throttled); err != nil {
			refused++
		}
	}
	if refused != 200-int(retry.DefaultRetryRateTokens/retry.DefaultThrottlingRetryCost) {
		t.Fatalf("bulk budget refused %d of 200 throttled retries, want all after %d", refused, retry.DefaultRetryRateTokens/retry.DefaultThrottlingRetryCost)
	}
	if _, err := fresh.GetRetryToken(context.Background(), throttled); err != nil {
		t.Fatalf("a second bulk retryer shares the drained budget: %v", err)
	}
}
