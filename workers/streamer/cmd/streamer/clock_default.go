//go:build !chaos

package main

import (
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/clock"
)

// chaosEnv are the variables only the chaos build reads: none here.
func chaosEnv() []string { return nil }

// chaosClock is the worker's default lease clock (nil: the real one); the
// shipped build has no way to offset it.
func chaosClock(func(string) (string, bool), *zerolog.Logger) (clock.Clock, error) { return nil, nil }
