package kinesissink

import (
	"bytes"
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/sinktest"
)

// The sink conformance suite over the kinesis sink on kinesalite, built as
// registry.Open builds it (always batched through sink/batch; with
// batchtest.EngineConfig's request timeout), with its default configuration
// (aggregated records over hash buckets) on a stream of two shards, read
// back shard by shard.
func TestConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sinktest.Subject {
		ctx, reader, stream := activeStream(t, "conformance", 2)
		ac, err := awsconfig.Load(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		var wire sinktest.Wire
		ac.HTTPClient = wire.Client(ac.HTTPClient)
		b, err := batch.New(NewConfig(kinesis.NewFromConfig(ac), stream, DefaultConfig()), batchtest.EngineConfig(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		batchtest.Run(t, b)
		return sinktest.Subject{
			Handler: b,
			Read: func(ctx context.Context, t *testing.T) []consume.Envelope {
				return sinktest.KinesisEnvelopes(ctx, t, reader, stream)
			},
			Requests: wire.Requests,
			// A record over the sink's 1 MiB (kinesalite's too): refused
			// at Encode.
			Refusable: func(m sink.Message) sink.Message {
				m.Data = bytes.Repeat([]byte("x"), MaxRecordBytes)
				return m
			},
		}
	})
}
