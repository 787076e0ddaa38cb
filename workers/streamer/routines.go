package streamer

import (
	"context"
	"sync"
)

// routines is the one tracked spawner of a Worker's goroutines (after
// hashicorp/raft's goFunc on a routines group): every goroutine the Worker
// starts besides a session's own goes through Go, and Run returns only after
// Close saw all of them end. A session's goroutine is tracked apart
// (Worker.sessWG), since Run waits for sessions only up to its shutdown
// deadline (a sink call that ignores its context may never return). So is
// a wait with a deadline (internal/waitfor): its goroutine ends with the
// call it waits for (the drain waits for it; the wait for sessWG ends with
// the sessions).
type routines struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f in a tracked goroutine; false (f not run) once Close began:
// the Worker is stopping and nothing new starts.
func (r *routines) Go(f func()) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Go(f)
	return true
}

// Close refuses new goroutines and waits for the running ones.
func (r *routines) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.wg.Wait()
}

// runner is a sink that runs in the background (sink/batch's Batcher): the
// Worker owns it, starting it before the first claim and stopping it once
// its sessions have released and its requests ended.
type runner interface {
	Run(ctx context.Context)
}
