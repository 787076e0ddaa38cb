package stacks

// The work queue with its dead-letter queue, and the sink's output queue or
// stream.

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskinesis"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// OutputMaxReceiveCount is how many times the output queue's consumers may
// receive a message before it moves to the output DLQ: a message they keep
// failing on stops blocking its FIFO message group and is kept 14 days.
const OutputMaxReceiveCount = 10

func newQueues(stack awscdk.Stack, cfg EnvConfig, opts Options) (dlq, work, output, outputDLQ awssqs.Queue) {
	// Queues hold notifications only (the table is the source of truth), so
	// they are destroyed with the stack in every environment.
	dlq = awssqs.NewQueue(stack, jsii.String("WorkDLQ"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   awscdk.RemovalPolicy_DESTROY,
	})
	work = awssqs.NewQueue(stack, jsii.String("WorkQueue"), &awssqs.QueueProps{
		Encryption:             awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:             jsii.Bool(true),
		VisibilityTimeout:      duration(cfg.WorkQueueVisible),
		ReceiveMessageWaitTime: awscdk.Duration_Seconds(jsii.Number(20)),
		RetentionPeriod:        awscdk.Duration_Days(jsii.Number(4)),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           dlq,
			MaxReceiveCount: jsii.Number(float64(cfg.MaxReceiveCount)),
		},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	if cfg.Sink != SinkSQS {
		return dlq, work, nil, nil
	}
	// The output queue's consumers are outside this stack; its DLQ keeps
	// what they cannot process (a FIFO queue's DLQ must be FIFO too).
	dlqProps := &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   awscdk.RemovalPolicy_DESTROY,
	}
	if opts.OutputFIFO {
		dlqProps.Fifo = jsii.Bool(true)
	}
	outputDLQ = awssqs.NewQueue(stack, jsii.String("OutputDLQ"), dlqProps)
	outProps := &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(4)),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           outputDLQ,
			MaxReceiveCount: jsii.Number(OutputMaxReceiveCount),
		},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	}
	if opts.OutputFIFO {
		// One message group per connection, deduplicated by the sink's
		// MessageDeduplicationId (connection id + seq): high-throughput FIFO.
		outProps.Fifo = jsii.Bool(true)
		outProps.DeduplicationScope = awssqs.DeduplicationScope_MESSAGE_GROUP
		outProps.FifoThroughputLimit = awssqs.FifoThroughputLimit_PER_MESSAGE_GROUP_ID
	}
	output = awssqs.NewQueue(stack, jsii.String("OutputQueue"), outProps)
	return dlq, work, output, outputDLQ
}

// sinkOutput is where the streamer's sink writes (at most one is set).
type sinkOutput struct {
	queue  awssqs.Queue
	stream awskinesis.Stream
}

// OnDemandHashBuckets are the kinesis sink's hash buckets on the on-demand
// output stream (schema.EnvSinkKinesisHashBuckets): a bucket's records all
// carry one explicit hash key, so they stay on one shard however the
// stream splits, and the stream can spread a fleet's writes over at most
// as many shards as there are buckets. A shard takes at most 1 MiB/s and
// 1,000 records/s of writes (Kinesis API Reference, CreateStream), and an
// on-demand stream adds shards as its traffic grows: 256 buckets let it
// grow to 256 MiB/s. On-demand bills bytes (each record rounded up to 1
// KB), not records, so the thinner packs of many buckets cost only the
// rounding (docs/worker.md, Kinesis hash buckets).
const OnDemandHashBuckets = 256

// newOutputStream creates the kinesis sink's stream: on-demand (no shards
// to size), encrypted with the AWS-managed key, 24 h retention.
func newOutputStream(stack awscdk.Stack, cfg EnvConfig) awskinesis.Stream {
	if cfg.Sink != SinkKinesis {
		return nil
	}
	return awskinesis.NewStream(stack, jsii.String("OutputStream"), &awskinesis.StreamProps{
		StreamMode:      awskinesis.StreamMode_ON_DEMAND,
		Encryption:      awskinesis.StreamEncryption_MANAGED,
		RetentionPeriod: awscdk.Duration_Hours(jsii.Number(24)),
		RemovalPolicy:   awscdk.RemovalPolicy_DESTROY,
	})
}
