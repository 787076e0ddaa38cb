package sqsnotify

import (
	"testing"
	"time"
)

// A hand-back's delay becomes a visibility timeout that never makes the
// message visible early, within SQS's 0 to 12 hours.
func TestVisibilitySeconds(t *testing.T) {
	for _, c := range []struct {
		after time.Duration
		want  int32
	}{
		{0, 0}, {-time.Second, 0}, {time.Millisecond, 1}, {time.Second, 1}, {5100 * time.Millisecond, 6}, {13 * time.Hour, 43200},
	} {
		if got := visibilitySeconds(c.after); got != c.want {
			t.Errorf("visibilitySeconds(%s) = %d, want %d", c.after, got, c.want)
		}
	}
}
