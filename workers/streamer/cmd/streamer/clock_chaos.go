//go:build chaos

package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/clock"
)

// EnvTestClockOffset shifts the worker's clock (every wall-clock reading
// the worker makes: heartbeat and record times) by a signed duration, e.g.
// "400ms" or "-250ms". The ownership rules use only durations measured on
// it (the trust deadline, a watched counter's age), so an offset of any
// size must leave them safe: the chaos harness (scripts/chaos) plays such a
// worker to show it. Only the chaos build (-tags chaos) reads it; the
// shipped binary refuses it as an unknown variable.
const EnvTestClockOffset = "WSFLEET_TEST_CLOCK_OFFSET"

// chaosEnv are the variables only this build reads.
func chaosEnv() []string { return []string{EnvTestClockOffset} }

// chaosClock returns the lease clock: nil (the worker's default, the real
// clock) when WSFLEET_TEST_CLOCK_OFFSET is unset or zero, else the real one
// offset by it, with a warning in the log.
func chaosClock(lookup func(string) (string, bool), log *zerolog.Logger) (clock.Clock, error) {
	v, ok := lookup(EnvTestClockOffset)
	v = strings.TrimSpace(v)
	if !ok || v == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: not a duration (e.g. 400ms, -250ms)", EnvTestClockOffset, v)
	}
	if d == 0 {
		return nil, nil
	}
	log.Warn().Dur("offset", d).Str("env", EnvTestClockOffset).Msg("TEST ONLY: the lease clock is offset from the system clock")
	return clock.Offset{Base: clock.Real{}, Skew: d}, nil
}
