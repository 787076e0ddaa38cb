package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/cmdmain"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

// TestMain lets a test run this package's process (start, as main runs it)
// in a child: the test binary re-executed with STREAMER_TEST_MAIN=1, on a
// memstore holding one session on $STREAMER_TEST_URL.
func TestMain(m *testing.M) {
	if os.Getenv("STREAMER_TEST_MAIN") == "1" {
		cmdmain.Run("streamer", func(ctx context.Context) error {
			return start(ctx, nil, os.Environ(), memBackends(os.Getenv("STREAMER_TEST_URL")), os.Stdout, os.Stderr)
		})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// silentSource accepts WebSockets and then never reads: it answers neither
// pings nor a close handshake, so a graceful close waits its full grace.
func silentSource(t *testing.T) string {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		<-stop
		c.CloseNow()
	}))
	t.Cleanup(func() { close(stop); srv.CloseClientConnections(); srv.Close(); wg.Wait() })
	return "ws" + strings.TrimPrefix(srv.URL, "http") + "/feed"
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := enginetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// child starts the process in a child with one memory-store session on
// url; it returns once the session is connected.
func child(t *testing.T, url string, env ...string) (*exec.Cmd, <-chan error) {
	t.Helper()
	admin := freeAddr(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append([]string{"STREAMER_TEST_MAIN=1", "STREAMER_TEST_URL=" + url, "WSFLEET_ADMIN_ADDR=" + admin, "WSFLEET_SINK=discard",
		"WSFLEET_LOG_LEVEL=warn", "WSFLEET_PING_EVERY=0", "WSFLEET_ALLOW_PRIVATE_IPS=loopback"}, env...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() { done <- cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + admin + "/status")
		if err == nil {
			var b strings.Builder
			buf := make([]byte, 4096)
			n, _ := resp.Body.Read(buf)
			b.Write(buf[:n])
			resp.Body.Close()
			if strings.Contains(b.String(), `"connected": true`) {
				return cmd, done
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the child's session never connected")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestFirstSignalDrainsSecondSignalExitsAtOnce(t *testing.T) {
	// A close handshake the source never answers: the drain takes the full
	// close grace (20 s), unless a second signal ends the process.
	cmd, done := child(t, silentSource(t), "WSFLEET_CLOSE_GRACE=20s", "WSFLEET_SHUTDOWN_DEADLINE=30s")
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		t.Fatalf("exited on the first signal while draining: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	second := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Fatalf("second signal: %v, want death by SIGTERM", err)
		}
		t.Logf("exited %s after the second signal", time.Since(second).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("still running 5 s after the second signal")
	}
}

func TestOneSignalIsACleanExit(t *testing.T) {
	src := silentSource(t)
	cmd, done := child(t, src, "WSFLEET_CLOSE_GRACE=200ms", "WSFLEET_SHUTDOWN_DEADLINE=5s")
	start := time.Now()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("took %s", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}
