package main

import (
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
)

func TestTestClock(t *testing.T) {
	env := func(v string, set bool) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k == EnvTestClockOffset && set {
				return v, true
			}
			return "", false
		}
	}
	for _, tc := range []struct {
		v    string
		set  bool
		want time.Duration
	}{{"", false, 0}, {"", true, 0}, {"0s", true, 0}, {" 400ms ", true, 400 * time.Millisecond}, {"-250ms", true, -250 * time.Millisecond}} {
		clk, d, err := testClock(env(tc.v, tc.set))
		if err != nil || d != tc.want {
			t.Fatalf("%q: offset %v, err %v; want %v", tc.v, d, err, tc.want)
		}
		if tc.want == 0 {
			if clk != nil {
				t.Fatalf("%q: want the default clock (nil), got %T", tc.v, clk)
			}
			continue
		}
		off, ok := clk.(clock.Offset)
		if !ok || off.Skew != tc.want {
			t.Fatalf("%q: clock %#v", tc.v, clk)
		}
		if got := clk.Now().Sub(time.Now()); got < tc.want-50*time.Millisecond || got > tc.want+50*time.Millisecond {
			t.Fatalf("%q: clock reads %v from the system clock", tc.v, got)
		}
	}
	if _, _, err := testClock(env("soon", true)); err == nil {
		t.Fatal("a bad offset was accepted")
	}
}
