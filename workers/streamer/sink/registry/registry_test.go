package registry

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/sqssink"
)

func TestKinds(t *testing.T) {
	if got := Kinds(); !slices.Equal(got, []string{Stdout, SQS, Kinesis, Discard}) {
		t.Fatalf("kinds %q", got)
	}
}

// resolved is c with the batch settings a caller derives filled.
func resolved(c Config) Config {
	c.Batch.RequestTimeout, c.Batch.BufferBudget = 1e9, 256<<20
	return c
}

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Config)
		want []string // none: valid
	}{
		{func(c *Config) {}, nil},
		{func(c *Config) { c.Kind = Discard }, nil},
		{func(c *Config) { c.Kind = "firehose" }, []string{`WSFLEET_SINK="firehose": want stdout, sqs, kinesis or discard`}},
		{func(c *Config) { c.Kind = SQS }, []string{"WSFLEET_SINK=sqs needs WSFLEET_OUTPUT_QUEUE_URL"}},
		{func(c *Config) { c.Kind = Kinesis }, []string{"WSFLEET_SINK=kinesis needs WSFLEET_OUTPUT_STREAM"}},
		{func(c *Config) { c.Kind, c.OutputQueueURL, c.Batch.MaxCount = SQS, "q", 11 }, []string{
			"WSFLEET_SINK=sqs (WSFLEET_SINK_MAX_BATCH, WSFLEET_SINK_MAX_BATCH_BYTES, WSFLEET_SINK_MAX_DELAY, WSFLEET_SINK_PACK_WAIT, WSFLEET_SINK_IN_FLIGHT, WSFLEET_SINK_BUFFER_BYTES): batch max count 11"}},
		{func(c *Config) { c.Kind, c.OutputQueueURL, c.Batch.MaxCount, c.Batching = SQS, "q", 11, false }, nil}, // unbatched: no batch bounds
		{func(c *Config) { c.Kind, c.OutputQueueURL, c.SQS.PackBytes = SQS, "q", 0 }, nil},                      // packing off
		{func(c *Config) { c.Kind, c.OutputQueueURL, c.SQS.PackBytes = SQS, "q", sqssink.MaxPackBytes }, nil},
		{func(c *Config) { c.Kind, c.SQS.PackBytes, c.Batch.MaxCount = SQS, sqssink.MaxPackBytes+1, 11 }, []string{ // every problem at once
			"WSFLEET_SINK=sqs needs WSFLEET_OUTPUT_QUEUE_URL",
			"WSFLEET_SINK=sqs (WSFLEET_SINK_SQS_PACK_BYTES): sqs pack bytes 1048577: want 0 (off) up to SQS's message limit, 1048576",
			"WSFLEET_SINK=sqs (WSFLEET_SINK_MAX_BATCH, WSFLEET_SINK_MAX_BATCH_BYTES, WSFLEET_SINK_MAX_DELAY, WSFLEET_SINK_PACK_WAIT, WSFLEET_SINK_IN_FLIGHT, WSFLEET_SINK_BUFFER_BYTES): batch max count 11"}},
		{func(c *Config) { c.Kind, c.OutputQueueURL, c.SQS.PackBytes = SQS, "q", -1 }, []string{"WSFLEET_SINK=sqs (WSFLEET_SINK_SQS_PACK_BYTES): sqs pack bytes -1"}},
		{func(c *Config) { c.Kind, c.OutputStream, c.SQS.PackBytes = Kinesis, "s", -1 }, nil}, // another kind's setting
		{func(c *Config) { c.Kind, c.OutputStream, c.Batch.MaxCount = Kinesis, "s", 500 }, nil},
		{func(c *Config) { c.Kind, c.OutputStream, c.Kinesis.AggregateBytes = Kinesis, "s", 0 }, nil}, // aggregation off
		{func(c *Config) { c.Kind, c.OutputStream, c.Kinesis.HashBuckets = Kinesis, "s", 0 }, nil},    // per-session aggregation
		{func(c *Config) { c.Kind, c.OutputStream, c.Kinesis.HashBuckets = Kinesis, "s", 1024 }, nil},
		{func(c *Config) {
			c.Kind, c.Kinesis.AggregateBytes, c.Kinesis.HashBuckets, c.Batch.MaxCount = Kinesis, 2<<20, 1025, 501
		}, []string{
			"WSFLEET_SINK=kinesis needs WSFLEET_OUTPUT_STREAM",
			"WSFLEET_SINK=kinesis (WSFLEET_SINK_KINESIS_AGGREGATE_BYTES): kinesis aggregated record bound 2097152 bytes: want 0 (off) up to 1048576",
			"WSFLEET_SINK=kinesis (WSFLEET_SINK_KINESIS_HASH_BUCKETS): kinesis hash buckets 1025: want 0 (per-session aggregation) up to 1024",
			"WSFLEET_SINK=kinesis (WSFLEET_SINK_MAX_BATCH, WSFLEET_SINK_MAX_BATCH_BYTES, WSFLEET_SINK_MAX_DELAY, WSFLEET_SINK_PACK_WAIT, WSFLEET_SINK_IN_FLIGHT, WSFLEET_SINK_BUFFER_BYTES): batch max count 501"}},
		{func(c *Config) { c.Kind, c.OutputStream, c.Kinesis.HashBuckets = Kinesis, "s", -1 }, []string{
			"WSFLEET_SINK=kinesis (WSFLEET_SINK_KINESIS_HASH_BUCKETS): kinesis hash buckets -1"}},
		{func(c *Config) {
			c.Kind, c.OutputQueueURL, c.Kinesis.AggregateBytes, c.Kinesis.HashBuckets = SQS, "q", -1, -1
		}, nil}, // kinesis settings: not the sqs sink's
		{func(c *Config) { c.Kind, c.Batch.MaxCount = Stdout, 11 }, nil}, // stdout is never batched
	} {
		c := resolved(DefaultConfig())
		tc.mod(&c)
		var got []string
		for _, err := range c.Problems() {
			got = append(got, err.Error())
		}
		if len(got) != len(tc.want) {
			t.Errorf("%+v: problems %q, want %q", c, got, tc.want)
			continue
		}
		for i, w := range tc.want {
			if !strings.HasPrefix(got[i], w) {
				t.Errorf("%+v: problem %q, want it to start %q", c, got[i], w)
			}
		}
	}
}

