package bench

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/kpl"
)

// envelope is the sink's envelope of seq read at receivedMs.
func envelope(seq, receivedMs int64, chars sink.Chars) []byte {
	return sink.AppendEnvelope(nil, sink.Message{ConnectionID: "c1", Seq: seq, LeaseEpoch: 2, WorkerID: "w1", ReceivedAtMs: receivedMs,
		Data: []byte(`{"seq":1,"px":"1.5"}`)}, chars)
}

// An SQS request with a pack (the content-type attribute) and a plain
// envelope, as aws-sdk-go-v2 sends them: every envelope is timed from its
// received_at_ms to the request's arrival, and the messages per record are
// the envelopes over the SQS messages; a record of an unknown format is
// counted unread, not timed.
func TestDeliveriesTimeEveryEnvelopeOfAnSQSPack(t *testing.T) {
	srv, got := wire(t)
	c := sqs.NewFromConfig(sdkConfig(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const arrived = 1_000_000
	pack := bytes.Join([][]byte{envelope(1, arrived-40, sink.SQSChars), envelope(2, arrived-30, sink.SQSChars), envelope(3, arrived-5, sink.SQSChars)}, []byte("\n"))
	ct := func(v string) map[string]sqstypes.MessageAttributeValue {
		return map[string]sqstypes.MessageAttributeValue{consume.ContentTypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(v)}}
	}
	_, _ = c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(srv.URL + "/q"), Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("0"), MessageBody: aws.String(string(pack)), MessageAttributes: ct(consume.PackV1)},
		{Id: aws.String("1"), MessageBody: aws.String(string(envelope(4, arrived-100, sink.SQSChars)))},
		{Id: aws.String("2"), MessageBody: aws.String(string(envelope(5, arrived, sink.SQSChars))), MessageAttributes: ct("application/x-later; version=9")},
	}})
	reqs := got()
	if len(reqs) != 1 {
		t.Fatalf("the server saw %d requests, want 1", len(reqs))
	}
	d, err := ReadDeliveries(reqs[0].target, reqs[0].body, arrived)
	if err != nil {
		t.Fatal(err)
	}
	if d.Records != 3 || d.Envelopes != 4 || d.Unread != 1 {
		t.Fatalf("records %d, envelopes %d, unread %d; want 3, 4, 1", d.Records, d.Envelopes, d.Unread)
	}
	if want := []float64{40, 30, 5, 100}; !slices.Equal(d.LatencyMs, want) {
		t.Fatalf("latencies %v, want %v", d.LatencyMs, want)
	}
	l := d.latency()
	if l.PerRecord != 2 || l.Dist.N != 4 || l.Dist.P50 != 30 || l.Dist.P99 != 100 {
		t.Fatalf("summary %+v, want 2 messages per read record, p50 30 ms, p99 100 ms of 4", l)
	}
}

// A Kinesis request with a KPL-aggregated record and a plain one, as
// aws-sdk-go-v2 sends them, through the proxy's meter: every user record
// timed, the window's counts and deliveries returned together and reset.
func TestDeliveriesTimeEveryUserRecordOfAKinesisAggregate(t *testing.T) {
	srv, got := wire(t)
	c := kinesis.NewFromConfig(sdkConfig(), func(o *kinesis.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const arrived = 2_000_000
	agg := kpl.Aggregate("c1", [][]byte{envelope(1, arrived-60, sink.AnyChars), envelope(2, arrived-20, sink.AnyChars)})
	_, _ = c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("s"), Records: []kintypes.PutRecordsRequestEntry{
		{Data: agg, PartitionKey: aws.String("c1")},
		{Data: envelope(3, arrived-7, sink.AnyChars), PartitionKey: aws.String("c1")},
	}})
	reqs := got()
	if len(reqs) != 1 {
		t.Fatalf("the server saw %d requests, want 1", len(reqs))
	}
	var m sinkMeter
	m.observe(reqs[0].target, reqs[0].body, arrived) // off: not counted
	m.window(true)
	m.observe(reqs[0].target, reqs[0].body, arrived)
	cnt, d := m.window(false)
	if cnt.Requests != 1 || cnt.Messages != 2 {
		t.Fatalf("counts %+v, want 1 request of 2 records", cnt)
	}
	if d.Records != 2 || d.Envelopes != 3 || d.Unread != 0 || !slices.Equal(d.LatencyMs, []float64{60, 20, 7}) {
		t.Fatalf("deliveries %+v, want 3 envelopes in 2 records timed 60, 20, 7 ms", d)
	}
	if l := d.latency(); l.PerRecord != 1.5 {
		t.Fatalf("messages per record %.2f, want 1.5", l.PerRecord)
	}
	if _, d := m.window(false); d.Records != 0 || len(d.LatencyMs) != 0 {
		t.Fatalf("a new window kept %+v", d)
	}
	// Other calls carry no messages.
	if d, err := ReadDeliveries("Kinesis_20131202.DescribeStream", []byte(`{}`), arrived); err != nil || d.Records != 0 {
		t.Fatalf("DescribeStream read as %+v, %v", d, err)
	}
}
