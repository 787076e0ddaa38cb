package enginetest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestFreePortHandsOutReservedDistinctPorts(t *testing.T) {
	lo, hi := portRange()
	seen := map[int]bool{}
	for i := 0; i < 50; i++ {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if hi-lo >= 100 && (p < lo || p >= hi) {
			t.Fatalf("port %d outside the reserved range [%d, %d)", p, lo, hi)
		}
		// Another process (here: another open file description) cannot
		// take the port's lock while this one lives.
		if hi-lo >= 100 {
			if f, err := lockPort(filepath.Join(os.TempDir(), "wsfleet-ports"), p); err == nil {
				f.Close()
				t.Fatalf("port %d: its lock was free to take after FreePort handed it out", p)
			}
		}
		// And the port is bindable by the process it is meant for.
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not bindable: %v", p, err)
		}
		l.Close()
	}
}

func TestReservePortSkipsLockedAndBoundPorts(t *testing.T) {
	dir := t.TempDir()
	// A window of ports from the kernel's own range, each held by a listener.
	var ls []net.Listener
	for len(ls) < 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ls = append(ls, l)
	}
	port := func(l net.Listener) int { return l.Addr().(*net.TCPAddr).Port }
	// Every port bound by something that takes no lock: none is handed out.
	for _, l := range ls {
		if p, _, err := reservePort(dir, port(l), port(l)+1, port(l)); err == nil {
			t.Fatalf("port %d handed out while a socket had it bound", p)
		}
	}
	// A free port whose lock another holder has: skipped too.
	free := port(ls[0])
	ls[0].Close()
	other, err := lockPort(dir, free)
	if err != nil {
		t.Fatal(err)
	}
	if p, _, err := reservePort(dir, free, free+1, free); err == nil {
		t.Fatalf("port %d handed out while another holder had its lock", p)
	}
	// Once that holder lets go, the port is handed out, and locked.
	other.Close()
	p, f, err := reservePort(dir, free, free+1, free)
	if err != nil || p != free {
		t.Fatalf("reservePort = %d, %v; want %d", p, err, free)
	}
	defer f.Close()
	if g, err := lockPort(dir, free); err == nil {
		g.Close()
		t.Fatalf("port %d handed out without its lock held", free)
	}
}
