package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/testenv"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, enginetest.Needs{Dynamo: true, SQS: true}))
}

// TestRunServesUntilCancelled runs the command as the local stack would
// (creating its table and queue), starts a session over real HTTP, and stops
// it cleanly on cancel.
func TestRunServesUntilCancelled(t *testing.T) {
	opts := []goleak.Option{goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait")}
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
	enginetest.Require(t)
	t.Setenv(schema.EnvTableName, testenv.Name(t))
	t.Setenv(schema.EnvQueueURL, "")
	t.Setenv(schema.EnvAllowPrivateIPs, "loopback")
	port, err := enginetest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-port", strconv.Itoa(port), "-create-table", "-create-queue", testenv.Name(t)})
	}()
	tr := &http.Transport{}
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	var resp *http.Response
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err = c.Post(base+"/sessions", "application/json", strings.NewReader(`{"connection_id":"local-1","ws_url":"ws://127.0.0.1:9000/feed"}`))
		if err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("front not up: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	if resp.StatusCode != 202 || body["generation"] != 1.0 || body["notified"] != true {
		t.Fatalf("start through ingest-local: %d %s", resp.StatusCode, b)
	}
	tr.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

// serve returns the server's error when it cannot serve, instead of
// waiting for a cancel that would never come.
func TestServeReturnsListenerErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := serve(context.Background(), ln, http.NotFoundHandler(), time.Second); err == nil {
		t.Fatal("serve on a closed listener returned nil")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	if err := run(context.Background(), []string{"-port", "x"}); err == nil {
		t.Fatal("accepted -port x")
	}
}

// A misspelt variable stops the command before it creates its table.
func TestRunRefusesUnknownVariablesFirst(t *testing.T) {
	enginetest.Require(t)
	table := testenv.Name(t)
	t.Setenv(schema.EnvTableName, table)
	t.Setenv("WSFLEET_ALLOWED_HOST", "a.example.com")
	err := run(context.Background(), []string{"-port", "0", "-create-table"})
	if err == nil || !strings.Contains(err.Error(), "unknown variable WSFLEET_ALLOWED_HOST (did you mean WSFLEET_ALLOWED_HOSTS?)") {
		t.Fatalf("run: %v", err)
	}
	_, err = dynamodb.NewFromConfig(testenv.Config(t)).DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: &table})
	var missing *types.ResourceNotFoundException
	if !errors.As(err, &missing) {
		t.Fatalf("table %s after the refused start: %v, want not found", table, err)
	}
}
