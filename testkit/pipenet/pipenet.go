// Package pipenet owns an in-memory network for tests and simulations in a
// testing/synctest bubble: a dial hands one end of a net.Pipe to the
// listener's Accept. A goroutine waiting on a pipe is durably blocked (one
// on a socket is not), so the bubble's virtual time moves on. It is a test
// harness: no shipped binary imports it (shared/archtest).
package pipenet

import (
	"context"
	"net"
	"sync"
)

// Net is a listener (Accept, Close, Addr) and a dialer (DialContext) joined
// by pipes. Safe for concurrent use.
type Net struct {
	addr  net.Addr // nil: a loopback address
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// New returns an open Net.
func New() *Net { return &Net{conns: make(chan net.Conn), done: make(chan struct{})} }

// Accept implements net.Listener: the server end of the next dial.
func (p *Net) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener: Accept and DialContext return
// net.ErrClosed from then on.
func (p *Net) Close() error {
	p.once.Do(func() { close(p.done) })
	return nil
}

// Addr implements net.Listener: its address on a Mesh, else a loopback
// address (nothing listens there).
func (p *Net) Addr() net.Addr {
	if p.addr != nil {
		return p.addr
	}
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}
}

// DialContext dials the Net whatever the address: the client end of a pipe
// whose other end the next Accept returns.
func (p *Net) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case p.conns <- s:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.done:
		return nil, net.ErrClosed
	}
}

// DialFrom is DialContext for a client at address from: the listener's end
// of each pipe reports from as its RemoteAddr (an http.Server's
// Request.RemoteAddr), the client's end as its LocalAddr, so that a server
// can tell its clients apart (a per-IP limit).
func (p *Net) DialFrom(from net.Addr) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, s := net.Pipe()
		select {
		case p.conns <- addrConn{Conn: s, remote: from}:
			return addrConn{Conn: c, local: from}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.done:
			return nil, net.ErrClosed
		}
	}
}

// addrConn is a pipe end with the addresses DialFrom gives it (nil: the
// pipe's own).
type addrConn struct {
	net.Conn
	local, remote net.Addr
}

func (c addrConn) LocalAddr() net.Addr {
	if c.local != nil {
		return c.local
	}
	return c.Conn.LocalAddr()
}

func (c addrConn) RemoteAddr() net.Addr {
	if c.remote != nil {
		return c.remote
	}
	return c.Conn.RemoteAddr()
}
