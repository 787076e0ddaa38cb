package bench

import (
	"testing"
	"time"
)

func TestWriteBound(t *testing.T) {
	if got := WriteBound(64, 5*time.Millisecond, DefaultCheckpointEvery); got != 768000 {
		t.Fatalf("%d, want 768000 (64 / 5 ms × 60 s)", got)
	}
}
