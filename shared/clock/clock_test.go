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

func TestFakeTimerStopsAndResets(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tm := f.NewTimer(time.Second)
	if !tm.Stop() || tm.Stop() {
		t.Fatal("Stop of a pending timer, then of a stopped one")
	}
	f.Advance(2 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer reported it pending")
	}
	f.Advance(time.Second)
	<-tm.C()
	tm.Reset(time.Second)
	f.Advance(time.Second)
	f.Advance(time.Second) // fired and not taken: not fired again, Advance does not block
	<-tm.C()
	if f.Waiters() != 0 {
		t.Fatalf("%d waiters", f.Waiters())
	}
	if r := (Offset{Base: f}).NewTimer(0); r == nil {
		t.Fatal("no timer")
	} else {
		<-r.C()
	}
	rt := Real{}.NewTimer(time.Hour)
	if !rt.Stop() {
		t.Fatal("Real timer not pending")
	}
	if d := Until(f, f.Now().Add(time.Second)); d != time.Second {
		t.Fatalf("Until %s", d)
	}
	if d := Since(f, f.Now().Add(-time.Second)); d != time.Second {
		t.Fatalf("Since %s", d)
	}
}
