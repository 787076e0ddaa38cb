package session

import (
	"context"
	"sync"
)

// Handshakes bounds how many dials (TCP, TLS and WebSocket handshakes) a
// worker runs at once, across all its sessions and source hosts, and how
// many of them one source host may hold. A claim burst or a source that
// drops thousands of connections at once then handshakes a bounded number
// at a time: each handshake holds tens of KiB of key-exchange state while it
// runs (more for TLS 1.3's hybrid key shares), and an unbounded storm of
// them both peaks the heap (the Go runtime keeps that peak as idle heap, up
// to its scavenger's goal) and starves the CPU until handshakes outlast
// their deadline and dial again. The per-host cap keeps one slow host (a
// tarpit that accepts and never answers) from holding every slot until its
// dials time out: a dial waits for its host's slot first, holding no slot
// of the worker's, then for one of the worker's. Safe for concurrent use.
type Handshakes struct {
	slots   chan struct{} // nil: no bound over every host
	perHost int           // 0: no bound per host
	mu      sync.Mutex
	hosts   map[string]*hostSlots
}

// hostSlots are one host's slots; refs counts the dials holding or waiting
// for one (the entry goes when none does).
type hostSlots struct {
	slots chan struct{}
	refs  int
}

// NewHandshakes returns a bound of n dials at once over every host and
// perHost at once to one host (0 or less: no bound of that kind); nil (no
// bound at all) when both are 0 or less.
func NewHandshakes(n, perHost int) *Handshakes {
	if n <= 0 && perHost <= 0 {
		return nil
	}
	h := &Handshakes{perHost: max(perHost, 0), hosts: map[string]*hostSlots{}}
	if n > 0 {
		h.slots = make(chan struct{}, n)
	}
	return h
}

// Acquire blocks until a dial to host may start, or ctx ends (its error).
// Every successful Acquire is followed by one Release of the same host. A
// nil bound admits at once.
func (h *Handshakes) Acquire(ctx context.Context, host string) error {
	if h == nil {
		return nil
	}
	var e *hostSlots
	if h.perHost > 0 {
		h.mu.Lock()
		e = h.hosts[host]
		if e == nil {
			e = &hostSlots{slots: make(chan struct{}, h.perHost)}
			h.hosts[host] = e
		}
		e.refs++
		h.mu.Unlock()
		if err := take(ctx, e.slots); err != nil {
			h.unref(host, e)
			return err
		}
	}
	if h.slots != nil {
		if err := take(ctx, h.slots); err != nil {
			if e != nil {
				<-e.slots
				h.unref(host, e)
			}
			return err
		}
	}
	return nil
}

// Release ends a dial to host Acquire admitted.
func (h *Handshakes) Release(host string) {
	if h == nil {
		return
	}
	if h.slots != nil {
		<-h.slots
	}
	if h.perHost > 0 {
		h.mu.Lock()
		e := h.hosts[host]
		h.mu.Unlock()
		<-e.slots
		h.unref(host, e)
	}
}

func (h *Handshakes) unref(host string, e *hostSlots) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(h.hosts, host)
	}
}

// take puts a token in slots once there is room, or returns ctx's error; a
// free slot admits even on an ended ctx.
func take(ctx context.Context, slots chan struct{}) error {
	select {
	case slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
