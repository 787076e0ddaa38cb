// Package faultnet owns a TCP proxy for tests that can freeze the path to a
// local engine: it forwards bytes until Freeze, then holds them (both ways,
// or only the answers with FreezeAnswers) until Thaw, with every connection
// left open, as a frozen or partitioned server looks to a client. Tests put
// it between a component and dynalite or fauxqs to check what the component
// does when a call's outcome is unknown. It listens on 127.0.0.1 only and
// no shipped binary imports it.
package faultnet

import (
	"fmt"
	"net"
	"net/url"
	"sync"
)

// Proxy forwards TCP connections from its own loopback address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	requests bool          // client → server bytes held
	answers  bool          // server → client bytes held
	thawed   chan struct{} // closed by Thaw
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// Start listens on 127.0.0.1 and forwards every connection to target
// (host:port).
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, thawed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// StartEndpoint starts a proxy in front of an engine's endpoint URL (the
// value of AWS_ENDPOINT_URL_DYNAMODB or AWS_ENDPOINT_URL_SQS).
func StartEndpoint(endpoint string) (*Proxy, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("faultnet: %q is not an endpoint URL", endpoint)
	}
	return Start(u.Host)
}

// Addr is the proxy's host:port; URL is it as an http:// endpoint.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy as an http:// endpoint (an SDK BaseEndpoint).
func (p *Proxy) URL() string { return "http://" + p.Addr() }

// Freeze holds every byte in both directions from now on: requests do not
// reach the server, answers do not reach the client.
func (p *Proxy) Freeze() { p.freeze(true, true) }

// FreezeAnswers holds only what the server sends: requests still reach it
// and are carried out, but the client never hears back (an outcome unknown).
func (p *Proxy) FreezeAnswers() { p.freeze(false, true) }

func (p *Proxy) freeze(requests, answers bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.requests && !p.answers {
		p.thawed = make(chan struct{})
	}
	p.requests, p.answers = requests, answers
}

// Thaw forwards again, held bytes first.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.requests || p.answers {
		p.requests, p.answers = false, false
		close(p.thawed)
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Thaw()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Go(func() { p.pump(s, c, true) })  // client → server: requests
		p.wg.Go(func() { p.pump(c, s, false) }) // server → client: answers
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pump copies from src to dst, holding each chunk while its direction is
// frozen; when either side ends, both are closed.
func (p *Proxy) pump(dst, src net.Conn, request bool) {
	defer func() {
		_ = dst.Close()
		_ = src.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait(request)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or a closed connection
			return
		}
	}
}

// wait blocks while the direction is frozen (and the proxy open).
func (p *Proxy) wait(request bool) {
	for {
		p.mu.Lock()
		held := (request && p.requests) || (!request && p.answers)
		ch, closed := p.thawed, p.closed
		p.mu.Unlock()
		if !held || closed {
			return
		}
		<-ch
	}
}
