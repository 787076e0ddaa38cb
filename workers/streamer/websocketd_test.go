package streamer

// End-to-end against a source we did not write: Debian's websocketd serving
// testdata/realsource.sh (one process per connection, seq-numbered JSON lines,
// resume by ?from=N; its other modes play real sources' protocols:
// sources_test.go). `make tools-websocketd` installs it.

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/shared/spec/spectest"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// websocketd runs Debian's websocketd on a fixed loopback port; Kill and
// Start play a source that crashes and comes back.
type websocketd struct {
	t      *testing.T
	port   int
	log    *syncBuffer
	cmd    *exec.Cmd
	script string   // under testdata
	flags  []string // more websocketd flags
}

func startWebsocketd(t *testing.T) *websocketd { return startWebsocketdScript(t, "realsource.sh") }

// startWebsocketdScript serves testdata/script with websocketd and flags.
func startWebsocketdScript(t *testing.T, script string, flags ...string) *websocketd {
	t.Helper()
	if _, err := exec.LookPath("websocketd"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("websocketd required under CI=true (make tools-websocketd): %v", err)
		}
		t.Skipf("websocketd not installed (make tools-websocketd): %v", err)
	}
	port, err := enginetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	d := &websocketd{t: t, port: port, log: &syncBuffer{}, script: script, flags: flags}
	d.start()
	t.Cleanup(d.kill)
	return d
}

func (d *websocketd) start() {
	d.t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", d.script))
	if err != nil {
		d.t.Fatal(err)
	}
	args := append([]string{"--address=127.0.0.1", "--port=" + strconv.Itoa(d.port), "--loglevel=access"}, d.flags...)
	d.cmd = exec.Command("websocketd", append(args, script)...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", d.addr(), 100*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("websocketd not listening: %v\n%s", err, d.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends websocketd and its scripts at once (its process group).
func (d *websocketd) kill() {
	if d.cmd == nil {
		return
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
	_ = d.cmd.Wait()
	d.cmd = nil
}

func (d *websocketd) addr() string { return "127.0.0.1:" + strconv.Itoa(d.port) }

// wsObserver is a TCP proxy in front of a source that records every
// connection the way testkit/feed does (open; the server's close frame; the end
// of the TCP connection), so the one-connection check applies to sources we
// did not write. Each TCP connection is one WebSocket (the worker never
// reuses one).
type wsObserver struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []*feed.ConnRecord
	open   map[net.Conn]bool
	closed bool
}

func newObserver(t *testing.T, target string) *wsObserver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &wsObserver{ln: ln, target: target, open: map[net.Conn]bool{}}
	o.wg.Go(o.accept)
	t.Cleanup(o.close)
	return o
}

func (o *wsObserver) url() string { return "ws://" + o.ln.Addr().String() + "/" }

func (o *wsObserver) accept() {
	for {
		c, err := o.ln.Accept()
		if err != nil {
			return
		}
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			c.Close()
			return
		}
		rec := &feed.ConnRecord{ID: int64(len(o.conns) + 1), OpenedAt: time.Now(), ClientCode: -1}
		o.conns = append(o.conns, rec)
		o.open[c] = true
		o.mu.Unlock()
		o.wg.Go(func() { o.serve(c, rec) })
	}
}

func (o *wsObserver) serve(c net.Conn, rec *feed.ConnRecord) {
	defer func() {
		o.mu.Lock()
		noteEnd(rec)
		delete(o.open, c)
		o.mu.Unlock()
		c.Close()
	}()
	s, err := net.DialTimeout("tcp", o.target, time.Second)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { o.fromServer(c, s, rec); done <- struct{}{} }()
	<-done
	o.mu.Lock()
	noteEnd(rec)
	o.mu.Unlock()
	c.Close()
	s.Close()
	<-done
}

// noteEnd notes the end of rec's TCP connection (o.mu held).
func noteEnd(rec *feed.ConnRecord) {
	if rec.EndedAt.IsZero() {
		rec.EndedAt = time.Now()
	}
	if rec.ClosedAt.IsZero() {
		rec.ClosedAt = rec.EndedAt
	}
}

