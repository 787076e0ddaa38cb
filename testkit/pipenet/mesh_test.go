package pipenet

import (
	"context"
	"errors"
	"io"
	"syscall"
	"testing"
)

// A dial reaches the listener at the address it names; an address nobody
// listens at, or whose listener closed, is refused.
func TestMeshRoutesByAddress(t *testing.T) {
	m := NewMesh()
	a, err := m.Listen("a:80")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Listen("b:80")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Listen("a:80"); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second listen at a:80: %v", err)
	}
	ctx := context.Background()
	for _, l := range []*Net{a, b} {
		go func() {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(l.Addr().String()))
			_ = c.Close()
		}()
	}
	for _, addr := range []string{"b:80", "a:80"} {
		c, err := m.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(c)
		if string(got) != addr {
			t.Errorf("dialled %s, reached %s", addr, got)
		}
	}
	if _, err := m.DialContext(ctx, "tcp", "c:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial to nobody: %v, want refused", err)
	}
	_ = a.Close()
	if _, err := m.DialContext(ctx, "tcp", "a:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial to a closed listener: %v, want refused", err)
	}
	if _, err := m.Listen("a:80"); err != nil {
		t.Errorf("listen again at a closed address: %v", err)
	}
}
