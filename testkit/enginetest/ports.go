package enginetest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ports for processes we start (engines, the ingest front, the feed,
// workers' admin listeners) are handed out by FreePort before the process
// binds them, so two test binaries running side by side (make runs the
// modules' tests in parallel) must never be handed the same port. Asking the
// kernel for port 0 and closing the socket does not give that: the port
// returns to the ephemeral pool at once and the next bind(0) or outgoing
// connection anywhere on the machine may take it before our child binds it.
// A CI run failed exactly so: a stack's ingest port was bound by another
// test's dynalite first, and every POST /sessions reached that dynalite.
//
// So FreePort draws from a range below the kernel's ephemeral range (no
// outgoing connection and no bind(0) ever uses those ports) and reserves
// each port it hands out with an flock on a file under the system temp
// directory, held until this process exits. Every wsfleet process that
// allocates ports goes through here, so no two of them hand out the same
// port while both live; a port still bound by something else is skipped.
var portAlloc struct {
	mu    sync.Mutex
	held  []*os.File // lock files, open (and so locked) until the process exits
	lo    int
	hi    int
	ready bool
}

// reservedLow and reservedHigh bound the range FreePort draws from; the
// high end shrinks to stay below the kernel's ephemeral range.
const (
	reservedLow  = 20000
	reservedHigh = 32000
)

func portRange() (lo, hi int) {
	lo, hi = reservedLow, reservedHigh
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			if eph, err := strconv.Atoi(f[0]); err == nil && eph < hi {
				hi = eph
			}
		}
	}
	return lo, hi
}

// FreePort returns a TCP port on 127.0.0.1 that is free now and that no
// other caller of FreePort on this machine is handed while this process
// lives.
func FreePort() (int, error) {
	portAlloc.mu.Lock()
	defer portAlloc.mu.Unlock()
	if !portAlloc.ready {
		portAlloc.lo, portAlloc.hi = portRange()
		portAlloc.ready = true
	}
	lo, hi := portAlloc.lo, portAlloc.hi
	if hi-lo < 100 {
		return kernelPort() // no room below the ephemeral range: the old way
	}
	dir := filepath.Join(os.TempDir(), "wsfleet-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	port, f, err := reservePort(dir, lo, hi, lo+rand.IntN(hi-lo))
	if err != nil {
		return 0, err
	}
	portAlloc.held = append(portAlloc.held, f)
	return port, nil
}

// reservePort scans [lo, hi) from start (wrapping) for a port whose lock it
// can take and that it can bind; it returns the port and its locked file.
func reservePort(dir string, lo, hi, start int) (int, *os.File, error) {
	for i := 0; i < hi-lo; i++ {
		port := lo + (start-lo+i)%(hi-lo)
		f, err := lockPort(dir, port)
		if err != nil {
			continue // another process holds it (or the file cannot be made)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			f.Close() // bound by something that does not take our locks
			continue
		}
		l.Close()
		return port, f, nil
	}
	return 0, nil, fmt.Errorf("free port: every port in [%d, %d) is taken", lo, hi)
}

func lockPort(dir string, port int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// kernelPort asks the kernel for a free port (racy; the fallback only).
func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
