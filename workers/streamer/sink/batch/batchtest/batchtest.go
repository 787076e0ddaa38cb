// Package batchtest holds what the tests of batch senders share: a batcher
// run for the length of a test, its configuration on a local engine,
// records encoded by a sender, and a tenure that ignores acknowledgments. Tests only; no shipped binary imports it.
package batchtest

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// Start runs a batcher on snd until the test ends.
func Start(t testing.TB, snd batch.Sender, cfg batch.Config) *batch.Batcher {
	t.Helper()
	b, err := batch.New(snd, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	Run(t, b)
	return b
}

// Run runs b (its dispatcher) until the test ends.
func Run(t testing.TB, b *batch.Batcher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// EngineConfig is the batcher's default configuration with a request
// timeout long enough for a loaded local engine: a request the engine
// applies after the client gave up on it is sent again (the documented
// duplicate of a timed-out request), and the tests on engines count
// records exactly. On a 2-core machine at load 10, kinesalite took over 1 s
// (the default) for a PutRecords of 500: 1,700 records of a session's 1,200
// landed.
func EngineConfig() batch.Config {
	c := batch.DefaultConfig()
	c.RequestTimeout = 30 * time.Second
	return c
}

// Encode is snd's records of messages seqs of session id at epoch, each
// with a small JSON payload.
func Encode(t testing.TB, snd batch.Sender, id string, epoch int64, seqs ...int64) []batch.Record {
	t.Helper()
	var recs []batch.Record
	for _, seq := range seqs {
		r, err := snd.Encode(sink.Message{ConnectionID: id, Seq: seq, LeaseEpoch: epoch, Data: []byte(`{"k":"v"}`)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// Ignore is a tenure that is always valid, ignores acknowledgments and
// skips refused messages.
type Ignore struct{}

// Remaining is an hour.
func (Ignore) Remaining() time.Duration { return time.Hour }

// Refused skips.
func (Ignore) Refused(int64, int64, error) bool { return true }

// Acked does nothing.
func (Ignore) Acked(int64) {}

// Stalled does nothing.
func (Ignore) Stalled() {}
