package devstack

import (
	"testing"

	"github.com/wsfleet/wsfleet/testkit/proc"
)

// A rolling restart waits for the run's end, then starts the next
// incarnation; the Proc reports the previous run's exit after its end is
// visible, so the report may come after the next start. It ends the
// incarnation whose process exited, never the new one: the clean-clone CI
// run whose chaos failed with "worker-1-run1.r3 exited before it was ready
// (<nil>)" right after r2's graceful exit.
func TestLateExitReportEndsThePreviousIncarnation(t *testing.T) {
	w := &Worker{stack: &Stack{}, Proc: &proc.Proc{Name: "worker-1"}}
	r2 := &incarnation{id: "worker-1.r2", ready: make(chan struct{}), ended: make(chan struct{}), pid: 42, isReady: true}
	close(r2.ready)
	w.cur = r2
	r3 := &incarnation{id: "worker-1.r3", awaited: true, ready: make(chan struct{}), ended: make(chan struct{}), prev: r2}
	w.cur = r3 // started; its pid not known yet
	w.onExit(proc.Exit{Pid: 42, Stopped: true})
	if !r2.isEnded || r2.exit.Name != r2.id {
		t.Fatalf("r2: ended %v, exit %+v: want its own exit", r2.isEnded, r2.exit)
	}
	if r3.isEnded {
		t.Fatalf("r3 ended by r2's exit report (%+v)", r3.exit)
	}
	// r3's own exit still ends it.
	w.onExit(proc.Exit{Pid: 43})
	if !r3.isEnded || r3.exit.Pid != 43 {
		t.Fatalf("r3: ended %v, exit %+v: want its own exit", r3.isEnded, r3.exit)
	}
}
