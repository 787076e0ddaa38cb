package clock

import (
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
