package pipenet

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
)

// Mesh is a network of Nets, each listening at its own address: a dial
// reaches the Net listening at the address it names (net.Pipe underneath),
// or is refused (ECONNREFUSED, as a port nothing listens on) when none
// does or that Net is closed. Safe for concurrent use.
type Mesh struct {
	mu sync.Mutex
	at map[string]*Net
}

// NewMesh returns an empty Mesh.
func NewMesh() *Mesh { return &Mesh{at: map[string]*Net{}} }

// Addr is an address on a Mesh ("pipe" network).
type Addr string

// Network implements net.Addr.
func (Addr) Network() string { return "pipe" }

func (a Addr) String() string { return string(a) }

// Listen returns an open Net listening at addr (host:port), replacing a
// closed one there; an open one there is an error.
func (m *Mesh) Listen(addr string) (*Net, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.at[addr]; ok && !p.closed() {
		return nil, fmt.Errorf("pipenet: listen %s: %w", addr, syscall.EADDRINUSE)
	}
	p := New()
	p.addr = Addr(addr)
	m.at[addr] = p
	return p, nil
}

// DialContext dials the Net listening at addr.
func (m *Mesh) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	m.mu.Lock()
	p := m.at[addr]
	m.mu.Unlock()
	if p == nil || p.closed() {
		return nil, &net.OpError{Op: "dial", Net: network, Addr: Addr(addr), Err: syscall.ECONNREFUSED}
	}
	return p.DialContext(ctx, network, addr)
}

func (p *Net) closed() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}
