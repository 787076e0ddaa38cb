package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
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
	if err := healthcheck(lookup); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	code = http.StatusServiceUnavailable
	if err := healthcheck(lookup); err == nil || err.Error() != "healthcheck: HTTP 503" {
		t.Fatalf("unhealthy: %v", err)
	}
	srv.Close()
	if err := healthcheck(lookup); err == nil {
		t.Fatal("down: no error")
	}
	// The subcommand, as main runs it: an error is cmdmain's to print
	// (exit 1), not reported as the worker's JSON exit line.
	var stderr bytes.Buffer
	if err := start(context.Background(), []string{"healthcheck"}, []string{schema.EnvAdminAddr + "=0.0.0.0:" + port}, nil, io.Discard, &stderr); err == nil || !strings.HasPrefix(err.Error(), "healthcheck: ") || stderr.Len() != 0 {
		t.Fatalf("healthcheck subcommand, server down: %v, stderr %q", err, stderr.String())
	}
}

// The worker's stderr is JSON lines: the error it ends with is the last
// one (level error, message exit), and start returns it unchanged.
func TestStartLogsTheExitErrorAsJSON(t *testing.T) {
	var stderr bytes.Buffer
	err := start(context.Background(), nil, []string{schema.EnvMaxSessions + "=0"}, memBackends(), io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), schema.EnvMaxSessions+" must be at least 1") {
		t.Fatalf("start: %v", err)
	}
	var line struct{ Level, Service, Error, Message string }
	if jerr := json.Unmarshal(bytes.TrimSpace(stderr.Bytes()), &line); jerr != nil || line.Level != "error" || line.Service != schema.ServiceStreamer ||
		line.Message != "exit" || line.Error != err.Error() {
		t.Fatalf("stderr %q (%v), want one JSON exit line with %q", stderr.String(), jerr, err)
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

// The worker's two DynamoDB clients: the bulk one keeps the config's
// retryer (its own retry budget), the liveness one has no budget, so
// claims draining the first cannot take the heartbeats' retries
// (shared/awsconfig's fake-endpoint test shows it end to end).
func TestDynamoClientsGiveTheLivenessPathARetryerWithoutBudget(t *testing.T) {
	ac := aws.Config{Region: "us-east-1", Retryer: func() aws.Retryer { return awsconfig.BulkRetryer(3) }}
	cfg := streamer.DefaultConfig()
	bulk, live := dynamoClients(ac, cfg.StoreTimeout)
	br, lr := bulk.Options().Retryer, live.Options().Retryer
	if br.MaxAttempts() != 3 || lr.MaxAttempts() != awsconfig.LivenessMaxAttempts {
		t.Fatalf("max attempts: bulk %d, liveness %d", br.MaxAttempts(), lr.MaxAttempts())
	}
	throttled := &smithy.GenericAPIError{Code: "ThrottlingException"}
	bulkRefused, liveRefused := 0, 0
	for range 1000 {
		if _, err := br.GetRetryToken(context.Background(), throttled); err != nil {
			bulkRefused++
		}
		if _, err := lr.GetRetryToken(context.Background(), throttled); err != nil {
			liveRefused++
		}
	}
	if bulkRefused == 0 || liveRefused != 0 {
		t.Fatalf("of 1,000 throttled retries the bulk client refused %d (want a budget), the liveness client %d (want none)", bulkRefused, liveRefused)
	}
}
