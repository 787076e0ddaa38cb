package session

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDialGateAdmitsPerHost(t *testing.T) {
	if NewDialGate(0) != nil {
		t.Fatal("0 dials per second must mean no gate")
	}
	var none *DialGate
	if err := none.Wait(context.Background(), "h", nil); err != nil {
		t.Fatalf("no gate: %v", err)
	}
	g := NewDialGate(10) // burst 10, then one every 100 ms
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	for i := 0; i < 10; i++ {
		if err := g.Wait(cancelled, "a.example", nil); err != nil {
			t.Fatalf("dial %d within the burst had to wait: %v", i, err)
		}
	}
	// The bucket of a.example is empty: a dial there must wait (a waiting
	// call gives up on a cancelled context), one to another host need not.
	if err := g.Wait(cancelled, "a.example", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("11th dial to a.example: %v, want it to wait", err)
	}
	if err := g.Wait(cancelled, "b.example", nil); err != nil {
		t.Fatalf("first dial to b.example had to wait: %v", err)
	}
	// Five more dials to a.example take at least 5 intervals (the cancelled
	// wait gave its token back).
	for i := 0; i < 5; i++ {
		if err := g.Wait(context.Background(), "a.example", nil); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 490*time.Millisecond {
		t.Fatalf("15 dials to one host at 10/s (burst 10) took %v, want at least 0.5 s", d)
	}
}

// Sessions to one host dial at the gate's rate; a stop ends a session that
// is waiting for admission at once.
func TestSessionsDialThroughTheGate(t *testing.T) {
	_, url := newScripted(t, func(l *link) { l.drain() })
	h := newHarness(t, testConfig())
	h.env.Dials = NewDialGate(4) // burst 4, then one every 250 ms
	start := time.Now()
	runs := h.startMany(6, url)
	runs.waitConnected(t, 10*time.Second, "six sessions connected")
	if d := time.Since(start); d < 490*time.Millisecond {
		t.Fatalf("6 dials to one host at 4/s (burst 4) took %v, want at least 0.5 s", d)
	}
	// The gate's bucket is empty again: a seventh session waits, and a stop
	// ends it without a dial.
	for i := 0; i < 4; i++ {
		_ = h.env.Dials.Wait(context.Background(), "127.0.0.1", nil)
	}
	h.put("sz", url, nil)
	s, done := h.start("sz")
	s.Interrupt(ErrStopRequested)
	if err := wait(t, done, time.Second); !errors.Is(err, ErrStopRequested) {
		t.Fatalf("stopped while waiting for admission: %v", err)
	}
	if s.Status().Connected || s.Status().Reconnects != 0 {
		t.Fatalf("a session stopped before admission connected: %+v", s.Status())
	}
	runs.stop(t)
}