// fromServer copies server → client, parsing the (unmasked) frames after
// the HTTP response to note the server's close frame.
func (o *wsObserver) fromServer(c, s net.Conn, rec *feed.ConnRecord) {
	buf := make([]byte, 32<<10)
	var hdr []byte
	inHTTP, skip := true, int64(0)
	var httpTail []byte
	for {
		n, err := s.Read(buf)
		if n > 0 {
			p := buf[:n]
			if _, werr := c.Write(p); werr != nil {
				return
			}
			if inHTTP {
				httpTail = append(httpTail, p...)
				i := indexCRLF2(httpTail)
				if i < 0 {
					continue
				}
				inHTTP = false
				p = httpTail[i+4:]
			}
			for len(p) > 0 {
				if skip > 0 {
					k := min(skip, int64(len(p)))
					skip -= k
					p = p[k:]
					continue
				}
				hdr = append(hdr, p[0])
				p = p[1:]
				need := 2
				if len(hdr) >= 2 {
					switch hdr[1] & 0x7f {
					case 126:
						need = 4
					case 127:
						need = 10
					}
				}
				if len(hdr) < need {
					continue
				}
				if hdr[0]&0x0f == 0x8 {
					o.mu.Lock()
					if rec.ClosedAt.IsZero() {
						rec.ClosedAt = time.Now()
					}
					o.mu.Unlock()
				}
				switch hdr[1] & 0x7f {
				case 126:
					skip = int64(hdr[2])<<8 | int64(hdr[3])
				case 127:
					for _, b := range hdr[2:10] {
						skip = skip<<8 | int64(b)
					}
				default:
					skip = int64(hdr[1] & 0x7f)
				}
				hdr = hdr[:0]
			}
		}
		if err != nil {
			return
		}
	}
}

func indexCRLF2(b []byte) int {
	for i := 0; i+3 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' && b[i+2] == '\r' && b[i+3] == '\n' {
			return i
		}
	}
	return -1
}

func (o *wsObserver) records() []feed.ConnRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]feed.ConnRecord, len(o.conns))
	for i, r := range o.conns {
		out[i] = *r
	}
	return out
}

func (o *wsObserver) close() {
	o.mu.Lock()
	o.closed = true
	for c := range o.open {
		c.Close()
	}
	o.mu.Unlock()
	o.ln.Close()
	o.wg.Wait()
}

func TestWebsocketdEndToEnd(t *testing.T) {
	e := newEnv(t)
	wsd := startWebsocketd(t)
	obs := newObserver(t, wsd.addr())
	a := e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	id := e.session(func(it *lease.Item) {
		spectest.Edit(t, &it.Spec, func(s *spec.Spec) { s.WSURL, s.Headers = obs.url()+"?key=secret", nil })
	})
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second, "messages from websocketd", func() bool { return e.sink.count(id) >= 20 })
	if first := e.sink.get(id)[0].seq; first != 1 {
		t.Fatalf("first seq %d, want 1 (no checkpoint: the script starts at 1)", first)
	}

	survivesRestartAndHandOff(t, e, wsd, obs, a, id)
}

// survivesRestartAndHandOff plays the source crashing and coming back (the
// session reconnects and resumes), then a graceful hand-off of the session
// from worker a to a new one (which resumes from the released checkpoint).
// The deliveries stay contiguous and the source never sees two
// connections at once.
func survivesRestartAndHandOff(t *testing.T, e *env, wsd *websocketd, obs *wsObserver, a *testWorker, id string) {
	t.Helper()
	wsd.kill()
	n := e.sink.count(id)
	time.Sleep(100 * time.Millisecond)
	wsd.start()
	testwait.Eventually(t, 5*time.Second, "messages after websocketd restarted", func() bool { return e.sink.count(id) >= n+20 })

	b := e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	a.stop()
	testwait.Eventually(t, handoffBound+slack, "b's messages", func() bool { return len(byWorker(e.sink.get(id), b.ID())) >= 20 })

	contiguous(t, e.sink.get(id))
	recs := obs.records()
	if err := feed.NoOverlap(recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) < 3 {
		t.Fatalf("%d connections, want at least 3 (start, after the restart, after the hand-off)", len(recs))
	}
}
