// Package sinktest owns the sink conformance suite: one set of tests that
// every sink the worker can deliver to must pass (stdout, sqs, kinesis, a
// Go handler), run over the sink as the worker holds it and over the real
// destination (fauxqs, kinesalite, the handler's own store), so that a sink
// added later is held to the same contract (docs/guides/sink.md). Each
// sink's package runs it with a Factory:
//
//	func TestConformance(t *testing.T) { sinktest.Run(t, func(t *testing.T) sinktest.Subject { … }) }
//
// It checks, per subject: ordering per session (a session's records reach
// the destination in seq order), the acknowledged prefix (what the sink
// acknowledges is a prefix of what was delivered, and the destination holds
// it when it is acknowledged), refusals (a record the destination refuses is
// reported as refused, never acknowledged), the trust deadline (no request
// is written after the deadline the caller gives, every request's deadline
// ends by it, and a call past it ends with the typed error), and the epoch
// on every record (each record read back carries its tenure's lease_epoch).
// A property a sink cannot show is declared in Subject.Lacks with the
// reason, which the test reports as its skip: never skipped silently.
//
// Tests only; no shipped binary imports it.
package sinktest

import (
	"context"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// Check names a property of the suite a subject may be unable to show
// (Subject.Lacks).
type Check string

// The checks a subject may lack.
const (
	// Order: the destination keeps each session's records in the order
	// they were written (an SQS standard queue does not).
	Order Check = "order"
	// ReadBack: what the destination took can be read back (every check
	// but the trust deadline's request log needs it).
	ReadBack Check = "read-back"
	// Refusal: the destination, or the sink for it, can be made to refuse
	// a record for good (Subject.Refusable).
	Refusal Check = "refusal"
	// Trust: the sink takes the trust deadline (a sink.ContextFree sink
	// does not: the session checks the deadline right before each call).
	Trust Check = "trust"
)

// Subject is one sink under the suite, on a destination of its own.
type Subject struct {
	// Handler is the sink as the worker holds it (registry.Open's result,
	// or a user's handler): a sink.Pipeline (a *batch.Batcher, running
	// until the test ends) is given messages with Submit and acknowledges
	// them through the tenure; any other sink.Handler with Handle, whose
	// nil is its acknowledgment.
	Handler sink.Handler
	// Read returns the envelopes the destination took, each session's in
	// the destination's order: all of them, or (a queue, which the read
	// consumes) those taken since the previous Read. It reads with a
	// client of its own, not the sink's (Requests). Nil: Lacks[ReadBack].
	Read func(ctx context.Context, t *testing.T) []consume.Envelope
	// Refusable returns m changed into a message the sink or its
	// destination refuses for good (an oversized record; a payload a
	// handler refuses). Nil: Lacks[Refusal].
	Refusable func(m sink.Message) sink.Message
	// Requests are the requests the sink wrote to its destination so far,
	// in the order written (Wire). Nil: Lacks[Trust].
	Requests func() []Request
	// Lacks are the checks this subject cannot show, each with the reason
	// the skipped test reports.
	Lacks map[Check]string
}

// Factory builds a subject on a fresh destination (a new queue, stream or
// store) for one test; whatever it starts ends with t (t.Cleanup).
type Factory func(t *testing.T) Subject

// Within bounds each test of the suite (engines on a loaded machine
// included).
const Within = 2 * time.Minute

// Run runs the suite over the subjects f builds.
func Run(t *testing.T, f Factory) {
	t.Run("OrderPerSession", func(t *testing.T) { orderPerSession(t, f) })
	t.Run("AcknowledgedPrefix", func(t *testing.T) { acknowledgedPrefix(t, f) })
	t.Run("RefusalEndsTheTenure", func(t *testing.T) { refusal(t, f, false) })
	t.Run("RefusalSkipped", func(t *testing.T) { refusal(t, f, true) })
	t.Run("RequestsEndByTheTrustDeadline", func(t *testing.T) { requestsEndByTheDeadline(t, f) })
	t.Run("NothingSentPastTheTrustDeadline", func(t *testing.T) { nothingPastTheDeadline(t, f) })
	t.Run("EpochOnEveryRecord", func(t *testing.T) { epochOnEveryRecord(t, f) })
}

// subject builds f's subject for t, skipping t (with the subject's reason)
// when it lacks one of needs.
func subject(t *testing.T, f Factory, needs ...Check) (context.Context, Subject) {
	t.Helper()
	s := f(t)
	lacks := s.Lacks
	if lacks == nil {
		lacks = map[Check]string{}
	}
	if s.Read == nil && lacks[ReadBack] == "" {
		t.Fatal("the subject has no Read and gives no reason in Lacks[ReadBack]")
	}
	if s.Refusable == nil && lacks[Refusal] == "" {
		t.Fatal("the subject has no Refusable and gives no reason in Lacks[Refusal]")
	}
	if s.Requests == nil && lacks[Trust] == "" {
		t.Fatal("the subject has no Requests and gives no reason in Lacks[Trust]")
	}
	for _, c := range needs {
		if why, ok := lacks[c]; ok {
			t.Skipf("this sink lacks %s: %s", c, why)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), Within)
	t.Cleanup(cancel)
	return ctx, s
}
