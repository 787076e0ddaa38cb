package session

import "context"

// Handshakes bounds how many dials (TCP, TLS and WebSocket handshakes) a
// worker runs at once, across all its sessions and source hosts. A claim
// burst or a source that drops thousands of connections at once then
// handshakes a bounded number at a time: each handshake holds tens of KiB of
// key-exchange state while it runs (more for TLS 1.3's hybrid key shares),
// and an unbounded storm of them both peaks the heap (the Go runtime keeps
// that peak as idle heap, up to its scavenger's goal) and starves the CPU
// until handshakes outlast their deadline and dial again. Safe for
// concurrent use.
type Handshakes struct {
	slots chan struct{}
}

// NewHandshakes returns a bound of n dials at once; nil (no bound) when n
// is 0 or less.
func NewHandshakes(n int) *Handshakes {
	if n <= 0 {
		return nil
	}
	return &Handshakes{slots: make(chan struct{}, n)}
}

// Acquire blocks until a dial may start, or ctx ends (its error). Every
// successful Acquire is followed by one Release. A nil bound admits at once.
func (h *Handshakes) Acquire(ctx context.Context) error {
	if h == nil {
		return nil
	}
	select {
	case h.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case h.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release ends a dial Acquire admitted.
func (h *Handshakes) Release() {
	if h == nil {
		return
	}
	<-h.slots
}
