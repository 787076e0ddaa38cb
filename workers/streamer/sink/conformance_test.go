package sink_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/wsfleet/wsfleet/testkit/syncbuf"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/sinktest"
)

// The sink conformance suite over the stdout sink, on the writer the
// registry gives it (registry.Env.Stdout), read back as the JSON lines it
// wrote.
func TestConformanceStdout(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sinktest.Subject {
		var out syncbuf.Buffer
		return sinktest.Subject{
			Handler: sink.NewWriter(&out),
			Read: func(_ context.Context, t *testing.T) []consume.Envelope {
				text := strings.TrimSuffix(out.String(), "\n")
				if text == "" {
					return nil
				}
				envs, err := consume.Lines([]byte(text))
				if err != nil {
					t.Fatal(err)
				}
				return envs
			},
			Lacks: map[sinktest.Check]string{
				sinktest.Refusal: "a local write has no refusal: a write error is transient (the session retries it, then reconnects to resume after the last accepted seq), never sink.Permanent",
				sinktest.Trust: "it is sink.ContextFree (one local write, which no context could interrupt): the session checks the trust deadline right before each call " +
					"(internal/session, offer), and the sink sends no request that could outlive it",
			},
		}
	})
}

// The sink conformance suite over a Go handler, as a library user writes
// one (streamer.Deps.Handler): it keeps what it takes in a store of its
// own, refuses a payload for good, and gives up once its context ended.
func TestConformanceGoHandler(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sinktest.Subject {
		s := &store{}
		return sinktest.Subject{
			Handler:  sink.HandlerFunc(s.handle),
			Read:     s.read,
			Requests: s.wire.Requests,
			Refusable: func(m sink.Message) sink.Message {
				m.Data = refusedPayload
				return m
			},
		}
	})
}

// refusedPayload is what store refuses for good.
var refusedPayload = []byte(`{"refuse":true}`)

// store is a Go handler's destination: it keeps the envelope of every
// message it takes, in order.
type store struct {
	wire  sinktest.Wire
	mu    sync.Mutex
	lines [][]byte
}

// handle takes m unless ctx ended (then it writes nothing); a refused
// payload is a permanent refusal.
func (s *store) handle(ctx context.Context, m sink.Message) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store %s seq %d: %w", m.ConnectionID, m.Seq, err)
	}
	deadline, _ := ctx.Deadline()
	s.wire.Record(deadline)
	if bytes.Equal(m.Data, refusedPayload) {
		return sink.Permanent(errors.New("store: payload refused"))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, sink.AppendJSON(nil, m))
	return nil
}

// read is every envelope the store holds.
func (s *store) read(_ context.Context, t *testing.T) []consume.Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	var envs []consume.Envelope
	for _, l := range s.lines {
		e, err := consume.Parse(l)
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, e)
	}
	return envs
}