func TestLimits(t *testing.T) {
	c := DefaultConfig()
	for kind, want := range map[string]int{Stdout: 0, Discard: 0, SQS: sqssink.MaxBatchEntries, Kinesis: 500, "x": 0} {
		c.Kind = kind
		l, ok := c.Limits()
		if ok != (want > 0) || l.MaxCount != want {
			t.Errorf("%s: limits %+v %v, want max count %d", kind, l, ok, want)
		}
	}
	c.Kind, c.Batching = SQS, false
	if _, ok := c.Limits(); ok {
		t.Error("an unbatched sqs sink has batch limits")
	}
}

func TestOpen(t *testing.T) {
	var out bytes.Buffer
	noAWS := Env{Stdout: &out, Log: zerolog.Nop()}
	withAWS := Env{Stdout: &out, Log: zerolog.Nop(), AWS: func() (aws.Config, error) { return aws.Config{Region: "us-east-1"}, nil }}
	open := func(e Env, mod func(*Config)) (sink.Handler, error) {
		c := resolved(DefaultConfig())
		mod(&c)
		return Open(c, e)
	}
	h, err := open(noAWS, func(c *Config) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Handle(context.Background(), sink.Message{ConnectionID: "c", Seq: 1, Data: []byte(`{}`)}); err != nil || !strings.Contains(out.String(), `"connection_id":"c"`) {
		t.Fatalf("stdout: %v %q", err, out.String())
	}
	if h, err := open(noAWS, func(c *Config) { c.Kind = Discard }); err != nil || h == nil {
		t.Fatalf("discard: %v", err)
	}
	if _, err := open(noAWS, func(c *Config) { c.Kind, c.OutputQueueURL = SQS, "q" }); err == nil {
		t.Fatal("sqs without AWS opened")
	}
	for _, tc := range []struct {
		mod     func(*Config)
		batched bool
	}{
		{func(c *Config) { c.Kind, c.OutputQueueURL = SQS, "q" }, true},
		{func(c *Config) { c.Kind, c.OutputQueueURL, c.Batching = SQS, "q", false }, false},
		{func(c *Config) { c.Kind, c.OutputStream = Kinesis, "s" }, true},
	} {
		h, err := open(withAWS, tc.mod)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := h.(*batch.Batcher); ok != tc.batched {
			t.Errorf("%T: batched %v, want %v", h, ok, tc.batched)
		}
	}
	if _, err := open(withAWS, func(c *Config) { c.Kind, c.OutputStream, c.Batch.MaxCount = Kinesis, "s", 501 }); err == nil || !strings.HasPrefix(err.Error(), "sink kinesis: batch max count 501") {
		t.Fatalf("bad batch bounds: %v", err)
	}
	if _, err := open(withAWS, func(c *Config) { c.Kind = "x" }); err == nil || err.Error() != `sink "x" unknown` {
		t.Fatalf("an unknown kind: %v", err)
	}
}

// The worker library is given its sink (Deps.Handler): it imports none of
// the concrete sinks, nor this registry or the binary's configuration.
func TestTheLibraryImportsNoConcreteSink(t *testing.T) {
	const lib = "github.com/wsfleet/wsfleet/workers/streamer"
	out, err := exec.Command("go", "list", "-deps", lib).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, lib+"/sink/batch") {
		t.Fatalf("go list -deps %s lists no sink/batch:\n%s", lib, out)
	}
	for _, p := range []string{"/sink/sqssink", "/sink/kinesissink", "/sink/registry", "/envconfig"} {
		if slices.Contains(deps, lib+p) {
			t.Errorf("the library imports %s", lib+p)
		}
	}
}
