package streamer

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/dynamodel"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// onModel routes e's workers through a DynamoDB model (testkit/dynamodel)
// in front of the test's dynalite, with p's behaviour, each worker with the
// two clients production gives it (bulk: the SDK's standard retryer and its
// budget; liveness: awsconfig.LivenessRetryer).
func (e *env) onModel(p dynamodel.Profile) *dynamodel.Model {
	e.t.Helper()
	m := dynamodel.StartT(e.t, dynamodel.Config{Profile: p, Primary: os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"), Seed: 11})
	ac, err := awsconfig.Load(context.Background(), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	at := func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(m.Endpoint()) }
	e.workerDB = dynamodb.NewFromConfig(ac, at)
	e.workerLiveDB = dynamodb.NewFromConfig(ac, at, func(o *dynamodb.Options) { o.Retryer = awsconfig.LivenessRetryer(testRPC) })
	return m
}

// TestMassTakeoverOnAHotIndexKeyBacksOff: on the DynamoDB model (the aws
// profile's latency, index lag and throttling; no ambiguous errors and no
// multi-second latency spikes, which other tests cover), worker a holds 30
// sessions and crashes. b and c take them over while their by_owner index
// keys are hot (each key value at 2 write units a second, so most acquires
// are throttled: IndexWriteKeyRangeThroughputExceeded). The takeover backs
// off instead of amplifying the throttling: the claim pacers slow down and
// the throttled requests stay a small part of what the configured claim
// rate would send; the heartbeats keep their share: neither b nor c is
// declared dead or loses its liveness epoch. Once the keys cool down every
// session is owned again, each by one worker.
func TestMassTakeoverOnAHotIndexKeyBacksOff(t *testing.T) {
	e := newEnv(t)
	p := dynamodel.AWS()
	p.Faults = dynamodel.Faults{}
	for op, d := range p.Latency {
		d.SpikeShare = 0
		p.Latency[op] = d
	}
	m := e.onModel(p)
	noRebalance := func(c *Config) { c.RebalanceEvery = 0 }
	a := e.worker(noRebalance)
	const n = 30
	ids := e.streaming(n, 1)
	testwait.Eventually(t, 10*time.Second, "a owns every session", func() bool { return a.Status().Owned == n })

	const hold = 15 * time.Second
	const fraction = 0.0002 // of the index key's 1,000 write units a second
	// e.worker names its workers w1, w2, ... in order: b is w2, c is w3.
	m.HotKey(e.table, "w2", fraction, hold)
	m.HotKey(e.table, "w3", fraction, hold)
	hotUntil := time.Now().Add(hold)
	b, c := e.worker(noRebalance), e.worker(noRebalance)
	if b.ID() != "w2" || c.ID() != "w3" {
		t.Fatalf("workers %s and %s, want w2 and w3 (the hot keys)", b.ID(), c.ID())
	}
	epochB, epochC := b.Status().Record.Epoch, c.Status().Record.Epoch
	before := m.Meter().Op(e.table, "UpdateItem")
	a.kill()

	testwait.Eventually(t, testTTL+slack, "a claim pacer slowed down by throttled claims", func() bool {
		return b.pacer.Throttling() || c.pacer.Throttling()
	})
	for time.Now().Before(hotUntil) {
		for _, w := range []*testWorker{b, c} {
			if st := w.Status(); st.Record.State != schema.WorkerAlive {
				t.Fatalf("%s is %s during the throttling (record %+v)", w.ID(), st.Record.State, st.Record)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	during := m.Meter().Op(e.table, "UpdateItem")
	throttled := during.Throttled - before.Throttled
	owned := b.Status().Owned + c.Status().Owned
	t.Logf("during %v of hot index keys: %d UpdateItems throttled, %d admitted, %d of %d sessions taken over",
		hold, throttled, during.Requests-before.Requests, owned, n)
	if throttled == 0 {
		t.Fatal("no UpdateItem throttled: the hot index keys did not act")
	}
	// Two workers at ClaimsPerSecond each would send this many claims over
	// the hold; paced claims are a small part of it.
	offered := int64(2 * testConfig("x").ClaimsPerSecond * hold.Seconds())
	if throttled > offered/10 {
		t.Errorf("%d throttled UpdateItems in %v: more than a tenth of the %d claims the configured rate allows", throttled, hold, offered)
	}

	testwait.Eventually(t, 30*time.Second, "every session owned again after the keys cool down", func() bool {
		return b.Status().Owned+c.Status().Owned == n
	})
	for _, id := range ids {
		if e.owner(id) == nil {
			t.Errorf("%s has no owner", id)
		}
	}
	if eb, ec := b.Status().Record.Epoch, c.Status().Record.Epoch; eb != epochB || ec != epochC {
		t.Errorf("liveness epochs moved during the throttling: b %d→%d, c %d→%d (declared dead)", epochB, eb, epochC, ec)
	}
}
