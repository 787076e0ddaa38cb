package backoff

import (
	"slices"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/draw"
)

func TestStepDoublesUpToMax(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for n, w := range want {
		if got := p.Step(n); got != w*time.Millisecond {
			t.Errorf("Step(%d) = %s, want %s", n, got, w*time.Millisecond)
		}
	}
	if got := p.Step(1000); got != time.Second {
		t.Errorf("Step(1000) = %s (overflow?)", got)
	}
}

func TestDelayIsEqualJitter(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Max: 30 * time.Second}
	for n := 0; n < 20; n++ {
		step := p.Step(n)
		if lo := p.Delay(n, 0); lo != step/2 {
			t.Errorf("Delay(%d, 0) = %s, want %s", n, lo, step/2)
		}
		if hi := p.Delay(n, 0.999999); hi > step || hi < step*99/100 {
			t.Errorf("Delay(%d, ~1) = %s, want ≈ %s", n, hi, step)
		}
		for i := 0; i < 50; i++ {
			if d := p.Next(n, nil); d < step/2 || d > step {
				t.Fatalf("Next(%d) = %s outside [%s, %s]", n, d, step/2, step)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	for _, p := range []Policy{{}, {Base: time.Second, Max: time.Millisecond}, {Base: -1, Max: 1}} {
		if p.Validate() == nil {
			t.Errorf("%+v validated", p)
		}
	}
	if err := (Policy{Base: 1, Max: 1}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestNextReplaysASeed: the delays drawn from a seeded stream are the same
// for the same seed and differ for another (the fleet simulator's reruns).
func TestNextReplaysASeed(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Max: 30 * time.Second}
	delays := func(seed uint64) []time.Duration {
		r := draw.New(seed).Stream("reconnect")
		var out []time.Duration
		for n := range 20 {
			out = append(out, p.Next(n, r))
		}
		return out
	}
	a, b, c := delays(7), delays(7), delays(8)
	if !slices.Equal(a, b) {
		t.Errorf("seed 7 drew %v, then %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8 drew the same delays %v", a)
	}
}
