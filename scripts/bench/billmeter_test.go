package bench

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// captured is one request as the SDK put it on the wire.
type captured struct {
	target string
	body   []byte
}

// wire returns a server that records every request and answers {} and the
// requests it saw.
func wire(t *testing.T) (*httptest.Server, func() []captured) {
	t.Helper()
	var mu sync.Mutex
	var got []captured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, captured{r.Header.Get("X-Amz-Target"), b})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	return srv, func() []captured { mu.Lock(); defer mu.Unlock(); return append([]captured(nil), got...) }
}

func sdkConfig() aws.Config {
	return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""), HTTPClient: &http.Client{Timeout: 10 * time.Second},
		RetryMaxAttempts: 1}
}

// SQS bills every started 64 KB of a request's payload (bodies and
// attributes) as one request, at least one: the meter reads it from the
// body aws-sdk-go-v2 sends.
func TestMeterCountsSQSChunksFromTheSDKsBody(t *testing.T) {
	srv, got := wire(t)
	c := sqs.NewFromConfig(sdkConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	small := []sqstypes.SendMessageBatchRequestEntry{}
	for i := range 10 {
		small = append(small, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(itoa(i)), MessageBody: aws.String(strings.Repeat("a", 300)),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"ct": {DataType: aws.String("String"), StringValue: aws.String("json")}}})
	}
	_, _ = c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(srv.URL + "/q"), Entries: small})
	big := []sqstypes.SendMessageBatchRequestEntry{}
	for i := range 10 {
		big = append(big, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(itoa(i)), MessageBody: aws.String(strings.Repeat("b", 10<<10))})
	}
	_, _ = c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(srv.URL + "/q"), Entries: big})
	_, _ = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(srv.URL + "/q"), MessageBody: aws.String("x")})
	reqs := got()
	if len(reqs) != 3 {
		t.Fatalf("the server saw %d requests, want 3", len(reqs))
	}
	var m sinkMeter
	m.window(true)
	for _, r := range reqs {
		m.observe(r.target, r.body, 0)
	}
	c3, _ := m.window(false)
	want := SinkCounts{Requests: 3, Messages: 21, Bytes: int64(10*(300+len("ct")+len("String")+len("json")) + 10*(10<<10) + 1),
		SQSBilled: 1 + 2 + 1} // 3.3 KB: one; 100 KB: two chunks; 1 B: one
	if c3 != want {
		t.Fatalf("counts %+v, want %+v", c3, want)
	}
	// Off: nothing counted.
	m.observe(reqs[0].target, reqs[0].body, 0)
	if c, _ := m.window(false); c != (SinkCounts{}) {
		t.Fatalf("counted %+v while off", c)
	}
}

// Kinesis bills one PUT payload unit per started 25 KB of a record
// (provisioned) and each record rounded up to 1 KB (on-demand); a record's
// size is its data and partition key.
func TestMeterCountsKinesisUnitsFromTheSDKsBody(t *testing.T) {
	srv, got := wire(t)
	c := kinesis.NewFromConfig(sdkConfig(), func(o *kinesis.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := "dyn-000001" // 10 bytes
	_, _ = c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []kintypes.PutRecordsRequestEntry{
		{Data: make([]byte, 300), PartitionKey: aws.String(key)},
		{Data: make([]byte, 1014), PartitionKey: aws.String(key)}, // exactly 1 KB with its key
		{Data: make([]byte, 30<<10), PartitionKey: aws.String(key)},
	}})
	reqs := got()
	if len(reqs) != 1 {
		t.Fatalf("the server saw %d requests, want 1", len(reqs))
	}
	cnt, err := CountRequest(reqs[0].target, reqs[0].body)
	if err != nil {
		t.Fatal(err)
	}
	want := SinkCounts{Requests: 1, Messages: 3, Bytes: 310 + 1024 + 30<<10 + 10, PutUnits: 1 + 1 + 2, OnDemandKB: 1 + 1 + 31}
	if cnt != want {
		t.Fatalf("counts %+v, want %+v", cnt, want)
	}
	// Other calls are not sink requests.
	if cnt, err := CountRequest("Kinesis_20131202.DescribeStream", []byte(`{}`)); err != nil || cnt != (SinkCounts{}) {
		t.Fatalf("DescribeStream counted %+v, %v", cnt, err)
	}
}

