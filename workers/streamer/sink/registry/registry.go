// Package registry is the one place the worker's sinks register: each kind
// (the WSFLEET_SINK value) with the setting it requires, the request
// limits of its batched form, and its constructor. The binary's
// configuration (envconfig) validates a sink's settings with it and
// cmd/streamer builds the sink with Open; the library (package streamer)
// is given the built handler (Deps.Handler) and imports no sink of its own.
package registry

import (
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/kinesissink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/sqssink"
)

// The sink kinds (WSFLEET_SINK).
const (
	Stdout  = "stdout"
	SQS     = "sqs"
	Kinesis = "kinesis"
	Discard = "discard"
)

// Config is a sink's settings.
type Config struct {
	Kind           string // one of Kinds
	OutputQueueURL string // the sqs sink's queue
	OutputStream   string // the kinesis sink's stream (name or ARN)
	// Batching sends the sqs sink's messages in SendMessageBatch requests
	// through sink/batch (kinesis is always batched); false: one
	// SendMessage per message, the session waiting for each.
	Batching bool
	// Kinesis are the kinesis sink's own settings (its aggregated records
	// and hash buckets).
	Kinesis kinesissink.Config
	// Batch bounds the batches of a batched sink (Limits). Its
	// RequestTimeout and BufferBudget are derived by the caller (the
	// worker's sink request timeout; its memory budget).
	Batch batch.Config
	// SQS are the sqs sink's own settings (its packs: PackBytes applies
	// to the batched sink).
	SQS sqssink.Config
}

// DefaultConfig is the stdout sink, batching on (for sqs), the batch
// defaults with the two derived settings left at 0, the sqs sink's
// defaults (packing on), the kinesis sink's defaults (aggregation on, over
// kinesissink.DefaultHashBuckets).
func DefaultConfig() Config {
	b := batch.DefaultConfig()
	b.RequestTimeout, b.BufferBudget = 0, 0
	return Config{Kind: Stdout, Batching: true, Batch: b, SQS: sqssink.DefaultConfig(), Kinesis: kinesissink.DefaultConfig()}
}

// Env is what a sink is built with.
type Env struct {
	Stdout io.Writer                  // the stdout sink's output
	AWS    func() (aws.Config, error) // the AWS configuration (loaded once by the caller); nil: none
	Log    zerolog.Logger             // a batched sink's log
}

func (e Env) aws() (aws.Config, error) {
	if e.AWS == nil {
		return aws.Config{}, fmt.Errorf("no AWS configuration")
	}
	return e.AWS()
}

// kind is one registered sink.
type kind struct {
	name string
	// requires is the variable the kind needs and its value in c (nil:
	// none).
	requires func(c Config) (variable, value string)
	// problems are the kind's own settings' problems in c (nil: none).
	problems func(c Config) []error
	// limits are the request limits of the kind's batched sender; false:
	// c's sink of this kind is not batched.
	limits func(c Config) (batch.Limits, bool)
	// open builds the sink: the handler of an unbatched one, or the
	// sender a batched one sends through (Open puts sink/batch in front).
	open func(c Config, e Env) (sink.Handler, batch.Sender, error)
}

