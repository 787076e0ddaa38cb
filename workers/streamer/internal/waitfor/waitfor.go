// Package waitfor owns the worker's one "wait for a call, but not past a
// deadline" block: a call that cannot be bounded by a context of its own
// (a sync.WaitGroup's Wait, a close handshake) runs on a goroutine of its
// own, and its caller waits for it or for a deadline, whichever is first.
package waitfor

import "time"

// Until runs f on a goroutine of its own and waits until f returns (true)
// or deadline delivers first (false). done is closed when f returns: a
// caller that was answered false and acts to end f sooner (cancels what f
// waits for, closes its socket) then waits on done, and f's goroutine ends
// before the caller goes on. A caller that does not wait on done leaves
// that goroutine running as long as f: it must be one that nothing tracks
// beyond f itself (the Worker's wait for its sessions, which Run waits for
// only up to its shutdown deadline).
//
// deadline is a timer's channel, on whichever clock the caller keeps time
// (the worker's clock.Clock, or a session's system clock).
func Until(f func(), deadline <-chan time.Time) (done <-chan struct{}, ok bool) {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		f()
	}()
	select {
	case <-ch:
		return ch, true
	case <-deadline:
		return ch, false
	}
}
