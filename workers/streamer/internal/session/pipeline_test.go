package session

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// pipeline is a sink.Pipeline under the test's control: it queues what the
// session submits (at most limit unacknowledged, then Submit blocks), and
// acknowledges only when the test says so; refuse, when set, answers every
// later Submit.
type pipeline struct {
	limit int

	mu      sync.Mutex
	pending []int64 // submitted, not acknowledged
	tenure  sink.Tenure
	space   chan struct{}
	refuse  error
	handled int // Handle calls (none expected: the session must Submit)
}

func (p *pipeline) Handle(context.Context, sink.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.handled++
	return nil
}

func (p *pipeline) Submit(ctx context.Context, m sink.Message, t sink.Tenure, stop <-chan struct{}) error {
	stalled := false
	p.mu.Lock()
	for p.refuse == nil && len(p.pending) >= p.limit {
		if !stalled {
			stalled = true
			t.Stalled()
		}
		if p.space == nil {
			p.space = make(chan struct{})
		}
		space := p.space
		p.mu.Unlock()
		select {
		case <-space:
		case <-stop:
			return errors.New("stopped while stalled")
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	if p.refuse != nil {
		return p.refuse
	}
	p.pending, p.tenure = append(p.pending, m.Seq), t
	return nil
}

func (p *pipeline) FlushSession(context.Context, string) error { return nil }

// ack acknowledges the n oldest pending messages.
func (p *pipeline) ack(n int) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	last := p.pending[n-1]
	p.pending = p.pending[n:]
	p.tenure.Acked(last)
	if p.space != nil {
		close(p.space)
		p.space = nil
	}
	return last
}

func (p *pipeline) submitted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

// With a pipelined sink the session checkpoints only what the sink
// acknowledged; a full buffer stalls its reads (counted), and a stalled
// session still ends when asked to.
func TestPipelinedSinkCheckpointsOnlyAcknowledgedAndStalls(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 500})
	h := newHarness(t, testConfig())
	p := &pipeline{limit: 30}
	h.env.Handler = p
	h.put("s1", f.URL("s1"), nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "the buffer full", func() bool { return p.submitted() == 30 })
	if got := s.Held().LastSeq(); got != lease.NoSeq {
		t.Fatalf("checkpointable seq %d before any acknowledgment", got)
	}
	last := p.ack(10)
	testwait.Eventually(t, 5*time.Second, "the acknowledged seq checkpointable", func() bool { return s.Held().LastSeq() == last })
	testwait.Eventually(t, 5*time.Second, "a stall counted", func() bool { return h.env.Counters.SinkStalls.Load() >= 1 })
	if got := s.Held().LastSeq(); got != last {
		t.Fatalf("checkpointable seq %d, acknowledged %d", got, last)
	}
	s.Interrupt(ErrShutdown) // while Submit waits for room
	if err := wait(t, done, 5*time.Second); !errors.Is(err, ErrShutdown) {
		t.Fatalf("ended with %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.handled != 0 {
		t.Fatalf("%d Handle calls: a pipeline is given Submit", p.handled)
	}
}

// A pipeline that dropped the tenure's messages ends the session.
func TestPipelineRefusingTheTenureEndsTheSession(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 200})
	h := newHarness(t, testConfig())
	p := &pipeline{limit: 1000}
	h.env.Handler = p
	h.put("s1", f.URL("s1"), nil)
	_, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "messages submitted", func() bool { return p.submitted() >= 5 })
	p.mu.Lock()
	p.refuse = sink.ErrTenureEnded
	p.mu.Unlock()
	if err := wait(t, done, 5*time.Second); !errors.Is(err, lease.ErrUntrusted) {
		t.Fatalf("ended with %v, want ErrUntrusted", err)
	}
}
