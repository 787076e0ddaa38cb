package clock

import (
	"context"
	"testing"
	"time"
)

func TestFakeFiresTimersInOrderOnAdvance(t *testing.T) {
	start := time.Unix(100, 0)
	f := NewFake(start)
	a, b := f.After(2*time.Second), f.After(time.Second)
	f.Advance(999 * time.Millisecond)
	select {
	case <-a:
		t.Fatal("fired early")
	case <-b:
		t.Fatal("fired early")
	default:
	}
	f.Advance(time.Millisecond)
	if got := <-b; !got.Equal(start.Add(time.Second)) {
		t.Fatalf("fired with %s", got)
	}
	if f.Waiters() != 1 {
		t.Fatalf("%d waiters", f.Waiters())
	}
	f.Advance(time.Second)
	<-a
	if f.Now().Sub(start) != 2*time.Second {
		t.Fatal("wrong time")
	}
}

func TestOffsetShiftsWallTimeOnly(t *testing.T) {
	f := NewFake(time.Unix(100, 0))
	o := Offset{Base: f, Skew: 300 * time.Millisecond}
	if d := o.Now().Sub(f.Now()); d != 300*time.Millisecond {
		t.Fatalf("offset %s", d)
	}
	real := Offset{Base: Real{}, Skew: time.Hour}
	a := real.Now()
	b := real.Now()
	if b.Sub(a) < 0 || b.Sub(a) > time.Second {
		t.Fatalf("durations on an offset clock changed: %s", b.Sub(a))
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Sleep(ctx, f, time.Hour) }()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	go func() { done <- Sleep(context.Background(), f, time.Second) }()
	for f.Waiters() < 2 { // the cancelled sleep's hour timer, and this one
		time.Sleep(time.Millisecond)
	}
	f.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v", err)
	}
}

func TestEarliestAndLatest(t *testing.T) {
	a, b := time.Unix(1, 0), time.Unix(2, 0)
	for _, p := range [][2]time.Time{{a, b}, {b, a}} {
		if got := Earliest(p[0], p[1]); !got.Equal(a) {
			t.Fatalf("Earliest(%v, %v) = %v", p[0], p[1], got)
		}
		if got := Latest(p[0], p[1]); !got.Equal(b) {
			t.Fatalf("Latest(%v, %v) = %v", p[0], p[1], got)
		}
	}
}
