// Package logging is how a wsfleet component logs: JSON lines (zerolog)
// on one writer, each with its time and the component's name (the
// "service" field, schema.Service…), at a level.
package logging

import (
	"io"
	"strings"

	"github.com/rs/zerolog"
)

// New returns service's logger on out at level: "debug", "info", "warn" or
// "error", in any case (what zerolog parses, trace to panic, is taken too);
// "" or anything else is info. A component that has its own level setting
// validates it first (the worker: WSFLEET_LOG_LEVEL).
func New(out io.Writer, service, level string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || lvl == zerolog.NoLevel {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Str("service", service).Logger()
}
