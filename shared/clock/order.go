// The earlier and the later of two instants.

package clock

import "time"

// Earliest is the earlier of a and b.
func Earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Latest is the later of a and b.
func Latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
