package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/testenv"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/syncbuf"
)

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, enginetest.Needs{Dynamo: true, SQS: true}))
}

// findRIE returns the Runtime Interface Emulator: $WSFLEET_ROOT/bin (where
// `make tools-rie` installs it) or PATH. Under CI=true its absence fails.
func findRIE(t *testing.T) string {
	t.Helper()
	root, err := enginetest.RepoRoot()
	if err == nil {
		p := filepath.Join(root, "bin", "aws-lambda-rie")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("aws-lambda-rie not found in %s/bin or on PATH (run `make tools-rie`)", root)
	}
	t.Skip("aws-lambda-rie not installed (run `make tools-rie`)")
	return ""
}

// buildBootstrap builds this package as the Lambda's bootstrap, as
// `make build-ingest` does (for the host architecture).
func buildBootstrap(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bootstrap")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go toolchain: %v", err)
	}
	cmd := exec.Command(goBin, "build", "-tags", "lambda.norpc", "-trimpath", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build bootstrap: %v\n%s", err, b)
	}
	return out
}

type lockedBuffer = syncbuf.Buffer

// rie is one emulator process running bootstrap. Invokes are serialized: the
// emulator crashes on concurrent ones.
type rie struct {
	url    string
	output *lockedBuffer
	client *http.Client
	mu     sync.Mutex
}