// kinds is the registry, in the order the messages list them.
var kinds = []kind{
	{
		name: Stdout,
		open: func(_ Config, e Env) (sink.Handler, batch.Sender, error) { return sink.NewWriter(e.Stdout), nil, nil },
	},
	{
		name:     SQS,
		requires: func(c Config) (string, string) { return schema.EnvOutputQueueURL, c.OutputQueueURL },
		problems: func(c Config) []error {
			if err := c.SQS.Validate(); err != nil {
				return []error{fmt.Errorf("%s=%s (%s): %w", schema.EnvSink, c.Kind, schema.EnvSinkSQSPackBytes, err)}
			}
			return nil
		},
		limits: func(c Config) (batch.Limits, bool) {
			if !c.Batching {
				return batch.Limits{}, false
			}
			return sqssink.New(nil, "").Limits(), true
		},
		open: func(c Config, e Env) (sink.Handler, batch.Sender, error) {
			ac, err := e.aws()
			if err != nil {
				return nil, nil, err
			}
			s := sqssink.NewConfig(sqs.NewFromConfig(ac), c.OutputQueueURL, c.SQS)
			if !c.Batching {
				return s, nil, nil
			}
			return nil, s, nil
		},
	},
	{
		name:     Kinesis,
		requires: func(c Config) (string, string) { return schema.EnvOutputStream, c.OutputStream },
		problems: func(c Config) []error {
			var errs []error
			for _, p := range []struct {
				env string
				err error
			}{
				{schema.EnvSinkKinesisAggregateBytes, kinesissink.ValidateAggregateBytes(c.Kinesis.AggregateBytes)},
				{schema.EnvSinkKinesisHashBuckets, kinesissink.ValidateHashBuckets(c.Kinesis.HashBuckets)},
			} {
				if p.err != nil {
					errs = append(errs, fmt.Errorf("%s=%s (%s): %w", schema.EnvSink, c.Kind, p.env, p.err))
				}
			}
			return errs
		},
		limits: func(Config) (batch.Limits, bool) { return kinesissink.New(nil, "").Limits(), true },
		open: func(c Config, e Env) (sink.Handler, batch.Sender, error) {
			ac, err := e.aws()
			if err != nil {
				return nil, nil, err
			}
			return nil, kinesissink.NewConfig(kinesis.NewFromConfig(ac), c.OutputStream, c.Kinesis), nil
		},
	},
	{
		name: Discard,
		open: func(Config, Env) (sink.Handler, batch.Sender, error) { return sink.Discard, nil, nil },
	},
}

func lookup(name string) (kind, bool) {
	for _, k := range kinds {
		if k.name == name {
			return k, true
		}
	}
	return kind{}, false
}

// Kinds are the registered kinds' names.
func Kinds() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return names
}

// Limits are the request limits of c's sink when it is batched; false: it
// is not (or the kind is unknown).
func (c Config) Limits() (batch.Limits, bool) {
	k, ok := lookup(c.Kind)
	if !ok || k.limits == nil {
		return batch.Limits{}, false
	}
	return k.limits(c)
}

// Problems are every problem of c's settings, one error each, named by
// their environment variables: an unknown kind, a required setting
// missing, the kind's own settings (the sqs sink's packs), batch bounds
// the kind's limits do not allow (c.Batch with its derived settings
// filled).
func (c Config) Problems() []error {
	k, ok := lookup(c.Kind)
	if !ok {
		names := Kinds()
		return []error{fmt.Errorf("%s=%q: want %s or %s", schema.EnvSink, c.Kind, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])}
	}
	var errs []error
	if k.requires != nil {
		if variable, value := k.requires(c); value == "" {
			errs = append(errs, fmt.Errorf("%s=%s needs %s", schema.EnvSink, c.Kind, variable))
		}
	}
	if k.problems != nil {
		errs = append(errs, k.problems(c)...)
	}
	if l, ok := c.Limits(); ok {
		if err := c.Batch.Validate(l); err != nil {
			errs = append(errs, fmt.Errorf("%s=%s (%s, %s, %s, %s, %s, %s): %w", schema.EnvSink, c.Kind, schema.EnvSinkMaxBatch,
				schema.EnvSinkMaxBatchBytes, schema.EnvSinkMaxDelay, schema.EnvSinkPackWait, schema.EnvSinkInFlight, schema.EnvSinkBufferBytes, err))
		}
	}
	return errs
}

// Open builds c's sink: the handler the sessions deliver to. A batched
// sink is a *batch.Batcher on the kind's sender, with c.Batch; the Worker
// runs it (streamer.Deps.Handler).
func Open(c Config, e Env) (sink.Handler, error) {
	k, ok := lookup(c.Kind)
	if !ok {
		return nil, fmt.Errorf("sink %q unknown", c.Kind)
	}
	h, snd, err := k.open(c, e)
	if err != nil || snd == nil {
		return h, err
	}
	b, err := batch.New(snd, c.Batch, e.Log.With().Str("sink", c.Kind).Logger())
	if err != nil {
		return nil, fmt.Errorf("sink %s: %w", c.Kind, err)
	}
	return b, nil
}
