package enginetest

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requireDynalite fails (under CI=true) or skips the test when dynalite is
// not installed.
func requireDynalite(t *testing.T) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root + "/node_modules/dynalite"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("dynalite not installed: %v", err)
		}
		t.Skip("dynalite not installed (make deps)")
	}
}

// An engine can be paused (its port bound, nothing answering), resumed,
// killed and started again on the same port, as the chaos harness does.
func TestEnginePausedKilledAndStartedAgain(t *testing.T) {
	requireDynalite(t)
	p, err := StartDynalite(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	// answers sends a request and reads the answer within wait.
	answers := func(wait time.Duration) error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p.Port), time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(wait))
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			return err
		}
		_, err = http.ReadResponse(bufio.NewReader(c), nil)
		return err
	}
	if err := answers(5 * time.Second); err != nil {
		t.Fatalf("started: %v", err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := answers(300 * time.Millisecond); err == nil {
		t.Fatal("a paused engine answered")
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	pid := p.Pid()
	p.Kill()
	if p.Running() || answers(time.Second) == nil {
		t.Fatal("a killed engine still runs or answers")
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := answers(5 * time.Second); err != nil || p.Pid() == pid {
		t.Fatalf("started again: pid %d (was %d): %v", p.Pid(), pid, err)
	}
}

// A client that resets its connection in the middle of a request (a Go
// client whose deadline fired) must not take dynalite down: dynalite 4.0.0's
// own CLI dies of it ("Error: aborted", ECONNRESET), which once failed CI.
func TestDynaliteSurvivesAClientAbortingARequest(t *testing.T) {
	requireDynalite(t)
	p, err := StartDynalite(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	addr := "127.0.0.1:" + strconv.Itoa(p.Port)
	for i := 0; i < 5; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// Headers and part of the body, then a reset (SO_LINGER 0).
		if _, err := c.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: 100\r\n\r\n{\"Lim")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		_ = c.(*net.TCPConn).SetLinger(0)
		_ = c.Close()
	}
	// It still answers (after the aborted requests: it handles them first).
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dynalite no longer listening: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	body := "{}"
	req := "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer after the aborted requests: %v", err)
	}
	defer resp.Body.Close()
	// Unsigned, so DynamoDB's answer is an auth error: any HTTP answer shows
	// the server is alive.
	if resp.StatusCode == 0 || !strings.HasPrefix(resp.Proto, "HTTP/1") {
		t.Fatalf("answer %v", resp.Status)
	}
	if !p.Running() {
		t.Fatalf("dynalite exited after a client aborted a request (log: %s)", p.LogPath())
	}
}
