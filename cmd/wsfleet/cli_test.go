package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionapi"
	"github.com/wsfleet/wsfleet/shared/spec"
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
	case r.Method == http.MethodPost && r.URL.Path == "/sessions/b/stop":
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"connection_id":"b","desired_state":"STOPPED","generation":1,"outcome":"stopped","notified":true,"owner":"worker-1","owner_notified":true}`))
	case r.Method == http.MethodGet && r.URL.Path == "/workers":
		now := time.Now().UnixMilli()
		_ = json.NewEncoder(w).Encode(apiclient.Workers{Limit: 1000, Workers: []apiclient.Worker{
			{ID: "worker-1", State: "ALIVE", List: "ALIVE", Epoch: 1, Load: 812, Capacity: 1000, AdminAddr: "10.0.3.17:8081", HeartbeatAtMs: now - 400, StartedAtMs: now - 3_600_000},
			{ID: "worker-2", State: "DEAD", List: "GONE", Epoch: 2, Load: 640, Capacity: 1000, HeartbeatAtMs: now - 20_000, StartedAtMs: now - 7_200_000, EndedAtMs: now - 9_000, DeclaredDeadBy: "worker-1"},
			{ID: "worker-3", State: "LEFT", List: "DONE", Epoch: 1, Capacity: 1000, HeartbeatAtMs: now - 120_000, StartedAtMs: now - 9_000_000, EndedAtMs: now - 119_000},
		}})
	case r.Method == http.MethodPost && r.URL.Path == "/sessions/missing/stop":
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no such session"}}`))
	case r.Method == http.MethodGet && r.URL.Path == "/sessions" && r.URL.Query().Get("state") == "STOPPED":
		_ = json.NewEncoder(w).Encode(apiclient.Page{Sessions: []apiclient.Session{{ConnectionID: "c", DesiredState: "STOPPED"}}})
	case r.Method == http.MethodGet && r.URL.Path == "/sessions":
		if r.URL.Query().Get("next") == "" {
			_ = json.NewEncoder(w).Encode(apiclient.Page{Sessions: []apiclient.Session{{ConnectionID: "b", DesiredState: "STARTED", LeaseOwner: "worker-1", LeaseEpoch: 3, LastSeq: &seq}}, Next: "p2"})
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
	if err := run("start", "ws://127.0.0.1:1/feed/a", "--id", "a", "--resume-param", "from", "--header", "X-K=v", "--checkpoint-every", "30s"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "a STARTED") {
		t.Fatalf("start output %q", out.String())
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(f.body[0]), &body); err != nil {
		t.Fatal(err)
	}
	if body["connection_id"] != "a" || body["ws_url"] != "ws://127.0.0.1:1/feed/a" || body["resume_query_param"] != "from" || body["headers"].(map[string]any)["X-K"] != "v" || body["checkpoint_every"] != "30s" {
		t.Fatalf("start body %v", body)
	}
	if f.reqs[0].Header.Get("Authorization") != "" {
		t.Fatal("a loopback API got a signed request")
	}
	// The source protocol from a file (it may hold credentials), over the flags.
	src := filepath.Join(t.TempDir(), "source.json")
	if err := os.WriteFile(src, []byte(`{"seq_path":"data.u","open_messages":[{"text":"{\"op\":\"subscribe\"}"}],"app_ping":{"message":"ping","every":"20s"},"resume":{"query_param":"from","value":"last"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run("start", "ws://127.0.0.1:1/feed/c", "--id", "c", "--seq-path", "x", "--source", src); err != nil {
		t.Fatal(err)
	}
	body = nil
	if err := json.Unmarshal([]byte(f.body[1]), &body); err != nil {
		t.Fatal(err)
	}
	if body["seq_path"] != "data.u" || body["open_messages"].([]any)[0].(map[string]any)["text"] != `{"op":"subscribe"}` ||
		body["app_ping"].(map[string]any)["every"] != "20s" || body["resume"].(map[string]any)["value"] != "last" {
		t.Fatalf("start body with --source %v", body)
	}
	if err := os.WriteFile(src, []byte(`{"open_message":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run("start", "ws://127.0.0.1:1/feed/c", "--source", src); err == nil || !strings.Contains(err.Error(), "open_message") {
		t.Fatalf("a misspelt --source field: %v", err)
	}
	if err := run("stop", "b"); err != nil || !strings.Contains(out.String(), "b STOPPED (generation 1, stopped; owner worker-1 told)") {
		t.Fatalf("stop: %v %q", err, out.String())
	}
	err := run("stop", "missing")
	if err == nil || !strings.Contains(err.Error(), "not_found") || !strings.Contains(err.Error(), "no such session") {
		t.Fatalf("stop missing: %v", err)
	}
	if err := run("status"); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, want := range []string{"ID", "OWNER", "EPOCH", "LAST_SEQ", "worker-1", "41", "STOPPED", "3 session(s)"} {
		if !strings.Contains(table, want) {
			t.Errorf("status table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "EXPIRES") || strings.Contains(table, "released") {
		t.Errorf("status table shows a lease expiry:\n%s", table)
	}
	if err := run("workers"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "LOAD/CAP") ||
		!strings.HasPrefix(lines[1], "worker-1") || !strings.Contains(lines[1], "ALIVE") || !strings.Contains(lines[1], "812/1000") ||
		!strings.Contains(lines[1], "00ms ago") || !strings.Contains(lines[1], "10.0.3.17:8081") ||
		!strings.HasPrefix(lines[2], "worker-2") || !strings.Contains(lines[2], "DEAD") || !strings.Contains(lines[2], "9s ago") || !strings.HasSuffix(strings.TrimSpace(lines[2]), "worker-1") ||
		!strings.HasPrefix(lines[3], "worker-3") || !strings.Contains(lines[3], "LEFT") || !strings.Contains(lines[3], "2m0s ago") ||
		lines[4] != "3 worker(s): 1 alive (load 812/1000, imbalance 0.00 = max load ÷ fair share), 1 dead, 1 left" {
		t.Fatalf("workers table:\n%s", out.String())
	}
	if err := run("workers", "extra"); err == nil {
		t.Fatal("workers with an argument accepted")
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

// TestSourceFileNestedTypo: a misspelt key inside an object of a --source
// file is refused before anything is sent, with its path and the field it
// meant, as the API refuses it (issue 42).
func TestSourceFileNestedTypo(t *testing.T) {
	f := &fakeAPI{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	src := filepath.Join(t.TempDir(), "source.json")
	for _, c := range []struct{ file, msg string }{
		{`{"app_ping":{"message":"ping","evry":"20s"}}`, `unknown field "app_ping.evry" (did you mean "app_ping.every"?)`},
		{`{"open_messages":[{"text":"a","wait_fro":{"path":"e","equals":1}}]}`, `unknown field "open_messages[0].wait_fro" (did you mean "open_messages[0].wait_for"?)`},
		{`{"open_mesages":[{"text":"a"}]}`, `unknown field "open_mesages" (did you mean "open_messages"?)`},
	} {
		if err := os.WriteFile(src, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		err := cli(context.Background(), []string{"--api", srv.URL, "start", "ws://127.0.0.1:1/feed/c", "--source", src}, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), "--source "+src+": "+c.msg) {
			t.Errorf("--source %s: %v, want %q", c.file, err, c.msg)
		}
	}
	if len(f.reqs) != 0 {
		t.Fatalf("a refused --source file was sent: %v", f.body)
	}
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
		{ConnectionID: "d", DesiredState: "STARTED", LeaseEpoch: 2,
			Failed: true, LastError: "handshake refused: HTTP 401", LastErrorAt: "2026-11-30T12:00:00Z"},
		{ConnectionID: "e", DesiredState: "STARTED"},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "LAST ERROR") ||
		!strings.Contains(lines[1], "FAILED") ||
		!strings.Contains(lines[1], "handshake refused: HTTP 401 (2026-11-30T12:00:00Z)") ||
		!strings.Contains(lines[2], "STARTED") || !strings.HasSuffix(strings.TrimSpace(lines[2]), "-") {
		t.Fatalf("status table:\n%s", out.String())
	}
}

// An error seen in an earlier tenure (or generation) than the session's
// current one reads as past, naming the epoch (and generation) it was seen
// in; one of the current tenure, and one recorded without them (an item
// written before they were), show as before.
func TestStatusTableMarksPastError(t *testing.T) {
	var out bytes.Buffer
	err := writeTable(&out, []apiclient.Session{
		{ConnectionID: "a", DesiredState: "STARTED", Generation: 1, LeaseEpoch: 4, LastError: "handshake refused: HTTP 400",
			LastErrorAt: "2026-11-30T12:00:00Z", LastErrorGeneration: 1, LastErrorEpoch: 3},
		{ConnectionID: "b", DesiredState: "STARTED", Generation: 3, LeaseEpoch: 4, LastError: "dial: i/o timeout",
			LastErrorGeneration: 2, LastErrorEpoch: 2},
		{ConnectionID: "c", DesiredState: "STARTED", Generation: 2, LeaseEpoch: 4, LastError: "dial: i/o timeout",
			LastErrorGeneration: 2, LastErrorEpoch: 4},
		{ConnectionID: "d", DesiredState: "STARTED", Generation: 2, LeaseEpoch: 4, LastError: "handshake refused: HTTP 400"},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.HasSuffix(strings.TrimSpace(lines[1]), "handshake refused: HTTP 400 (2026-11-30T12:00:00Z) (past, epoch 3)") ||
		!strings.HasSuffix(strings.TrimSpace(lines[2]), "dial: i/o timeout (past, generation 2, epoch 2)") ||
		!strings.HasSuffix(strings.TrimSpace(lines[3]), "dial: i/o timeout") ||
		!strings.HasSuffix(strings.TrimSpace(lines[4]), "handshake refused: HTTP 400") {
		t.Fatalf("status table:\n%s", out.String())
	}
}

func TestWorkersTable(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	var out bytes.Buffer
	err := writeWorkers(&out, apiclient.Workers{Limit: 2, Truncated: true, Imbalance: 1.33, Workers: []apiclient.Worker{
		{ID: "a", State: schema.WorkerAlive, Load: 1, Capacity: 10, FairShare: 1.5, HeartbeatAtMs: now.UnixMilli() + 50, Host: "ip-10-0-1-7", PID: 31337},
		{ID: "b", State: schema.WorkerAlive, Load: 2, Capacity: 10, FairShare: 1.5, MovesPerMin: 4},
		{ID: "c", State: schema.WorkerAlive, Load: 0, Capacity: 10, Draining: true},
		{ID: "d", State: schema.WorkerDead, Load: 4, Capacity: 10, FairShare: 0.33, Draining: true},
		{ID: "e", State: schema.WorkerLeft, Load: 3, Capacity: 10, Draining: true},
	}}, now)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	lines := strings.Split(got, "\n")
	if !strings.Contains(got, "0s ago") || !strings.Contains(got, "5 worker(s): 3 alive (load 3/30, imbalance 1.33 = max load ÷ fair share), 1 dead, 1 left\n(only the first 2 records: there are more)") ||
		!strings.Contains(lines[0], "SHARE") || !strings.Contains(lines[0], "MOVES/MIN") ||
		!strings.Contains(lines[1], " 1.5 ") || !strings.Contains(lines[2], " 4 ") ||
		!strings.Contains(lines[3], "ALIVE (draining)") ||
		!strings.Contains(lines[0], "HOST") || !strings.Contains(lines[0], "PID") || !strings.Contains(lines[1], " ip-10-0-1-7 ") || !strings.Contains(lines[1], " 31337 ") {
		t.Fatalf("workers table:\n%s", got)
	}
	// A dead or left worker shows no load, share or draining flag: they are
	// its last ones, stale.
	for _, l := range lines[4:6] {
		f := strings.Fields(l)
		if len(f) < 5 || (f[1] != schema.WorkerDead && f[1] != schema.WorkerLeft) || f[3] != "-" || f[4] != "-" || strings.Contains(l, "draining") {
			t.Errorf("a gone worker's row: %q", l)
		}
	}
	for ms, want := range map[int64]string{0: "-", 1_800_000_000_000 - 1_234: "1.2s ago", 1_800_000_000_000 - 184_400: "3m4s ago"} {
		if got := ago(ms, now); got != want {
			t.Errorf("ago(%d) = %q, want %q", ms, got, want)
		}
	}
}

// The status table shows, below its rows, a line for each session with a
// hot standby: its worker and epoch with the window, none held yet, or the
// source's refusal at the current generation; none for the others.
func TestStatusTableShowsStandby(t *testing.T) {
	view := spec.View{Standby: &spec.StandbyView{Enabled: true, Window: "30s", WindowBytes: 1 << 20}}
	var out bytes.Buffer
	err := writeTable(&out, []apiclient.Session{
		{ConnectionID: "a", DesiredState: "STARTED", LeaseOwner: "w1", LeaseEpoch: 2, View: view,
			StandbyHolder: &sessionapi.StandbyHolder{WorkerID: "w2", Epoch: 5}},
		{ConnectionID: "b", DesiredState: "STARTED", LeaseOwner: "w1", LeaseEpoch: 1, View: view, StandbyError: "standby's worker died"},
		{ConnectionID: "c", DesiredState: "STARTED", Generation: 2, LeaseOwner: "w1", LeaseEpoch: 1, View: view,
			StandbyRefused: &sessionapi.StandbyRefused{Generation: 2, Error: "second connection closed by the source (kick-older)"}},
		{ConnectionID: "d", DesiredState: "STARTED", LeaseOwner: "w1", LeaseEpoch: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		"standby a: w2, epoch 5 (window 30s, 1048576 bytes)",
		"standby b: none held (window 30s, 1048576 bytes); last error: standby's worker died",
		"standby c: refused by the source at generation 2 (second connection closed by the source (kick-older)); the session goes on without one",
		"4 session(s)",
	}
	if len(lines) != 1+4+len(want) || !slices.Equal(lines[5:], want) {
		t.Fatalf("status table:\n%s\nwant it to end\n%s", out.String(), strings.Join(want, "\n"))
	}
}

// start --standby asks for a standby, with the window flags given; without
// --standby the body has none.
func TestStartStandbyFlags(t *testing.T) {
	f := &fakeAPI{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	for i, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--standby"}, `{"enabled":true}`},
		{[]string{"--standby", "--standby-window", "45s", "--standby-window-bytes", "65536"}, `{"enabled":true,"window":"45s","window_bytes":65536}`},
		{nil, `null`},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"--api", srv.URL, "start", "ws://127.0.0.1:1/feed/a", "--id", "a"}, c.args...)
		if err := cli(context.Background(), args, &out, &errOut); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal([]byte(f.body[i]), &body); err != nil {
			t.Fatal(err)
		}
		if got := string(body["standby"]); got != c.want && !(c.want == "null" && got == "") {
			t.Errorf("%v: standby %s, want %s", c.args, got, c.want)
		}
	}
}
