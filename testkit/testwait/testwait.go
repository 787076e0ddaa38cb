// Package testwait owns how tests wait on time: a condition that must come
// true within a deadline (Eventually) and one that must stay true through a
// window (Holds). Tests use them instead of a fixed sleep followed by a
// single read, which passes or fails with the machine's load. No shipped
// binary imports it.
package testwait

import (
	"testing"
	"time"
)

// Poll is how often a condition is evaluated.
const Poll = 10 * time.Millisecond

// Eventually waits until cond is true, evaluating it every Poll, and fails t
// if it is still false after within.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(Poll)
	}
}

// Holds evaluates cond every Poll for window and fails t the first time it
// is false: a property that must stay true (nobody reclaims a stopped
// session, a worker stays at its capacity) is checked throughout the
// window, not once at its end.
func Holds(t testing.TB, window time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(window)
	for {
		if !cond() {
			t.Fatalf("no longer true after %s of %s: %s", window-time.Until(end), window, what)
		}
		if time.Now().After(end) {
			return
		}
		time.Sleep(Poll)
	}
}
