package waitfor

import (
	"testing"
	"time"
)

// A call that returns before its deadline is answered true, with done
// closed.
func TestUntilCallFirst(t *testing.T) {
	never := make(chan time.Time)
	done, ok := Until(func() {}, never)
	if !ok {
		t.Fatal("a call that returned was answered late")
	}
	select {
	case <-done:
	default:
		t.Fatal("done is open after the call returned")
	}
}

// A call still running at its deadline is answered false; done closes once
// the caller ends the call.
func TestUntilDeadlineFirst(t *testing.T) {
	release := make(chan struct{})
	deadline := make(chan time.Time, 1)
	deadline <- time.Now()
	done, ok := Until(func() { <-release }, deadline)
	if ok {
		t.Fatal("a call still blocked was answered in time")
	}
	select {
	case <-done:
		t.Fatal("done closed while the call still runs")
	default:
	}
	close(release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("done still open 5 s after the call was released")
	}
}
