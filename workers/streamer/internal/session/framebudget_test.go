package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// gatedSink holds every delivery until open is closed (the sink is slow),
// counting the deliveries waiting for it.
type gatedSink struct {
	rec     *recorder
	open    chan struct{}
	waiting atomic.Int64
}

func (g *gatedSink) Handle(ctx context.Context, m sink.Message) error {
	g.waiting.Add(1)
	<-g.open
	return g.rec.Handle(ctx, m)
}

// bigMessage is a message of n bytes carrying seq.
func bigMessage(seq int64, n int) string {
	head := fmt.Sprintf(`{"seq":%d,"pad":"`, seq)
	return head + strings.Repeat("x", n-len(head)-2) + `"}`
}

// Issue 37: messages larger than the small-frame allowance read by many
// sessions at once hold at most the worker's large-frame budget: the
// sessions beyond it wait (counted) instead of each reserving the read
// limit, and every message is delivered once the sink takes them.
func TestLargeFramesShareTheWorkersBudget(t *testing.T) {
	const n, size = 12, 200 << 10
	cfg := testConfig()
	h := newHarness(t, cfg)
	gate := &gatedSink{rec: h.rec, open: make(chan struct{})}
	var opened sync.Once
	openGate := func() { opened.Do(func() { close(gate.open) }) }
	t.Cleanup(openGate) // runs before the harness's: its sessions end
	h.env.Handler = gate
	budget := 2 * cfg.ReadLimit
	h.env.Frames = NewFrameBudget(budget)
	_, url := newScripted(t, func(l *link) {
		if l.send(websocket.MessageText, bigMessage(1, size)) != nil {
			return
		}
		l.drain()
	})
	r := h.startMany(n, url)
	// Each session either holds its message at the sink or waits for the
	// budget: a session's grant is the rest of the read limit (the size of
	// a message is unknown until read), cut to what its buffer took once
	// read, so 2 MiB holds a few 200 KiB messages, not 12.
	testwait.Eventually(t, 10*time.Second, "every session at the sink or waiting for the budget", func() bool {
		q := h.env.Frames.queued()
		return q > 0 && gate.waiting.Load()+int64(q) == n
	})
	if h.env.Counters.LargeFrameWaits.Load() == 0 {
		t.Fatal("sessions waited for the budget, none counted")
	}
	if peak := h.env.Frames.Peak(); peak > budget || peak < size-schema.SmallFrameAllowance {
		t.Fatalf("the budget's peak %d bytes, want within %d..%d", peak, size-schema.SmallFrameAllowance, budget)
	}
	if held := gate.waiting.Load(); held >= n {
		t.Fatalf("%d of %d sessions hold a large message at once within a budget of %d bytes", held, n, budget)
	}
	openGate()
	testwait.Eventually(t, 10*time.Second, "every large message delivered", func() bool { return h.rec.count() == n })
	for _, m := range h.rec.msgs {
		if len(m.Data) != size || m.Seq != 1 {
			t.Fatalf("%s delivered %d bytes at seq %d, want %d at 1", m.ConnectionID, len(m.Data), m.Seq, size)
		}
	}
	testwait.Eventually(t, 5*time.Second, "the budget given back", func() bool { return h.env.Frames.Used() == 0 })
	if peak := h.env.Frames.Peak(); peak > budget {
		t.Fatalf("the budget's peak %d bytes, over the budget %d", peak, budget)
	}
	r.stop(t)
}

