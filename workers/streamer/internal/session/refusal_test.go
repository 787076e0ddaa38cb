package session

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// deadlineSink records the deadline of every Handle call and, once block is
// set, holds each call until its context ends.
type deadlineSink struct {
	mu        sync.Mutex
	block     bool
	calls     int
	noDL      int // calls without a deadline
	tooLong   int // calls whose deadline is beyond SinkTimeout from their start
	deadlines []time.Time
}

func (d *deadlineSink) Handle(ctx context.Context, _ sink.Message) error {
	start := time.Now()
	dl, ok := ctx.Deadline()
	d.mu.Lock()
	d.calls++
	if !ok {
		d.noDL++
	} else {
		if dl.Sub(start) > testConfig().SinkTimeout {
			d.tooLong++
		}
		d.deadlines = append(d.deadlines, dl)
	}
	block := d.block
	d.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// Finding 2, the unbatched path: every sink call has a deadline within the
// sink timeout, and during an outage that makes trust lapse, no call's
// deadline is after the worker's trust deadline.
func TestUnbatchedSinkCallsEndByTheTrustDeadline(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 200})
	h := newHarness(t, testConfig())
	d := &deadlineSink{}
	h.env.Handler = d
	h.put("s1", f.URL("s1"), nil)
	_, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "messages delivered", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.calls >= 10
	})
	d.mu.Lock()
	d.block = true // the destination stops answering
	d.mu.Unlock()
	h.down.Store(true) // and heartbeats fail: trust lapses
	if err := wait(t, done, 5*time.Second); !errors.Is(err, lease.ErrUntrusted) {
		t.Fatalf("ended with %v, want ErrUntrusted", err)
	}
	until := h.keeper.TrustedUntil()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.noDL > 0 || d.tooLong > 0 {
		t.Fatalf("%d calls without a deadline, %d beyond the sink timeout", d.noDL, d.tooLong)
	}
	for _, dl := range d.deadlines {
		if dl.After(until) {
			t.Fatalf("a sink call's deadline %v is after the trust deadline %v", dl, until)
		}
	}
}

// Finding 3, the unbatched path: a permanent refusal is not retried past
// SinkAttempts. Under on_sink_refusal fail the session ends with
// ErrSinkRefused and checkpoints only before the message; under skip the
// message is counted and the session goes on.
func TestPermanentSinkRefusal(t *testing.T) {
	refuse := func(m sink.Message) error {
		if m.Seq == 5 {
			return sink.Permanent(errors.New("AccessDenied"))
		}
		return nil
	}
	t.Run("fail", func(t *testing.T) {
		f := newFeed(t, feed.Config{Rate: 200})
		h := newHarness(t, testConfig())
		h.rec.fail = refuse
		h.put("s1", f.URL("s1"), nil)
		s, done := h.start("s1")
		if err := wait(t, done, 5*time.Second); !errors.Is(err, ErrSinkRefused) {
			t.Fatalf("ended with %v, want ErrSinkRefused", err)
		}
		if got := s.Held().LastSeq(); got != 4 {
			t.Fatalf("checkpointable seq %d, want 4 (before the refused 5)", got)
		}
		if n := h.env.Counters.SinkErrors.Load(); n != int64(testConfig().SinkAttempts)-1 {
			t.Fatalf("%d retries counted, want SinkAttempts-1", n)
		}
		if h.env.Counters.SinkRefused.Load() != 1 || h.env.Counters.Reconnects.Load() != 0 {
			t.Fatalf("refused %d, reconnects %d", h.env.Counters.SinkRefused.Load(), h.env.Counters.Reconnects.Load())
		}
	})
	t.Run("skip", func(t *testing.T) {
		f := newFeed(t, feed.Config{Rate: 200})
		h := newHarness(t, testConfig())
		h.rec.fail = refuse
		h.put("s1", f.URL("s1"), func(it *lease.Item) {
			spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.OnSinkRefusal = source.RefusalSkip })
		})
		s, _ := h.start("s1")
		testwait.Eventually(t, 5*time.Second, "delivery past the skipped seq", func() bool { return s.Held().LastSeq() >= 10 })
		if h.env.Counters.SinkSkipped.Load() != 1 || h.env.Counters.Reconnects.Load() != 0 {
			t.Fatalf("skipped %d, reconnects %d", h.env.Counters.SinkSkipped.Load(), h.env.Counters.Reconnects.Load())
		}
		for _, seq := range h.rec.seqs() {
			if seq == 5 {
				t.Fatal("seq 5 delivered")
			}
		}
	})
}

// Issue 35 finding 1, the unbatched path: a final refusal (the destination
// applied the message altered: an SQS checksum mismatch) is not sent again,
// whatever SinkAttempts: the session's on_sink_refusal applies at once.
func TestFinalSinkRefusalIsNotSentAgain(t *testing.T) {
	if testConfig().SinkAttempts < 2 {
		t.Fatal("the test needs SinkAttempts ≥ 2")
	}
	f := newFeed(t, feed.Config{Rate: 200})
	h := newHarness(t, testConfig())
	var calls5 atomic.Int64
	h.rec.fail = func(m sink.Message) error {
		if m.Seq == 5 {
			calls5.Add(1)
			return sink.Final(errors.New("applied with another body's MD5"))
		}
		return nil
	}
	h.put("s1", f.URL("s1"), func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.OnSinkRefusal = source.RefusalSkip })
	})
	s, _ := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "delivery past the refused seq", func() bool { return s.Held().LastSeq() >= 10 })
	if n := calls5.Load(); n != 1 {
		t.Fatalf("seq 5 sent %d times, want once", n)
	}
	if h.env.Counters.SinkSkipped.Load() != 1 || h.env.Counters.SinkErrors.Load() != 0 {
		t.Fatalf("skipped %d, sink errors %d", h.env.Counters.SinkSkipped.Load(), h.env.Counters.SinkErrors.Load())
	}
}
