package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
	streamer "github.com/wsfleet/wsfleet/workers/streamer"
	"github.com/wsfleet/wsfleet/workers/streamer/envconfig"
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

// memBackends is a memstore holding one STARTED session per url (ids
// mem-0, mem-1, …) and no work queue: main's wiring without DynamoDB.
func memBackends(urls ...string) backends {
	return func(envconfig.Config, func() (aws.Config, error)) (lease.Store, streamer.WorkQueue, error) {
		st := memstore.New()
		for i, u := range urls {
			stored, err := spec.Spec{WSURL: u}.Stored()
			if err != nil {
				return nil, nil, err
			}
			st.Put(lease.Item{ConnectionID: fmt.Sprintf("mem-%d", i), DesiredState: schema.StateStarted, Spec: stored,
				Generation: 1, LastSeq: lease.NoSeq})
		}
		return st, nil, nil
	}
}

func TestRunRejectsBadArgumentsAndConfig(t *testing.T) {
	var stderr bytes.Buffer
	for _, tc := range []struct {
		args    []string
		environ []string
		want    []string
	}{
		{[]string{"--store=memory"}, nil, []string{"unexpected arguments"}},
		{nil, []string{schema.EnvSink + "=kafka"}, []string{schema.EnvSink}},
		// Every unknown name at once, with the other problems, and never a value.
		{nil, []string{"WSFLEET_LEASE_TT=10s", "WSFLEET_MAX_SESION=5", schema.EnvLogLevel + "=loud", "WSFLEET_SIGNING_SECRET=secret.example"}, []string{
			"unknown variable WSFLEET_LEASE_TT (did you mean WSFLEET_LEASE_TTL?)",
			"unknown variable WSFLEET_MAX_SESION (did you mean WSFLEET_MAX_SESSIONS?)",
			"unknown variable WSFLEET_SIGNING_SECRET", schema.EnvLogLevel,
		}},
	} {
		err := run(context.Background(), tc.args, tc.environ, memBackends(), io.Discard, &stderr)
		if err == nil {
			t.Fatalf("%q %q accepted", tc.args, tc.environ)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q %q: error lacks %q: %v", tc.args, tc.environ, w, err)
			}
		}
		if strings.Contains(err.Error(), "secret.example") {
			t.Errorf("a value in the error: %v", err)
		}
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	environ := []string{schema.EnvAdminAddr + "=127.0.0.1:0", schema.EnvSink + "=discard",
		schema.EnvRepoRoot + "=/repo"} // a tool variable (the Makefile exports it) is no error
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr bytes.Buffer
	if err := run(ctx, nil, environ, memBackends("ws://127.0.0.1:1/feed/x"), io.Discard, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "worker stopped") {
		t.Fatalf("logs:\n%s", stderr.String())
	}
}
