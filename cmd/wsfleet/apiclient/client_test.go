package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestIsLocalAndURLs(t *testing.T) {
	for api, want := range map[string]bool{
		"http://127.0.0.1:8787": true, "http://localhost:1": true, "http://[::1]:2": true,
		"https://abc.execute-api.us-east-1.amazonaws.com": false, "http://10.0.0.1": false,
	} {
		if apiclient.IsLocal(api) != want {
			t.Errorf("IsLocal(%s) != %v", api, want)
		}
	}
	if _, err := apiclient.NewClient("ftp://x", nil); err == nil {
		t.Error("ftp API accepted")
	}
	c, err := apiclient.NewClient(apiclient.DefaultAPI, nil)
	if err != nil || c.Base() != apiclient.DefaultAPI {
		t.Fatalf("default API: %v, base %q", err, c.Base())
	}
}

// An answer the API marks retryable (the table did not answer in time: the
// outcome is unknown, the same request is safe) is sent again, signed anew,
// up to MaxAttempts times; any other error is returned at once.
func TestRetriesWhatTheAPIMarksRetryable(t *testing.T) {
	var calls atomic.Int32
	fail := 2
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1))
		switch {
		case r.URL.Path == "/sessions/bad/stop":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"code":"invalid_connection_id","message":"no"}}`))
		case n <= fail:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"outcome_unknown","message":"the session table did not answer in time","retryable":true}}`))
		default:
			_, _ = w.Write([]byte(`{"connection_id":"a","desired_state":"STARTED"}`))
		}
	}))
	defer srv.Close()
	c, err := apiclient.NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Start(ctx, apiclient.StartRequest{ConnectionID: "a"}); err != nil || calls.Load() != 3 {
		t.Fatalf("start after two retryable 503s: %v after %d requests, want success after 3", err, calls.Load())
	}
	calls.Store(0)
	fail = apiclient.MaxAttempts + 1
	_, err = c.Start(ctx, apiclient.StartRequest{ConnectionID: "a"})
	var ae *apiclient.APIError
	if !errors.As(err, &ae) || !ae.Retryable || ae.Status != http.StatusServiceUnavailable || calls.Load() != apiclient.MaxAttempts {
		t.Fatalf("start while the table keeps failing: %v after %d requests, want the 503 after %d", err, calls.Load(), apiclient.MaxAttempts)
	}
	calls.Store(int32(apiclient.MaxAttempts + 10))
	before := calls.Load()
	if _, err := c.Stop(ctx, "bad"); !errors.As(err, &ae) || ae.Retryable || calls.Load() != before+1 {
		t.Fatalf("a 400: %v after %d requests, want it at once", err, calls.Load()-before)
	}
	c.CloseIdleConnections()
}
