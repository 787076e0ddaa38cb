package sqssink

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/sinktest"
)

// The sink conformance suite over the sqs sink on fauxqs, built as
// registry.Open builds it (with batchtest.EngineConfig's request timeout):
// batched through sink/batch with packing (the default) on a FIFO and on a
// standard queue, and unbatched (Handle, one SendMessage per message) on a
// FIFO queue.
func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name           string
		fifo, batching bool
	}{
		{"fifo-batched", true, true},
		{"fifo-unbatched", true, false},
		{"standard-batched", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sinktest.Run(t, func(t *testing.T) sinktest.Subject { return subject(t, c.fifo, c.batching) })
		})
	}
}

// subject is the sqs sink on a new queue of fauxqs, its requests recorded
// on the wire; the queue is read back with a client of its own.
func subject(t *testing.T, fifo, batching bool) sinktest.Subject {
	ctx, reader := fauxqsClient(t)
	name := fmt.Sprintf("conformance-%d", time.Now().UnixNano())
	attrs := map[string]string{}
	if fifo {
		name += ".fifo"
		attrs["FifoQueue"] = "true"
	}
	q, err := reader.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(q.QueueUrl)
	ac, err := awsconfig.Load(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	var wire sinktest.Wire
	ac.HTTPClient = wire.Client(ac.HTTPClient)
	s := NewConfig(sqs.NewFromConfig(ac), url, DefaultConfig())
	var h sink.Handler = s
	if batching {
		b, err := batch.New(s, batchtest.EngineConfig(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		batchtest.Run(t, b)
		h = b
	}
	subject := sinktest.Subject{
		Handler: h,
		Read: func(ctx context.Context, t *testing.T) []consume.Envelope {
			return sinktest.SQSEnvelopes(ctx, t, reader, url)
		},
		Requests: wire.Requests,
		// A body over SQS's 1 MiB: the batched sink refuses it at Encode,
		// the unbatched one has it refused by SQS (InvalidParameterValue).
		Refusable: func(m sink.Message) sink.Message {
			m.Data = bytes.Repeat([]byte("x"), MaxMessageBytes)
			return m
		},
	}
	if !fifo {
		subject.Lacks = map[sinktest.Check]string{sinktest.Order: "a standard queue keeps no order (its consumer applies consume.Filter with Unordered)"}
	}
	return subject
}
