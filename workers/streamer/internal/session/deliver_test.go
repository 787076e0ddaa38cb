package session

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// deadlineProbe records whether each Handle's context had a deadline.
type deadlineProbe struct {
	with, without atomic.Int64
}

func (p *deadlineProbe) Handle(ctx context.Context, _ sink.Message) error {
	if _, ok := ctx.Deadline(); ok {
		p.with.Add(1)
	} else {
		p.without.Add(1)
	}
	return nil
}

// contextFree is a deadlineProbe that says it ignores its context.
type contextFree struct{ *deadlineProbe }

func (contextFree) IgnoresContext() {}

// A synchronous sink is called with a context bounded by the tenure and
// SinkTimeout, unless it is sink.ContextFree (a local write), which is
// called without one (no timer per message).
func TestSinkDeadlineUnlessContextFree(t *testing.T) {
	for _, tc := range []struct {
		name        string
		handler     func(*deadlineProbe) sink.Handler
		wantBounded bool
	}{
		{"a sink that heeds its context", func(p *deadlineProbe) sink.Handler { return p }, true},
		{"a context-free sink", func(p *deadlineProbe) sink.Handler { return contextFree{p} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := silentAfterOne(t)
			h := newHarness(t, testConfig())
			p := &deadlineProbe{}
			h.env.Handler = tc.handler(p)
			h.put("s1", url, nil)
			s, done := h.start("s1")
			testwait.Eventually(t, 5*time.Second, "seq 1 delivered", func() bool { return p.with.Load()+p.without.Load() >= 1 })
			s.Interrupt(ErrStopRequested)
			_ = wait(t, done, 5*time.Second)
			if got := p.with.Load() > 0 && p.without.Load() == 0; got != tc.wantBounded {
				t.Fatalf("calls with a deadline %d, without %d; want bounded=%v", p.with.Load(), p.without.Load(), tc.wantBounded)
			}
		})
	}
}

// readAll reads a message of any size into a pooled buffer, growing it
// past its initial capacity, and keeps what was already in it.
func TestReadAllGrowsThePooledBuffer(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, 640, 5000, 70000} {
		want := bytes.Repeat([]byte{'x'}, n)
		bp := bufPool.Get().(*[]byte)
		got, more, err := readAll(iotest.HalfReader(bytes.NewReader(want)), (*bp)[:0], -1)
		if err != nil || more || !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: read %d (err %v)", n, len(got), err)
		}
	}
}
