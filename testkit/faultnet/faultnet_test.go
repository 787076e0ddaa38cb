package faultnet

import (
	"bufio"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// echoServer answers every line with the same line and counts the lines it
// received.
func echoServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var got atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					got.Add(1)
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), &got
}

func roundTrip(c net.Conn, r *bufio.Reader, within time.Duration) (string, error) {
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(within))
	return r.ReadString('\n')
}

func TestFreezeHoldsAndThawDelivers(t *testing.T) {
	target, got := echoServer(t)
	p, err := Start(target)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if s, err := roundTrip(c, r, 5*time.Second); err != nil || s != "ping\n" {
		t.Fatalf("open: %q %v", s, err)
	}

	// Frozen both ways: the request does not arrive, nothing comes back.
	p.Freeze()
	if s, err := roundTrip(c, r, 300*time.Millisecond); err == nil {
		t.Fatalf("answer while frozen: %q", s)
	}
	if n := got.Load(); n != 1 {
		t.Fatalf("server got %d lines while frozen, want 1", n)
	}
	p.Thaw()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if s, err := r.ReadString('\n'); err != nil || s != "ping\n" {
		t.Fatalf("after thaw: %q %v", s, err)
	}

	// Answers frozen: the request is carried out, the client hears nothing.
	p.FreezeAnswers()
	if s, err := roundTrip(c, r, 300*time.Millisecond); err == nil {
		t.Fatalf("answer while answers are frozen: %q", s)
	}
	testwait.Eventually(t, 5*time.Second, "the server gets the request while answers are held", func() bool { return got.Load() == 3 })
	p.Thaw()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if s, err := r.ReadString('\n'); err != nil || s != "ping\n" {
		t.Fatalf("held answer after thaw: %q %v", s, err)
	}
}
