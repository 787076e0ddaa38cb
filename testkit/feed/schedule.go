package feed

// A session's schedule and its messages' bytes (the package doc): seq N is
// produced at t0 + N/rate, t0 being the session's first connection. The
// feed's server and the fleet simulator's light source
// (scripts/fleetsim/lightsrc.go) both produce by these.

import (
	"strconv"
	"time"
)

// SeqDuration is how long a source producing rate messages a second takes
// to produce n.
func SeqDuration(rate float64, n int64) time.Duration {
	return time.Duration(float64(n) / rate * float64(time.Second))
}

// StartOf is t0 of a session first seen at now by a client resuming at
// from (0: the live end): a session first seen resuming at K has already
// produced K-1 messages.
func StartOf(now time.Time, rate float64, from int64) time.Time {
	return now.Add(-SeqDuration(rate, max(from-1, 0)))
}

// ProducedBy is how many messages a session whose t0 is t0 has produced
// by now.
func ProducedBy(t0, now time.Time, rate float64) int64 {
	return int64(now.Sub(t0).Seconds() * rate)
}

// AppendMessage appends the feed's message for seq of session:
// {"seq":N,"session":S,"ts":MS[,"pad":"x..."][,"auth":D]}. session matches
// the session pattern and auth is AuthDigest's (no character JSON must
// escape).
func AppendMessage(b []byte, session string, seq, nowMs int64, pad, auth string) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"session":"`...)
	b = append(b, session...)
	b = append(b, `","ts":`...)
	b = strconv.AppendInt(b, nowMs, 10)
	if pad != "" {
		b = append(b, `,"pad":"`...)
		b = append(b, pad...)
		b = append(b, '"')
	}
	if auth != "" {
		b = append(b, `,"auth":"`...)
		b = append(b, auth...)
		b = append(b, '"')
	}
	return append(b, '}')
}
