package lease

import (
	"testing"
	"time"
)

// The Keeper's scan finds a tenure's periodic checkpoint due exactly when
// its locked check would: not before its time (the lock-free skip), at its
// time once a seq past the stored one was delivered, and again at the
// time the last attempt set.
func TestCheckpointMaybeDueFollowsTheSchedule(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	now := func() time.Time { return t0 }
	always := func(time.Time) bool { return true }
	h := newHeld(Item{ConnectionID: "c", Owner: "w", Epoch: 1, LastSeq: 10}, t0, time.Minute, always, func() time.Time { return time.Time{} }, now)
	h.Observe(11)
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{0, false}, {time.Minute - time.Nanosecond, false}, {time.Minute, true}, {2 * time.Minute, true}} {
		if got := h.checkpointMaybeDue(t0.Add(tc.at)); got != tc.want {
			t.Fatalf("due at +%v: %v, want %v", tc.at, got, tc.want)
		}
	}
	seq, due := h.checkpointDue(t0.Add(time.Minute))
	if !due || seq != 11 {
		t.Fatalf("checkpointDue at +1m: %d %v, want 11 true", seq, due)
	}
	if h.checkpointMaybeDue(t0.Add(time.Minute)) {
		t.Fatal("due while the checkpoint is in flight")
	}
	h.checkpointDone(11, nil, t0.Add(90*time.Second))
	h.Observe(12)
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{89 * time.Second, false}, {90 * time.Second, true}} {
		if got := h.checkpointMaybeDue(t0.Add(tc.at)); got != tc.want {
			t.Fatalf("after the attempt, due at +%v: %v, want %v", tc.at, got, tc.want)
		}
	}
}
