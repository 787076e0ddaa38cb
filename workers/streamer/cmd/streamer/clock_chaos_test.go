//go:build chaos

package main

import (
	"io"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/envconfig"
)

func TestChaosClock(t *testing.T) {
	log := logging.New(io.Discard, schema.ServiceStreamer, "info")
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
		clk, err := chaosClock(env(tc.v, tc.set), &log)
		if err != nil {
			t.Fatalf("%q: %v", tc.v, err)
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
		if got := time.Until(clk.Now()); got < tc.want-50*time.Millisecond || got > tc.want+50*time.Millisecond {
			t.Fatalf("%q: clock reads %v from the system clock", tc.v, got)
		}
	}
	if _, err := chaosClock(env("soon", true), &log); err == nil {
		t.Fatal("a bad offset was accepted")
	}
}

// The chaos build knows the offset variable (the default build refuses it,
// clock_default_test.go).
func TestChaosBuildAcceptsTheClockOffset(t *testing.T) {
	cfg, err := envconfig.FromEnv([]string{EnvTestClockOffset + "=400ms"}, chaosEnv()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
