package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
	"github.com/wsfleet/wsfleet/shared/schema"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeAPI answers like the ingest front and remembers the requests.
type fakeAPI struct {
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.body = append(f.body, string(b))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	seq := int64(41)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/sessions":
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"connection_id":"a","desired_state":"STARTED","generation":1,"outcome":"created","notified":true}`))
	case r.Method == http.MethodPost && r.URL.Path == "/sessions/missing/stop":
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no such session"}}`))
	case r.Method == http.MethodGet && r.URL.Path == "/sessions" && r.URL.Query().Get("state") == "STOPPED":
		_ = json.NewEncoder(w).Encode(apiclient.Page{Sessions: []apiclient.Session{{ConnectionID: "c", DesiredState: "STOPPED"}}})
	case r.Method == http.MethodGet && r.URL.Path == "/sessions":
		if r.URL.Query().Get("next") == "" {
			_ = json.NewEncoder(w).Encode(apiclient.Page{Sessions: []apiclient.Session{{ConnectionID: "b", DesiredState: "STARTED", LeaseOwner: "worker-1", LeaseEpoch: 3, LastSeq: &seq, LeaseExpiresAtMs: time.Now().Add(3 * time.Second).UnixMilli()}}, Next: "p2"})
			return
		}
		_ = json.NewEncoder(w).Encode(apiclient.Page{Sessions: []apiclient.Session{{ConnectionID: "a", DesiredState: "STOPPED"}}})
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no route"}}`))
	}
}

func TestCLIAgainstFakeAPI(t *testing.T) {
	f := &fakeAPI{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	ctx := context.Background()
	var out, errOut bytes.Buffer
	run := func(args ...string) error {
		out.Reset()
		errOut.Reset()
		return cli(ctx, append([]string{"--api", srv.URL}, args...), &out, &errOut)
	}
	if err := run("start", "ws://127.0.0.1:1/feed/a", "--id", "a", "--resume-param", "from", "--header", "X-K=v"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "a STARTED") {
		t.Fatalf("start output %q", out.String())
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(f.body[0]), &body); err != nil {
		t.Fatal(err)
	}
	if body["connection_id"] != "a" || body["ws_url"] != "ws://127.0.0.1:1/feed/a" || body["resume_query_param"] != "from" || body["headers"].(map[string]any)["X-K"] != "v" {
		t.Fatalf("start body %v", body)
	}
	if f.reqs[0].Header.Get("Authorization") != "" {
		t.Fatal("a loopback API got a signed request")
	}
	err := run("stop", "missing")
	if err == nil || !strings.Contains(err.Error(), "not_found") || !strings.Contains(err.Error(), "no such session") {
		t.Fatalf("stop missing: %v", err)
	}
	if err := run("status"); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, want := range []string{"ID", "LEASE EXPIRES IN", "worker-1", "41", "released", "STOPPED", "3 session(s)"} {
		if !strings.Contains(table, want) {
			t.Errorf("status table lacks %q:\n%s", want, table)
		}
	}
	if strings.Index(table, "\na ") > strings.Index(table, "\nb ") {
		t.Errorf("table not sorted by id:\n%s", table)
	}
	if err := run("bogus"); err == nil {
		t.Fatal("unknown command accepted")
	}
	if err := run("status", "--state", "nope"); err == nil {
		t.Fatal("bad state accepted")
	}
	srv.CloseClientConnections()
}

func TestSigV4(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_REGION", "")
	f := &fakeAPI{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	ctx := context.Background()
	// A loopback URL is signed when asked to; the region comes from --region.
	var out, errOut bytes.Buffer
	if err := cli(ctx, []string{"--api", srv.URL, "--sigv4", "on", "--region", "eu-west-1", "start", "wss://example.com/x"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	auth := f.reqs[0].Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-west-1/execute-api/aws4_request") {
		t.Fatalf("authorization %q", auth)
	}
	if f.reqs[0].Header.Get("X-Amz-Date") == "" || f.reqs[0].Header.Get("X-Amz-Content-Sha256") == "" && !strings.Contains(auth, "SignedHeaders=") {
		t.Fatalf("headers %v", f.reqs[0].Header)
	}
	// Without a region anywhere, an execute-api host names it.
	s, err := apiclient.NewSigV4(ctx, "https://abc.execute-api.ap-south-1.amazonaws.com/prod", "")
	if err != nil || s == nil {
		t.Fatalf("region from host: %v", err)
	}
	srv.CloseClientConnections()
}

// A FAILED session reads FAILED, with its last error and when; a session
// without one shows "-".
func TestStatusTableShowsFailedAndLastError(t *testing.T) {
	var out bytes.Buffer
	err := writeTable(&out, []apiclient.Session{
		{ConnectionID: "d", DesiredState: "STARTED", LeaseOwner: "worker-2", LeaseExpiresAtMs: schema.FailedLeaseExpiresAtMs,
			Failed: true, LastError: "handshake refused: HTTP 401", LastErrorAt: "2026-11-30T12:00:00Z"},
		{ConnectionID: "e", DesiredState: "STARTED"},
	}, time.UnixMilli(10_000))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "LAST ERROR") ||
		!strings.Contains(lines[1], "FAILED") || !strings.Contains(lines[1], "never (failed)") ||
		!strings.Contains(lines[1], "handshake refused: HTTP 401 (2026-11-30T12:00:00Z)") ||
		!strings.Contains(lines[2], "STARTED") || !strings.HasSuffix(strings.TrimSpace(lines[2]), "-") {
		t.Fatalf("status table:\n%s", out.String())
	}
}

func TestExpiresIn(t *testing.T) {
	now := time.UnixMilli(10_000)
	for exp, want := range map[int64]string{0: "released", 14_200: "4.2s", 8_700: "expired 1.3s ago", schema.FailedLeaseExpiresAtMs: "never (failed)"} {
		if got := expiresIn(exp, now); got != want {
			t.Errorf("expiresIn(%d) = %q, want %q", exp, got, want)
		}
	}
}