func closeTo(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
		t.Errorf("%s = %.6f, want %.6f", what, got, want)
	}
}

// The price model on counts whose bill is known by hand: a window of one
// month, 1,000 sessions.
func TestPriceOnKnownCounts(t *testing.T) {
	month := HoursPerMonth * 3600.0
	held := 3000 * BillTargetUtil // prod's 3,000 sessions per task at its 65 % target: 1,950
	tasks := 1000 / held
	taskMonth := (0.5*0.04048 + 1*0.004445 + 0.005) * HoursPerMonth

	sq := Price(BillInputs{Variant: BillSQS, Sessions: 1000, WindowSec: month, Sink: SinkCounts{Messages: 10_000_000, Bytes: 10_000_000, SQSBilled: 1_000_000},
		WRUPerSH: 60, WRUPerWH: 2100})
	closeTo(t, "tasks", sq.Tasks, tasks)
	closeTo(t, "fargate + ipv4", sq.Fargate+sq.IPv4, tasks*taskMonth)
	closeTo(t, "sqs sink", sq.Sink, 0.40)
	closeTo(t, "sqs consumer (1M receives + 1M deletes)", sq.Consumer, 0.80)
	closeTo(t, "dynamodb", sq.DynamoDB, 1000*HoursPerMonth*(60+2100/held)*0.625/1e6)
	closeTo(t, "total", sq.Total, sq.Fargate+sq.IPv4+sq.DynamoDB+1.20)

	// 1,000 records/s: one shard, and 2.628 billion PUT units.
	recs := int64(1000 * month)
	kp := Price(BillInputs{Variant: BillKinesisProv, Sessions: 1000, WindowSec: month, Sink: SinkCounts{Messages: recs, Bytes: recs * 400, PutUnits: recs, OnDemandKB: recs}})
	closeTo(t, "shards", kp.Shards, 1)
	closeTo(t, "kinesis provisioned sink", kp.Sink, 0.015*HoursPerMonth+float64(recs)*0.014/1e6)
	ko := Price(BillInputs{Variant: BillKinesisOD, Sessions: 1000, WindowSec: month, Sink: SinkCounts{Messages: recs, Bytes: recs * 400, PutUnits: recs, OnDemandKB: recs}})
	closeTo(t, "kinesis on-demand sink", ko.Sink, 0.04*HoursPerMonth+float64(recs)*1024/(1<<30)*0.08)
	closeTo(t, "kinesis on-demand consumer", ko.Consumer, float64(recs)*400/(1<<30)*0.04)

	// 1 GiB of stdout in a month → $0.50; half the sessions in the run
	// doubles every count per 1,000.
	so := Price(BillInputs{Variant: BillStdout, Sessions: 500, WindowSec: month, Sink: SinkCounts{Messages: 1000, Bytes: 1 << 30}})
	closeTo(t, "stdout sink", so.Sink, 1.0)

	// CPU bounds the sessions per task: 50 msg/s at 1.56 % of a core per
	// 1,000 msg/s → 0.25 vCPU ÷ 0.00078 = 320 sessions.
	md := Price(BillInputs{Variant: BillSQS, Sessions: 1000, WindowSec: month, Sink: SinkCounts{Messages: int64(50 * 1000 * month)}, CPUPerMsg: 0.0156 / 1000})
	closeTo(t, "sessions per task at 50 msg/s", md.SessionsPerTsk, 0.25/(0.0156/1000*50))

	// Packed: ten source messages per SQS message. The tasks follow the
	// source messages, the sink and its consumer the SQS messages, and
	// the sink's cost per message is per source message.
	one := Price(BillInputs{Variant: BillSQS, Sessions: 1000, WindowSec: month, Sink: SinkCounts{Messages: 10_000_000, Bytes: 10_000_000, SQSBilled: 1_000_000}, CPUPerMsg: 0.0156 / 1000})
	packed := Price(BillInputs{Variant: BillSQS, Sessions: 1000, WindowSec: month, Sink: SinkCounts{Messages: 1_000_000, Bytes: 10_000_000, SQSBilled: 100_000}, SourceMessages: 10_000_000, CPUPerMsg: 0.0156 / 1000})
	closeTo(t, "tasks, packed", packed.Tasks, one.Tasks)
	closeTo(t, "sink + consumer per million source messages, packed", packed.SinkPerMillionMsgs, one.SinkPerMillionMsgs/10)
}
