package sinktest

// Reading back what the AWS destinations took, with the engine's own API
// (a client other than the sink's), unpacked by the consume package as a
// consumer would.

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	stypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// SQSMessage is one message received from a queue.
type SQSMessage struct {
	Body        string
	ContentType string // its consume.ContentTypeAttribute ("": none)
}

// DrainSQS receives and deletes every message of queue q (asking SQS for
// the content-type attribute), in the order received. The queue is drained
// when a receive comes back empty and SQS counts no message left (visible,
// in flight or delayed: every message received is deleted), within ctx.
func DrainSQS(ctx context.Context, t testing.TB, client *sqs.Client, q string) []SQSMessage {
	t.Helper()
	var msgs []SQSMessage
	for {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &q, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{consume.ContentTypeAttribute}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 && sqsEmpty(ctx, t, client, q) {
			return msgs
		}
		for _, m := range out.Messages {
			msgs = append(msgs, SQSMessage{Body: aws.ToString(m.Body), ContentType: aws.ToString(m.MessageAttributes[consume.ContentTypeAttribute].StringValue)})
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// sqsEmpty reports whether SQS counts no message in q: none visible, in
// flight or delayed.
func sqsEmpty(ctx context.Context, t testing.TB, client *sqs.Client, q string) bool {
	t.Helper()
	counts := []stypes.QueueAttributeName{stypes.QueueAttributeNameApproximateNumberOfMessages,
		stypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, stypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &q, AttributeNames: counts})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range counts {
		if n := out.Attributes[string(name)]; n != "0" {
			return false
		}
	}
	return true
}

// SQSEnvelopes drains q (DrainSQS) and unpacks every message
// (consume.FromSQS), in order.
func SQSEnvelopes(ctx context.Context, t testing.TB, client *sqs.Client, q string) []consume.Envelope {
	t.Helper()
	var envs []consume.Envelope
	for _, m := range DrainSQS(ctx, t, client, q) {
		e, err := consume.FromSQS(m.Body, m.ContentType)
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, e...)
	}
	return envs
}

// ReadKinesis is every record of stream, shard by shard, each shard's in
// order.
func ReadKinesis(ctx context.Context, t testing.TB, client *kinesis.Client, stream string) []ktypes.Record {
	t.Helper()
	shards, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: &stream})
	if err != nil {
		t.Fatal(err)
	}
	var recs []ktypes.Record
	for _, sh := range shards.Shards {
		recs = append(recs, ReadShard(ctx, t, client, stream, aws.ToString(sh.ShardId))...)
	}
	return recs
}

// ReadShard is every record of one shard of stream, in order.
func ReadShard(ctx context.Context, t testing.TB, client *kinesis.Client, stream, shard string) []ktypes.Record {
	t.Helper()
	it, err := client.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: &stream, ShardId: &shard, ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	var recs []ktypes.Record
	iter := it.ShardIterator
	for iter != nil {
		out, err := client.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(10000)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, out.Records...)
		if len(out.Records) == 0 || aws.ToInt64(out.MillisBehindLatest) == 0 && len(out.Records) < 10000 {
			break
		}
		iter = out.NextShardIterator
	}
	return recs
}

// KinesisEnvelopes reads stream (ReadKinesis) and takes every record apart
// (consume.FromKinesis), in order.
func KinesisEnvelopes(ctx context.Context, t testing.TB, client *kinesis.Client, stream string) []consume.Envelope {
	t.Helper()
	var envs []consume.Envelope
	for _, r := range ReadKinesis(ctx, t, client, stream) {
		e, err := consume.FromKinesis(r.Data)
		if err != nil {
			t.Fatalf("record %s: %v", aws.ToString(r.SequenceNumber), err)
		}
		envs = append(envs, e...)
	}
	return envs
}
