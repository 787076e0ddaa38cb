package sinktest

// One tenure of one session, driving the sink the way a session does
// (internal/session's offer): Submit to a pipeline, Handle to any other
// handler under a context that ends at the trust deadline.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// WorkerID is the worker every message of the suite names.
const WorkerID = "w-sinktest"

// tenure is a sink.Tenure whose trust deadline the test sets, recording what
// the sink acknowledged and refused.
type tenure struct {
	h     sink.Handler
	id    string
	epoch int64
	skip  bool // Refused's answer (on_sink_refusal skip)

	mu       sync.Mutex
	deadline time.Time
	acked    int64 // the last seq acknowledged (0: none)
	backward error // an acknowledgment that went backwards
	refused  []int64
}

func newTenure(h sink.Handler, id string, epoch int64) *tenure {
	return &tenure{h: h, id: id, epoch: epoch, deadline: time.Now().Add(Within)}
}

// Remaining is the time left to the deadline (sink.Tenure).
func (tn *tenure) Remaining() time.Duration {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return time.Until(tn.deadline)
}

// Acked records seq; an acknowledgment must never go backwards
// (sink.Tenure).
func (tn *tenure) Acked(seq int64) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if seq < tn.acked && tn.backward == nil {
		tn.backward = fmt.Errorf("%s: acknowledged seq %d after %d", tn.id, seq, tn.acked)
	}
	tn.acked = max(tn.acked, seq)
}

// Refused records seq and answers skip (sink.Tenure).
func (tn *tenure) Refused(seq, _ int64, _ error) bool {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.refused = append(tn.refused, seq)
	return tn.skip
}

// Stalled does nothing (sink.Tenure).
func (tn *tenure) Stalled() {}

// end ends the tenure's trust now and returns that moment.
func (tn *tenure) end() time.Time {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	tn.deadline = time.Now()
	return tn.deadline
}

func (tn *tenure) lastAcked() int64 {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.acked
}

func (tn *tenure) refusedSeqs() []int64 {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return append([]int64(nil), tn.refused...)
}

func (tn *tenure) trustDeadline() time.Time {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	return tn.deadline
}

// message is the tenure's message seq with a small JSON payload naming it.
func (tn *tenure) message(seq int64) sink.Message {
	return sink.Message{
		ConnectionID: tn.id, Seq: seq, LeaseEpoch: tn.epoch, WorkerID: WorkerID, ReceivedAtMs: time.Now().UnixMilli(),
		Data: []byte(`{"seq":` + strconv.FormatInt(seq, 10) + `}`),
	}
}

// offer gives m to the sink as a session does, once (no retries): a
// pipeline's permanent refusal at Submit, and a handler's, go to Refused
// (the session's policy); a handler's nil is its acknowledgment.
func (tn *tenure) offer(ctx context.Context, m sink.Message) error {
	if p, ok := tn.h.(sink.Pipeline); ok {
		err := p.Submit(ctx, m, tn, nil)
		if sink.IsPermanent(err) {
			tn.Refused(m.Seq, m.Sub, err)
		}
		return err
	}
	hctx := ctx
	if _, free := tn.h.(sink.ContextFree); !free {
		var cancel context.CancelFunc
		hctx, cancel = context.WithDeadline(ctx, tn.trustDeadline())
		defer cancel()
	}
	err := tn.h.Handle(hctx, m)
	switch {
	case err == nil:
		tn.Acked(m.Seq)
	case sink.IsPermanent(err):
		tn.Refused(m.Seq, m.Sub, err)
	}
	return err
}

// deliver offers seqs from..to in order, failing t on any error.
func (tn *tenure) deliver(ctx context.Context, t *testing.T, from, to int64) {
	t.Helper()
	for seq := from; seq <= to; seq++ {
		if err := tn.offer(ctx, tn.message(seq)); err != nil {
			t.Fatalf("%s seq %d: %v", tn.id, seq, err)
		}
	}
}

// flush waits until the sink settled everything the tenure gave it, and
// fails t if an acknowledgment went backwards.
func (tn *tenure) flush(ctx context.Context, t *testing.T) {
	t.Helper()
	if err := sink.FlushSession(ctx, tn.h, tn.id); err != nil {
		t.Fatalf("flush %s: %v", tn.id, err)
	}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if tn.backward != nil {
		t.Fatal(tn.backward)
	}
}

// waitAcked waits until the sink acknowledged seq (a pipeline acknowledges
// in the background).
func (tn *tenure) waitAcked(t *testing.T, seq int64) {
	t.Helper()
	testwait.Eventually(t, Within, fmt.Sprintf("%s acknowledged up to seq %d", tn.id, seq), func() bool { return tn.lastAcked() >= seq })
}

// ended reports whether err says the tenure may deliver nothing more: a
// pipeline's sink.ErrTenureEnded, a handler's context deadline.
func ended(err error) bool {
	return errors.Is(err, sink.ErrTenureEnded) || errors.Is(err, context.DeadlineExceeded)
}