// A message above the read limit still closes the connection with 1009
// (the limit is one message's bound; the budget only paces them), and its
// grant is given back; the next connection delivers.
func TestMessageAboveReadLimitClosesWith1009(t *testing.T) {
	cfg := testConfig()
	cfg.ReadLimit = 64 << 10
	h := newHarness(t, cfg)
	h.env.Frames = NewFrameBudget(cfg.ReadLimit)
	var mu sync.Mutex
	codes := map[int]websocket.StatusCode{}
	_, url := newScripted(t, func(l *link) {
		msg := bigMessage(1, int(cfg.ReadLimit)+1)
		if l.n > 1 {
			msg = bigMessage(1, 40<<10) // above the allowance, within the limit
		}
		if l.send(websocket.MessageText, msg) != nil {
			return
		}
		_, _, err := l.c.Read(l.ctx)
		mu.Lock()
		codes[l.n] = websocket.CloseStatus(err)
		mu.Unlock()
	})
	h.put("big", url, nil)
	s, done := h.start("big")
	testwait.Eventually(t, 10*time.Second, "the message within the limit delivered", func() bool { return h.rec.count() == 1 })
	mu.Lock()
	code := codes[1]
	mu.Unlock()
	if code != websocket.StatusMessageTooBig {
		t.Fatalf("the connection sent %d bytes past the read limit closed with %d, want 1009", cfg.ReadLimit+1, code)
	}
	testwait.Eventually(t, 5*time.Second, "the budget given back", func() bool { return h.env.Frames.Used() == 0 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
}

// The budget serves waiters in order, never holds more than its limit,
// and a waiter that gives up (its deadline, its session's end) takes
// nothing.
func TestFrameBudgetWaitsInOrder(t *testing.T) {
	b := NewFrameBudget(100)
	if g, err := b.Acquire(context.Background(), 70, nil); err != nil || g != 70 {
		t.Fatalf("first grant %d, %v", g, err)
	}
	if _, ok := b.TryAcquire(40); ok {
		t.Fatal("40 more granted over a limit of 100")
	}
	got := make(chan int64, 2)
	go func() { g, _ := b.Acquire(context.Background(), 60, nil); got <- g }()
	testwait.Eventually(t, time.Second, "the first waiter queued", func() bool { return b.queued() == 1 })
	// A small request behind a waiting one waits too (in order).
	if _, ok := b.TryAcquire(10); ok {
		t.Fatal("a request jumped the queue")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if g, err := b.Acquire(ctx, 10, nil); !errors.Is(err, context.DeadlineExceeded) || g != 0 {
		t.Fatalf("a wait past its deadline: %d, %v", g, err)
	}
	done := make(chan struct{})
	close(done)
	if g, err := b.Acquire(context.Background(), 10, done); err == nil || g != 0 {
		t.Fatalf("a wait of an ended session: %d, %v", g, err)
	}
	b.Release(70)
	if g := <-got; g != 60 {
		t.Fatalf("the waiter got %d, want 60", g)
	}
	if g, _ := b.TryAcquire(500); g != 0 && b.Used() > 100 {
		t.Fatalf("a request above the limit took %d (used %d)", g, b.Used())
	}
	if b.Peak() > 100 {
		t.Fatalf("peak %d over the limit", b.Peak())
	}
	var nilBudget *FrameBudget
	if g, ok := nilBudget.TryAcquire(1 << 30); !ok || g != 0 {
		t.Fatal("no budget must not bound")
	}
}

// queued is how many wait for a grant now.
func (b *FrameBudget) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters.Len()
}

// A session waiting for the budget stops waiting when it ends (a stop, a
// lost lease), taking nothing.
func TestLargeFrameWaitEndsWithTheSession(t *testing.T) {
	cfg := testConfig()
	h := newHarness(t, cfg)
	h.env.Frames = NewFrameBudget(cfg.ReadLimit)
	held, ok := h.env.Frames.TryAcquire(cfg.ReadLimit) // another session's large message
	if !ok {
		t.Fatal("the budget's first grant refused")
	}
	_, url := newScripted(t, func(l *link) {
		if l.send(websocket.MessageText, bigMessage(1, 100<<10)) != nil {
			return
		}
		l.drain()
	})
	h.put("waits", url, nil)
	s, done := h.start("waits")
	testwait.Eventually(t, 5*time.Second, "the session waiting for the budget", func() bool { return h.env.Frames.queued() == 1 })
	s.Interrupt(ErrStopRequested)
	_ = wait(t, done, 5*time.Second)
	if q, used := h.env.Frames.queued(), h.env.Frames.Used(); q != 0 || used != held {
		t.Fatalf("after the session ended: %d waiting, %d bytes held, want 0 and the other grant's %d", q, used, held)
	}
	if h.rec.count() != 0 {
		t.Fatalf("%d messages delivered by a session that never got room", h.rec.count())
	}
	h.env.Frames.Release(held)
}
