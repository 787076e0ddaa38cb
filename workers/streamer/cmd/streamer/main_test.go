package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/schema"
)

func TestHealthURL(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8081":   "http://127.0.0.1:8081/healthz",
		":9000":          "http://127.0.0.1:9000/healthz",
		"127.0.0.1:8081": "http://127.0.0.1:8081/healthz",
		"[::]:8081":      "http://127.0.0.1:8081/healthz",
	} {
		if got, err := healthURL(addr); err != nil || got != want {
			t.Errorf("healthURL(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	for _, bad := range []string{"8081", "127.0.0.1:0"} {
		if _, err := healthURL(bad); err == nil {
			t.Errorf("healthURL(%q) accepted", bad)
		}
	}
}

func TestHealthcheckExitCode(t *testing.T) {
	code := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(code)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	lookup := func(k string) (string, bool) {
		if k == schema.EnvAdminAddr {
			return "0.0.0.0:" + port, true
		}
		return "", false
	}
	if got := healthcheck(lookup, io.Discard); got != 0 {
		t.Fatalf("healthy: exit %d", got)
	}
	code = http.StatusServiceUnavailable
	if got := healthcheck(lookup, io.Discard); got != 1 {
		t.Fatalf("unhealthy: exit %d", got)
	}
	srv.Close()
	if got := healthcheck(lookup, io.Discard); got != 1 {
		t.Fatalf("down: exit %d", got)
	}
}

func TestRunRejectsBadFlagsAndConfig(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"--store=redis"}, none, io.Discard, &stderr); err == nil {
		t.Fatal("unknown store accepted")
	}
	bad := func(k string) (string, bool) {
		if k == schema.EnvSink {
			return "kafka", true
		}
		return "", false
	}
	if err := run(context.Background(), nil, bad, io.Discard, &stderr); err == nil || !strings.Contains(err.Error(), schema.EnvSink) {
		t.Fatalf("bad sink: %v", err)
	}
	if err := run(context.Background(), []string{"--store=memory", "--memory-sessions=2"}, none, io.Discard, &stderr); err == nil {
		t.Fatal("memory sessions without URLs accepted")
	}
}

func TestRunMemoryModeStopsOnCancel(t *testing.T) {
	lookup := func(k string) (string, bool) {
		switch k {
		case schema.EnvAdminAddr:
			return "127.0.0.1:0", true
		case schema.EnvSink:
			return "discard", true
		}
		return "", false
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr bytes.Buffer
	if err := run(ctx, []string{"--store=memory", "--memory-sessions=1", "--memory-urls=ws://127.0.0.1:1/feed/{id}"}, lookup, io.Discard, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "worker stopped") {
		t.Fatalf("logs:\n%s", stderr.String())
	}
}