func startRIE(t *testing.T, rieBin, bootstrap string, env []string) *rie {
	t.Helper()
	apiPort, err := enginetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	runtimePort, err := enginetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(apiPort)
	cmd := exec.Command(rieBin,
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(runtimePort),
		bootstrap)
	cmd.Env = append(os.Environ(), env...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start rie: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			t.Fatalf("rie exited before listening:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("rie not listening on %s after 10s:\n%s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &rie{url: "http://" + addr + "/2015-03-31/functions/function/invocations", output: out,
		client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// invoke sends one event fixture and decodes the handler's API Gateway response.
func (r *rie) invoke(t *testing.T, fixture string) (events.APIGatewayV2HTTPResponse, map[string]any) {
	t.Helper()
	ev, err := os.ReadFile(filepath.Join("testdata", "events", fixture))
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	resp, err := r.client.Post(r.url, "application/json", bytes.NewReader(ev))
	if err != nil {
		t.Fatalf("invoke %s: %v\n%s", fixture, err, r.output.String())
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var fnErr struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if json.Unmarshal(raw, &fnErr) == nil && fnErr.ErrorMessage != "" {
		t.Fatalf("invoke %s: function error %s: %s\n%s", fixture, fnErr.ErrorType, fnErr.ErrorMessage, r.output.String())
	}
	var out events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("invoke %s: response %q: %v", fixture, raw, err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(out.Body), &body); err != nil {
		t.Fatalf("invoke %s: body %q: %v", fixture, out.Body, err)
	}
	return out, body
}

func nextNote(t *testing.T, e *testenv.Env) notify.Notification {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		msgs, err := e.Queue.Receive(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 {
			if msgs[0].Err != nil {
				t.Fatalf("message %q: %v", msgs[0].Body, msgs[0].Err)
			}
			if err := e.Queue.Delete(ctx, msgs[0]); err != nil {
				t.Fatal(err)
			}
			return msgs[0].Notification
		}
	}
	t.Fatal(errors.New("no notification"))
	return notify.Notification{}
}

// TestBootstrapUnderRIE runs the built bootstrap under the Lambda Runtime
// Interface Emulator and drives start, status, list and stop with the event
// fixtures of testdata/events (the same files `sam local invoke -e` takes).
func TestBootstrapUnderRIE(t *testing.T) {
	leakOpts := []goleak.Option{goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait")}
	t.Cleanup(func() { goleak.VerifyNone(t, leakOpts...) })
	rieBin := findRIE(t)
	e := testenv.New(t)
	bootstrap := buildBootstrap(t)
	r := startRIE(t, rieBin, bootstrap, []string{
		schema.EnvTableName + "=" + e.Table,
		schema.EnvQueueURL + "=" + e.QueueURL,
		schema.EnvEnvironment + "=rie",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30",
	})

	resp, body := r.invoke(t, "start.json")
	if resp.StatusCode != 202 || body["connection_id"] != "fixture-conn-1" || body["desired_state"] != "STARTED" ||
		body["generation"] != 1.0 || body["outcome"] != "created" || body["notified"] != true {
		t.Fatalf("start: %d %v", resp.StatusCode, body)
	}
	if n := nextNote(t, e); n.Type != schema.NotifyStart || n.ConnectionID != "fixture-conn-1" || n.Generation != 1 {
		t.Fatalf("start notification %+v", n)
	}
	if resp, body = r.invoke(t, "start.json"); resp.StatusCode != 202 || body["generation"] != 1.0 || body["outcome"] != "unchanged" {
		t.Fatalf("repeat start: %d %v", resp.StatusCode, body)
	}
	nextNote(t, e)

	resp, body = r.invoke(t, "status.json")
	if resp.StatusCode != 200 || body["desired_state"] != "STARTED" || body["ws_url"] != "wss://stream.example.com/v1/feed?token=REDACTED" ||
		body["generation"] != 1.0 || body["resume_query_param"] != "from_seq" || body["lease_owner"] != "" || body["last_seq"] != nil {
		t.Fatalf("status: %d %v", resp.StatusCode, body)
	}
	if strings.Contains(resp.Body, "fixture-secret") || strings.Contains(resp.Body, "fixture-header-secret") {
		t.Fatalf("status leaks a secret: %s", resp.Body)
	}

	if resp, body = r.invoke(t, "start-new-url.json"); resp.StatusCode != 202 || body["generation"] != 2.0 || body["outcome"] != "updated" {
		t.Fatalf("failover start: %d %v", resp.StatusCode, body)
	}
	if n := nextNote(t, e); n.Generation != 2 {
		t.Fatalf("failover notification %+v", n)
	}
	resp, body = r.invoke(t, "start-invalid.json")
	if errBody, _ := body["error"].(map[string]any); resp.StatusCode != 400 || errBody["code"] != "address_not_allowed" {
		t.Fatalf("invalid start: %d %v", resp.StatusCode, body)
	}
	resp, body = r.invoke(t, "list.json")
	if list, _ := body["sessions"].([]any); resp.StatusCode != 200 || len(list) != 1 {
		t.Fatalf("list: %d %v", resp.StatusCode, body)
	}

	resp, body = r.invoke(t, "stop.json")
	if resp.StatusCode != 202 || body["desired_state"] != "STOPPED" || body["connection_id"] != "fixture-conn-1" || body["outcome"] != "stopped" {
		t.Fatalf("stop: %d %v", resp.StatusCode, body)
	}
	if n := nextNote(t, e); n.Type != schema.NotifyStop || n.Generation != 2 {
		t.Fatalf("stop notification %+v", n)
	}
	if resp, body = r.invoke(t, "stop.json"); resp.StatusCode != 202 || body["outcome"] != "unchanged" {
		t.Fatalf("stop again: %d %v", resp.StatusCode, body)
	}
	if resp, body = r.invoke(t, "status.json"); resp.StatusCode != 200 || body["desired_state"] != "STOPPED" || body["generation"] != 2.0 {
		t.Fatalf("status after stop: %d %v", resp.StatusCode, body)
	}

	// The function's stdout (through the emulator) holds the request log
	// lines with API Gateway's request id and the EMF lines, and no secret.
	out := r.output.String()
	for _, want := range []string{`"request_id":"fixture-start"`, `"aws_request_id":"`, `"connection_id":"fixture-conn-1"`, `"_aws":{`,
		`"Service":"ingest"`, `"Environment":"rie"`, `"Starts":1`, `"Stops":1`, `"Code":"address_not_allowed"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("function output lacks %s:\n%s", want, out)
		}
	}
	for _, secret := range []string{"fixture-secret", "fixture-header-secret"} {
		if strings.Contains(out, secret) {
			t.Fatalf("function output leaks %q", secret)
		}
	}
}
