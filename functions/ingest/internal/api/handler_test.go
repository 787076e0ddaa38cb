package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/testkit/syncbuf"
)

// fakeStore answers from fields set by the test.
type fakeStore struct {
	mu       sync.Mutex
	err      error
	panics   bool
	started  []sessions.Desired
	stopped  []string
	session  sessions.Session
	page     sessions.Page
	listArg  [3]string
	result   sessions.Result // Start's and Stop's owner fields
	workers  sessions.WorkerList
	nonces   map[string]time.Time
	nonceErr error
}

func (f *fakeStore) RememberNonce(_ context.Context, nonce string, until time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nonceErr != nil {
		return f.nonceErr
	}
	if _, seen := f.nonces[nonce]; seen {
		return sessions.ErrReplay
	}
	if f.nonces == nil {
		f.nonces = map[string]time.Time{}
	}
	f.nonces[nonce] = until
	return nil
}

func (f *fakeStore) Start(_ context.Context, d sessions.Desired) (sessions.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.panics {
		panic("boom")
	}
	if f.err != nil {
		return sessions.Result{}, f.err
	}
	f.started = append(f.started, d)
	return sessions.Result{Generation: 3, Outcome: sessions.Updated, Owner: f.result.Owner, OwnerNotified: f.result.OwnerNotified, MailboxErr: f.result.MailboxErr}, nil
}

func (f *fakeStore) Stop(_ context.Context, id string) (sessions.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return sessions.Result{}, f.err
	}
	f.stopped = append(f.stopped, id)
	return sessions.Result{Generation: 3, Outcome: sessions.Stopped, Owner: f.result.Owner, OwnerNotified: f.result.OwnerNotified, MailboxErr: f.result.MailboxErr}, nil
}

func (f *fakeStore) Workers(_ context.Context, limit int) (sessions.WorkerList, error) {
	if f.err != nil {
		return sessions.WorkerList{}, f.err
	}
	if limit != sessions.MaxWorkers {
		return sessions.WorkerList{}, fmt.Errorf("limit %d", limit)
	}
	return f.workers, nil
}

func (f *fakeStore) Get(_ context.Context, id string) (sessions.Session, error) {
	if f.err != nil {
		return sessions.Session{}, f.err
	}
	s := f.session
	s.ConnectionID = id
	return s, nil
}

func (f *fakeStore) List(_ context.Context, state string, limit int, cursor string) (sessions.Page, error) {
	f.listArg = [3]string{state, strconv.Itoa(limit), cursor}
	if f.err != nil {
		return sessions.Page{}, f.err
	}
	return f.page, nil
}

type fakeNotifier struct {
	mu   sync.Mutex
	err  error
	sent []notify.Notification
}

func (f *fakeNotifier) Publish(_ context.Context, n notify.Notification) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.sent = append(f.sent, n)
	return nil
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer = syncbuf.Buffer

type fixture struct {
	h       *Handler
	store   *fakeStore
	notif   *fakeNotifier
	logs    *syncBuffer
	metrics *syncBuffer
	clock   *clock.Fake
}

func newFixture(t testing.TB, mutate func(*config.Config)) *fixture {
	t.Helper()
	cfg := config.Default()
	cfg.QueueURL = "http://127.0.0.1:1/000000000000/q"
	cfg.Environment = "test"
	if mutate != nil {
		mutate(&cfg)
	}
	f := &fixture{store: &fakeStore{}, notif: &fakeNotifier{}, logs: &syncBuffer{}, metrics: &syncBuffer{},
		clock: clock.NewFake(time.Unix(1_800_000_000, 0))}
	h, err := New(cfg, Deps{Store: f.store, Nonces: f.store, Notifier: f.notif, Clock: f.clock, Log: zerolog.New(f.logs), Metrics: f.metrics})
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

func event(method, path, body string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: "$default",
		RawPath:  path,
		Headers:  map[string]string{"content-type": "application/json"},
		Body:     body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "req-" + strings.ReplaceAll(path, "/", "_"),
			Stage:     "$default",
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, SourceIP: "203.0.113.9"},
		},
	}
}

// do serves an API Gateway event as Lambda does: through httpadapter.
func (f *fixture) do(t *testing.T, req events.APIGatewayV2HTTPRequest) (int, map[string]any, events.APIGatewayV2HTTPResponse) {
	t.Helper()
	resp, err := f.h.Lambda()(context.Background(), req)
	if err != nil {
		t.Fatalf("the Lambda handler returned an error: %v", err)
	}
	if resp.IsBase64Encoded || len(resp.Cookies) != 0 || len(resp.MultiValueHeaders) != 0 {
		t.Fatalf("response event %+v", resp)
	}
	if resp.Headers["Content-Type"] != "application/json" {
		t.Fatalf("content type %q", resp.Headers["Content-Type"])
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
		t.Fatalf("response body %q: %v", resp.Body, err)
	}
	return resp.StatusCode, body, resp
}

// errorOf checks the error body's exact shape and returns its code.
func errorOf(t *testing.T, body map[string]any) (code, message string) {
	t.Helper()
	if len(body) != 1 {
		t.Fatalf("error body has keys %v, want only \"error\"", body)
	}
	e, ok := body["error"].(map[string]any)
	if !ok {
		t.Fatalf("error body %v", body)
	}
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	if code == "" || message == "" {
		t.Fatalf("error without code or message: %v", e)
	}
	for k := range e {
		if k != "code" && k != "message" && k != "retryable" {
			t.Fatalf("unexpected error key %q", k)
		}
	}
	return code, message
}

func TestHandlerValidationErrorsAre400WithCode(t *testing.T) {
	f := newFixture(t, nil)
	cases := []struct {
		name string
		req  events.APIGatewayV2HTTPRequest
		code string
	}{
		{"content type", func() events.APIGatewayV2HTTPRequest {
			r := event("POST", "/sessions", `{"ws_url":"wss://a.example.com"}`)
			r.Headers["content-type"] = "text/plain"
			return r
		}(), CodeInvalidContentType},
		{"no content type", func() events.APIGatewayV2HTTPRequest {
			r := event("POST", "/sessions", `{"ws_url":"wss://a.example.com"}`)
			delete(r.Headers, "content-type")
			return r
		}(), CodeInvalidContentType},
		{"too large", event("POST", "/sessions", `{"ws_url":"wss://a.example.com","headers":{"X-A":"`+strings.Repeat("a", config.DefaultMaxBodyBytes)+`"}}`), CodeBodyTooLarge},
		{"bad json", event("POST", "/sessions", `{`), CodeInvalidJSON},
		{"unknown field", event("POST", "/sessions", `{"ws_url":"wss://a.example.com","x":1}`), CodeUnknownField},
		{"connection id", event("POST", "/sessions", `{"connection_id":"a b","ws_url":"wss://a.example.com"}`), source.FieldCode("connection_id")},
		{"ws_url", event("POST", "/sessions", `{"ws_url":"https://a.example.com"}`), source.FieldCode("ws_url")},
		{"private ip", event("POST", "/sessions", `{"ws_url":"wss://10.0.0.1/"}`), CodeAddressNotAllowed},
		{"header", event("POST", "/sessions", `{"ws_url":"wss://a.example.com","headers":{"Host":"x"}}`), source.FieldCode("headers")},
		{"seq_field", event("POST", "/sessions", `{"ws_url":"wss://a.example.com","seq_field":"a b"}`), source.FieldCode("seq_field")},
		{"resume param", event("POST", "/sessions", `{"ws_url":"wss://a.example.com","resume_query_param":"a&b"}`), source.FieldCode("resume_query_param")},
		{"standby window", event("POST", "/sessions", `{"ws_url":"wss://a.example.com","standby":{"enabled":true,"window":"1s"}}`), source.FieldCode("standby")},
		{"standby enabled", event("POST", "/sessions", `{"ws_url":"wss://a.example.com","standby":{}}`), source.FieldCode("standby")},
		{"stop body field", event("POST", "/sessions/abc/stop", `{"force":true}`), CodeUnknownField},
		{"stop body content type", func() events.APIGatewayV2HTTPRequest {
			r := event("POST", "/sessions/abc/stop", `{}`)
			r.Headers["content-type"] = "text/plain"
			return r
		}(), CodeInvalidContentType},
		{"path id", event("GET", "/sessions/a%20b", ""), source.FieldCode("connection_id")},
		{"dot path id", event("GET", "/sessions/..", ""), source.FieldCode("connection_id")},
		{"dot stop id", event("POST", "/sessions/./stop", `{}`), source.FieldCode("connection_id")},
		{"list state", func() events.APIGatewayV2HTTPRequest {
			r := event("GET", "/sessions", "")
			r.RawQueryString = "state=bogus"
			return r
		}(), CodeInvalidQuery},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := f.do(t, c.req)
			code, _ := errorOf(t, body)
			if status != http.StatusBadRequest || code != c.code {
				t.Fatalf("got %d %s, want 400 %s", status, code, c.code)
			}
		})
	}
	if len(f.store.started)+len(f.store.stopped) != 0 || len(f.notif.sent) != 0 {
		t.Fatal("a refused request reached the store or the queue")
	}
	// Every refusal was counted, in total and by code.
	emf := f.metrics.String()
	if !strings.Contains(emf, `"Code":"invalid_ws_url"`) || !strings.Contains(emf, `"Rejects":1`) {
		t.Fatalf("per-code rejects missing from EMF:\n%s", emf)
	}
	if got := sumMetric(t, emf, schema.MetricRejects, ""); got != float64(len(cases)) {
		t.Fatalf("total Rejects = %v, want %d", got, len(cases))
	}
}

// TestHandlerNestedUnknownFieldNamesItsPath: a misspelt key inside an
// object (app_ping.evry) is refused with its whole path and the field it
// meant, like a top-level one, not with encoding/json's bare key; nothing
// is stored (issue 42).
func TestHandlerNestedUnknownFieldNamesItsPath(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct{ body, msg string }{
		{`{"ws_url":"wss://a.example.com","app_ping":{"message":"ping","evry":"30s"}}`,
			`unknown field "app_ping.evry" (did you mean "app_ping.every"?)`},
		{`{"ws_url":"wss://a.example.com","open_messages":[{"text":"a"},{"txet":"b"}]}`,
			`unknown field "open_messages[1].txet" (did you mean "open_messages[1].text"?)`},
		{`{"ws_url":"wss://a.example.com","reconnect_on":{"match":{"path":"e","equal":"x"}}}`,
			`unknown field "reconnect_on.match.equal" (did you mean "reconnect_on.match.equals"?)`},
		{`{"ws_url":"wss://a.example.com","resume":{"query_parm":"from"}}`,
			`unknown field "resume.query_parm" (did you mean "resume.query_param"?)`},
	} {
		status, body, _ := f.do(t, event("POST", "/sessions", c.body))
		code, msg := errorOf(t, body)
		if status != http.StatusBadRequest || code != CodeUnknownField || msg != c.msg {
			t.Errorf("%s: got %d %s %q, want 400 %s %q", c.body, status, code, msg, CodeUnknownField, c.msg)
		}
	}
	// Any key goes below a map (header names), whatever it looks like.
	status, _, _ := f.do(t, event("POST", "/sessions", `{"ws_url":"wss://a.example.com","headers":{"evry":"1"}}`))
	if status != http.StatusAccepted {
		t.Fatalf("a header named like a field: %d", status)
	}
	if len(f.store.started) != 1 || len(f.store.stopped) != 0 {
		t.Fatalf("the refused starts reached the store: %d started", len(f.store.started))
	}
	// docs/api.md's Errors section shows the first refusal as it is sent.
	doc, err := os.ReadFile("../../../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := f.do(t, event("POST", "/sessions", `{"ws_url":"wss://a.example.com","app_ping":{"message":"ping","evry":"30s"}}`))
	shown, _ := json.Marshal(body)
	if !strings.Contains(string(doc), string(shown)) {
		t.Errorf("docs/api.md does not show the nested refusal; paste this:\n%s", shown)
	}
}

// sumMetric adds a metric over the EMF lines whose Code dimension is code
// ("" = lines without a Code dimension).
func sumMetric(t *testing.T, emf, name, code string) float64 {
	t.Helper()
	var sum float64
	sc := bufio.NewScanner(strings.NewReader(emf))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("EMF line %q: %v", sc.Text(), err)
		}
		aws, ok := line["_aws"].(map[string]any)
		if !ok {
			t.Fatalf("EMF line without _aws: %s", sc.Text())
		}
		cw := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
		if cw["Namespace"] != schema.DefaultMetricsNamespace {
			t.Fatalf("namespace %v", cw["Namespace"])
		}
		if line[schema.DimService] != schema.ServiceIngest || line[schema.DimEnvironment] != "test" {
			t.Fatalf("dimensions: %s", sc.Text())
		}
		c, _ := line[DimCode].(string)
		if c != code {
			continue
		}
		if v, ok := line[name].(float64); ok {
			sum += v
		}
	}
	return sum
}

func TestHandlerRoutesAndMethods(t *testing.T) {
	f := newFixture(t, nil)
	status, body, _ := f.do(t, event("GET", "/nope", ""))
	if code, _ := errorOf(t, body); status != 404 || code != CodeRouteNotFound {
		t.Fatalf("%d %s", status, code)
	}
	status, body, _ = f.do(t, event("DELETE", "/sessions/abc", ""))
	if code, _ := errorOf(t, body); status != 405 || code != CodeMethodNotAllowed {
		t.Fatalf("%d %s", status, code)
	}
	// A named stage prefixes the raw path.
	req := event("POST", "/prod/sessions/abc/stop", "")
	req.RequestContext.Stage = "prod"
	if status, _, _ := f.do(t, req); status != 202 || len(f.store.stopped) != 1 || f.store.stopped[0] != "abc" {
		t.Fatalf("staged stop: %d %v", status, f.store.stopped)
	}
}

func TestHandlerStartStopStatusList(t *testing.T) {
	f := newFixture(t, nil)
	status, body, _ := f.do(t, event("POST", "/sessions", `{"connection_id":"c1","ws_url":"wss://a.example.com/f?token=t0ps3cret","headers":{"Authorization":"Bearer h3ader-secret"}}`))
	if status != 202 || body["connection_id"] != "c1" || body["desired_state"] != "STARTED" || body["generation"] != 3.0 ||
		body["outcome"] != "updated" || body["notified"] != true || body["owner"] != nil || body["owner_notified"] != nil {
		t.Fatalf("start: %d %v", status, body)
	}
	if n := f.notif.sent[0]; n.Type != schema.NotifyStart || n.ConnectionID != "c1" || n.Generation != 3 || n.SentAtMs != f.clock.Now().UnixMilli() {
		t.Fatalf("notification %+v", n)
	}
	f.store.result = sessions.Result{Owner: "w1", OwnerNotified: true}
	status, body, _ = f.do(t, event("POST", "/sessions/c1/stop", ""))
	if status != 202 || body["desired_state"] != "STOPPED" || body["connection_id"] != "c1" || body["owner"] != "w1" || body["owner_notified"] != true {
		t.Fatalf("stop: %d %v", status, body)
	}
	if n := f.notif.sent[1]; n.Type != schema.NotifyStop || n.ConnectionID != "c1" || n.Generation != 3 {
		t.Fatalf("notification %+v", n)
	}
	last := int64(41)
	f.store.session = sessions.Session{DesiredState: "STARTED", Spec: spec.Spec{WSURL: "wss://a.example.com/f?token=t0ps3cret",
		Headers: map[string]string{"Authorization": "h3ader-secret"}, Settings: spec.Settings{CheckpointEvery: "1m30s"}},
		Generation: 3, LeaseOwner: "w1", LeaseEpoch: 7, LastSeq: &last, UpdatedAtMs: 5}
	status, body, resp := f.do(t, event("GET", "/sessions/c1", ""))
	if status != 200 || body["ws_url"] != "wss://a.example.com/f?token=REDACTED" || body["lease_owner"] != "w1" ||
		body["lease_epoch"] != 7.0 || body["last_seq"] != 41.0 || body["generation"] != 3.0 || body["checkpoint_every"] != "1m30s" ||
		body["updated_at_ms"] != 5.0 || body["desired_state"] != "STARTED" {
		t.Fatalf("status: %d %v", status, body)
	}
	if strings.Contains(resp.Body, "t0ps3cret") || strings.Contains(resp.Body, "h3ader-secret") {
		t.Fatalf("status leaks a secret: %s", resp.Body)
	}
	if strings.Contains(resp.Body, "expires") {
		t.Fatalf("status shows a lease expiry: %s", resp.Body)
	}
	f.store.page = sessions.Page{Sessions: []sessions.Session{f.store.session}, Next: "cur"}
	req := event("GET", "/sessions", "")
	req.RawQueryString = "state=STOPPED&limit=2&next=abc"
	status, body, resp = f.do(t, req)
	if status != 200 || body["next"] != "cur" || len(body["sessions"].([]any)) != 1 || f.store.listArg != [3]string{"STOPPED", "2", "abc"} {
		t.Fatalf("list: %d %v %v", status, body, f.store.listArg)
	}
	if strings.Contains(resp.Body, "t0ps3cret") {
		t.Fatal("list leaks a query value")
	}
	emf := f.metrics.String()
	if sumMetric(t, emf, schema.MetricStarts, "") != 1 || sumMetric(t, emf, schema.MetricStops, "") != 1 {
		t.Fatalf("metrics:\n%s", emf)
	}
}

// A mailbox write that failed (other than the owner being gone) is
// logged and counted; the start still succeeds.
func TestHandlerMailboxFailureStill202(t *testing.T) {
	f := newFixture(t, nil)
	f.store.result = sessions.Result{Owner: "w9", MailboxErr: errors.New("throttled")}
	status, body, _ := f.do(t, event("POST", "/sessions", `{"connection_id":"c1","ws_url":"wss://a.example.com/","checkpoint_every":"5s"}`))
	if status != 202 || body["owner"] != "w9" || body["owner_notified"] != nil {
		t.Fatalf("start: %d %v", status, body)
	}
	if f.store.started[0].Spec.CheckpointInterval() != 5*time.Second {
		t.Fatalf("desired %+v", f.store.started[0])
	}
	if !strings.Contains(f.logs.String(), "mailbox not written") || sumMetric(t, f.metrics.String(), schema.MetricNotifyFailures, "") != 1 {
		t.Fatalf("logs:\n%s\nmetrics:\n%s", f.logs, f.metrics)
	}
}

func TestHandlerWorkers(t *testing.T) {
	f := newFixture(t, nil)
	f.store.workers = sessions.WorkerList{Truncated: true, Workers: []sessions.Worker{
		{ID: "w1", State: "ALIVE", List: "ALIVE", Epoch: 1, Load: 12, Capacity: 1000, AdminAddr: "10.0.0.1:8081", HeartbeatAtMs: 7, StartedAtMs: 3, Host: "ip-10-0-0-1", Pid: 4242},
		{ID: "w0", State: "DEAD", List: "GONE", Epoch: 2, Load: 5, Capacity: 1000, HeartbeatAtMs: 4, StartedAtMs: 1, EndedAtMs: 6, DeclaredDeadBy: "w1"},
	}}
	status, body, _ := f.do(t, event("GET", "/workers", ""))
	ws, _ := body["workers"].([]any)
	if status != 200 || len(ws) != 2 || body["truncated"] != true || body["limit"] != float64(sessions.MaxWorkers) {
		t.Fatalf("workers: %d %v", status, body)
	}
	w1, w0 := ws[0].(map[string]any), ws[1].(map[string]any)
	if w1["id"] != "w1" || w1["state"] != "ALIVE" || w1["load"] != 12.0 || w1["capacity"] != 1000.0 || w1["admin_addr"] != "10.0.0.1:8081" ||
		w1["hb_at_ms"] != 7.0 || w1["started_at_ms"] != 3.0 || w1["ended_at_ms"] != nil || w1["mailbox"] != nil ||
		w1["host"] != "ip-10-0-0-1" || w1["pid"] != 4242.0 {
		t.Fatalf("w1 %v", w1)
	}
	if w0["state"] != "DEAD" || w0["list"] != "GONE" || w0["epoch"] != 2.0 || w0["declared_dead_by"] != "w1" || w0["ended_at_ms"] != 6.0 {
		t.Fatalf("w0 %v", w0)
	}
	status, body, _ = f.do(t, event("POST", "/workers", ""))
	if code, _ := errorOf(t, body); status != 405 || code != CodeMethodNotAllowed {
		t.Fatalf("POST /workers: %d %s", status, code)
	}
	req := event("GET", "/workers", "")
	req.RawQueryString = "state=ALIVE"
	status, body, _ = f.do(t, req)
	if code, _ := errorOf(t, body); status != 400 || code != CodeInvalidQuery {
		t.Fatalf("query: %d %s", status, code)
	}
	f.store.err = sessions.ErrUnavailable
	status, body, _ = f.do(t, event("GET", "/workers", ""))
	if code, _ := errorOf(t, body); status != 503 || code != CodeUnavailable {
		t.Fatalf("unavailable: %d %s", status, code)
	}
	status, _, _ = f.do(t, event("GET", "/workers/w1", ""))
	if status != 404 {
		t.Fatalf("GET /workers/w1: %d", status)
	}
}

// A FAILED session shows failed, its last error and when (RFC 3339), in
// GET and in the list; a session with no error shows failed false and no
// error fields.
func TestHandlerShowsFailedAndLastError(t *testing.T) {
	f := newFixture(t, nil)
	f.store.session = sessions.Session{DesiredState: "STARTED", Spec: spec.Spec{WSURL: "wss://a.example.com/f"}, Generation: 2,
		Failed: true, LastError: "handshake refused: HTTP 401", LastErrorAtMs: 1_800_000_000_123}
	status, body, _ := f.do(t, event("GET", "/sessions/c1", ""))
	if status != 200 || body["failed"] != true || body["last_error"] != "handshake refused: HTTP 401" || body["last_error_at"] != "2027-01-15T08:00:00.123Z" {
		t.Fatalf("GET of a FAILED session: %d %v", status, body)
	}
	f.store.page = sessions.Page{Sessions: []sessions.Session{f.store.session}}
	status, body, _ = f.do(t, event("GET", "/sessions", ""))
	listed := body["sessions"].([]any)[0].(map[string]any)
	if status != 200 || listed["failed"] != true || listed["last_error"] != "handshake refused: HTTP 401" {
		t.Fatalf("list of a FAILED session: %d %v", status, body)
	}
	f.store.session = sessions.Session{DesiredState: "STARTED", Spec: spec.Spec{WSURL: "wss://a.example.com/f"}, Generation: 1}
	_, body, _ = f.do(t, event("GET", "/sessions/c1", ""))
	if _, has := body["last_error"]; body["failed"] != false || has || body["last_error_at"] != nil {
		t.Fatalf("GET of a healthy session: %v", body)
	}
}

// The last error carries the generation and tenure (lease epoch) it was
// seen in, in GET and in the list; an error recorded without them (an older
// item) shows without them.
func TestHandlerShowsLastErrorGenerationAndEpoch(t *testing.T) {
	f := newFixture(t, nil)
	f.store.session = sessions.Session{DesiredState: "STARTED", Spec: spec.Spec{WSURL: "wss://a.example.com/f"}, Generation: 2, LeaseOwner: "w2", LeaseEpoch: 4,
		LastError: "handshake refused: HTTP 400", LastErrorAtMs: 1_800_000_000_123, LastErrorGen: 1, LastErrorEpoch: 3}
	status, body, _ := f.do(t, event("GET", "/sessions/c1", ""))
	if status != 200 || body["last_error"] != "handshake refused: HTTP 400" || body["last_error_generation"] != 1.0 || body["last_error_epoch"] != 3.0 ||
		body["generation"] != 2.0 || body["lease_epoch"] != 4.0 {
		t.Fatalf("GET of a session with a past error: %d %v", status, body)
	}
	f.store.page = sessions.Page{Sessions: []sessions.Session{f.store.session}}
	status, body, _ = f.do(t, event("GET", "/sessions", ""))
	listed := body["sessions"].([]any)[0].(map[string]any)
	if status != 200 || listed["last_error_generation"] != 1.0 || listed["last_error_epoch"] != 3.0 {
		t.Fatalf("list of a session with a past error: %d %v", status, body)
	}
	f.store.session.LastErrorGen, f.store.session.LastErrorEpoch = 0, 0
	_, body, _ = f.do(t, event("GET", "/sessions/c1", ""))
	_, hasGen := body["last_error_generation"]
	_, hasEpoch := body["last_error_epoch"]
	if body["last_error"] != "handshake refused: HTTP 400" || hasGen || hasEpoch {
		t.Fatalf("GET of an error recorded without its tenure: %v", body)
	}
}

// GET and the list show a session's standby: its configuration (the
// spec's, defaults spelled out), the worker holding it and its epoch, a
// refusal by the source at the current generation, and otherwise the
// last standby error; nothing for a session without standby.
func TestHandlerShowsStandby(t *testing.T) {
	f := newFixture(t, nil)
	sp := spec.Spec{WSURL: "wss://a.example.com/f", Standby: &spec.Standby{Enabled: new(true), Window: new("1m")}}
	if fe := sp.Check(nil); fe != nil {
		t.Fatal(fe)
	}
	get := func() map[string]any {
		t.Helper()
		status, body, _ := f.do(t, event("GET", "/sessions/c1", ""))
		if status != 200 {
			t.Fatalf("GET: %d %v", status, body)
		}
		return body
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	f.store.session = sessions.Session{DesiredState: "STARTED", Spec: sp, Generation: 2, LeaseOwner: "w1", LeaseEpoch: 4, Standby: "w2", StandbyEpoch: 7}
	body := get()
	if js(body["standby"]) != `{"enabled":true,"window":"1m0s","window_bytes":1048576}` || js(body["standby_holder"]) != `{"epoch":7,"worker_id":"w2"}` ||
		body["standby_refused"] != nil || body["standby_error"] != nil {
		t.Fatalf("GET of a session with its standby held: %v", body)
	}
	f.store.page = sessions.Page{Sessions: []sessions.Session{f.store.session}}
	_, page, _ := f.do(t, event("GET", "/sessions", ""))
	if listed := page["sessions"].([]any)[0].(map[string]any); js(listed["standby_holder"]) != `{"epoch":7,"worker_id":"w2"}` || listed["standby"] == nil {
		t.Fatalf("list of a session with its standby held: %v", listed)
	}

	// Refused at this generation: standby_refused, with the error.
	f.store.session = sessions.Session{DesiredState: "STARTED", Spec: sp, Generation: 2, LeaseOwner: "w1", LeaseEpoch: 4,
		StandbyEpoch: 7, StandbyRefusedGen: 2, StandbyError: "source closed the second connection (1008 policy violation)"}
	body = get()
	if js(body["standby_refused"]) != `{"error":"source closed the second connection (1008 policy violation)","generation":2}` ||
		body["standby_holder"] != nil || body["standby_error"] != nil {
		t.Fatalf("GET of a session whose source refused its standby: %v", body)
	}
	// Refused at an older generation: a past error, shown as such.
	f.store.session.Generation = 3
	body = get()
	if body["standby_refused"] != nil || body["standby_error"] != "source closed the second connection (1008 policy violation)" {
		t.Fatalf("GET after a new generation: %v", body)
	}
	// Without standby: none of the keys.
	f.store.session = sessions.Session{DesiredState: "STARTED", Spec: spec.Spec{WSURL: "wss://a.example.com/f"}, Generation: 1}
	body = get()
	for _, k := range []string{"standby", "standby_holder", "standby_refused", "standby_error"} {
		if _, has := body[k]; has {
			t.Errorf("GET of a session without standby shows %s: %v", k, body)
		}
	}
}

func TestHandlerStoreErrors(t *testing.T) {
	cases := []struct {
		err       error
		status    int
		code      string
		retryable bool
	}{
		{fmt.Errorf("get x: %w", sessions.ErrNotFound), 404, CodeNotFound, false},
		{fmt.Errorf("start x: %w: throttled", sessions.ErrUnavailable), 503, CodeUnavailable, true},
		{errors.New("anything else"), 503, CodeUnavailable, true},
		{context.DeadlineExceeded, 503, CodeUnavailable, true},
		{fmt.Errorf("start x: %w", sessions.ErrConflict), 409, CodeConflict, true},
		{fmt.Errorf("start x: %w: ValidationException: item size", sessions.ErrRejected), 500, CodeRejected, false},
		{fmt.Errorf("list: %w", sessions.ErrInvalidCursor), 400, CodeInvalidQuery, false},
	}
	for _, c := range cases {
		f := newFixture(t, nil)
		f.store.err = c.err
		for _, req := range []events.APIGatewayV2HTTPRequest{
			event("POST", "/sessions", `{"connection_id":"c1","ws_url":"wss://a.example.com"}`),
			event("POST", "/sessions/c1/stop", ""),
			event("GET", "/sessions/c1", ""),
			event("GET", "/sessions", ""),
		} {
			status, body, resp := f.do(t, req)
			code, _ := errorOf(t, body)
			if status != c.status || code != c.code {
				t.Fatalf("%v on %s: got %d %s, want %d %s", c.err, req.RawPath, status, code, c.status, c.code)
			}
			retry, _ := body["error"].(map[string]any)["retryable"].(bool)
			if retry != c.retryable || (resp.Headers["Retry-After"] != "") != c.retryable {
				t.Fatalf("%v: retryable %v, Retry-After %q", c.err, retry, resp.Headers["Retry-After"])
			}
		}
		if len(f.notif.sent) != 0 {
			t.Fatalf("%v: a notification was sent after a failed write", c.err)
		}
	}
}

func TestHandlerNotifyFailureStill202(t *testing.T) {
	f := newFixture(t, nil)
	f.notif.err = errors.New("sqs down")
	status, body, _ := f.do(t, event("POST", "/sessions", `{"connection_id":"c1","ws_url":"wss://a.example.com"}`))
	if status != 202 || body["notified"] != false || body["generation"] != 3.0 {
		t.Fatalf("start: %d %v", status, body)
	}
	status, body, _ = f.do(t, event("POST", "/sessions/c1/stop", `{}`))
	if status != 202 || body["notified"] != false {
		t.Fatalf("stop: %d %v", status, body)
	}
	if got := sumMetric(t, f.metrics.String(), schema.MetricNotifyFailures, ""); got != 2 {
		t.Fatalf("NotifyFailures = %v", got)
	}
	if !strings.Contains(f.logs.String(), `"level":"warn","request_id":"req-_sessions"`) || !strings.Contains(f.logs.String(), "sqs down") {
		t.Fatalf("no warning logged:\n%s", f.logs.String())
	}
}

func TestHandlerSigning(t *testing.T) {
	secret := "signing-secret-0123456789"
	f := newFixture(t, func(c *config.Config) { c.SigningSecret = secret })
	body := `{"connection_id":"c1","ws_url":"wss://a.example.com"}`
	status, b, _ := f.do(t, event("POST", "/sessions", body))
	if code, _ := errorOf(t, b); status != 401 || code != CodeMissingSignature {
		t.Fatalf("unsigned: %d %s", status, code)
	}
	ts := strconv.FormatInt(f.clock.Now().Unix(), 10)
	nonce := 0
	sign := func(req events.APIGatewayV2HTTPRequest, signedPath string) events.APIGatewayV2HTTPRequest {
		nonce++
		sr := SignedRequest{Timestamp: ts, Nonce: fmt.Sprintf("nonce-%012d", nonce), Method: req.RequestContext.HTTP.Method,
			Path: signedPath, Query: req.RawQueryString, Body: []byte(req.Body)}
		req.Headers["x-wsfleet-timestamp"] = sr.Timestamp
		req.Headers["x-wsfleet-nonce"] = sr.Nonce
		req.Headers["x-wsfleet-signature"] = Sign([]byte(secret), sr)
		return req
	}
	req := sign(event("POST", "/sessions", body), "/sessions")
	if status, b, _ := f.do(t, req); status != 202 {
		t.Fatalf("signed: %d %v", status, b)
	}
	if f.store.nonces[req.Headers["x-wsfleet-nonce"]] != f.clock.Now().Add(6*time.Minute) {
		t.Fatalf("nonce kept until %v, want the end of the window + 1 min", f.store.nonces)
	}
	// A signature for one session's stop does not serve on another.
	stop := sign(event("POST", "/sessions/c2/stop", ""), "/sessions/c1/stop")
	if status, b, _ := f.do(t, stop); status != 401 {
		t.Fatalf("stop signed for another session: %d %v", status, b)
	}
	// The captured start, replayed after a stop within the window, does not
	// restart the session: the nonce is spent.
	if status, b, _ := f.do(t, sign(event("POST", "/sessions/c1/stop", ""), "/sessions/c1/stop")); status != 202 {
		t.Fatalf("signed stop: %d %v", status, b)
	}
	started := len(f.store.started)
	status, b, _ = f.do(t, req)
	if code, _ := errorOf(t, b); status != 401 || code != CodeReplayed || len(f.store.started) != started {
		t.Fatalf("replayed start: %d %s, starts %d -> %d", status, code, started, len(f.store.started))
	}
	// The query string is signed: a signed list cannot be re-pointed.
	list := event("GET", "/sessions", "")
	list.RawQueryString = "state=STARTED"
	list = sign(list, "/sessions")
	list.RawQueryString = "state=STOPPED"
	if status, b, _ := f.do(t, list); status != 401 {
		t.Fatalf("list with a changed query: %d %v", status, b)
	}
	// GET signs an empty body; a stage prefix is not part of the signed path.
	get := event("GET", "/prod/sessions/c1", "")
	get.RequestContext.Stage = "prod"
	if status, b, _ := f.do(t, sign(get, "/sessions/c1")); status != 200 {
		t.Fatalf("signed get: %d %v", status, b)
	}
	// The nonce store down: 503, nothing done.
	f.store.nonceErr = errors.New("table frozen")
	started = len(f.store.started)
	status, b, _ = f.do(t, sign(event("POST", "/sessions", body), "/sessions"))
	if code, _ := errorOf(t, b); status != 503 || code != CodeUnavailable || len(f.store.started) != started {
		t.Fatalf("nonce store down: %d %s", status, code)
	}
	f.store.nonceErr = nil
	f.clock.Advance(6 * time.Minute)
	if status, b, _ := f.do(t, sign(event("POST", "/sessions", body), "/sessions")); status != 401 || b["error"].(map[string]any)["code"] != CodeStaleTimestamp {
		t.Fatalf("stale: %d %v", status, b)
	}
	if strings.Contains(f.logs.String(), secret) {
		t.Fatal("secret logged")
	}
}

func TestHandlerLogsRedactAndCarryIDs(t *testing.T) {
	f := newFixture(t, nil)
	req := event("POST", "/sessions", `{"connection_id":"c-log","ws_url":"wss://a.example.com/f?token=qu3ry-secret&x=1","headers":{"Authorization":"Bearer h3ader-secret","X-Api-Key":"k3y-secret"}}`)
	req.RequestContext.RequestID = "apigw-req-1"
	f.do(t, req)
	bad := event("POST", "/sessions", `{"connection_id":"c-log2","ws_url":"wss://a.example.com/f?token=qu3ry-secret","headers":{"X-A":"h3ader-secret\n"}}`)
	f.do(t, bad)
	logs := f.logs.String()
	for _, secret := range []string{"qu3ry-secret", "h3ader-secret", "k3y-secret"} {
		if strings.Contains(logs, secret) || strings.Contains(f.metrics.String(), secret) {
			t.Fatalf("logs leak %q:\n%s", secret, logs)
		}
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(logs, "\n", 2)[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line["request_id"] != "apigw-req-1" || line["connection_id"] != "c-log" || line["route"] != routeStart ||
		line["ws_url"] != "wss://a.example.com/f?token=REDACTED&x=REDACTED" || line["header_count"] != 2.0 || line["status"] != 202.0 {
		t.Fatalf("log line: %v", line)
	}
}

func TestHandlerRecoversFromPanic(t *testing.T) {
	f := newFixture(t, nil)
	f.store.panics = true
	status, body, _ := f.do(t, event("POST", "/sessions", `{"connection_id":"c1","ws_url":"wss://a.example.com"}`))
	if code, _ := errorOf(t, body); status != 500 || code != CodeInternal {
		t.Fatalf("%d %s", status, code)
	}
	if !strings.Contains(f.logs.String(), "panic: boom") {
		t.Fatalf("panic not logged:\n%s", f.logs.String())
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	cfg := config.Default() // no queue URL
	if _, err := New(cfg, Deps{Store: &fakeStore{}, Notifier: &fakeNotifier{}}); err == nil {
		t.Fatal("New accepted a config without a queue URL")
	}
	cfg.QueueURL = "http://q"
	if _, err := New(cfg, Deps{}); err == nil {
		t.Fatal("New accepted missing deps")
	}
}

// GET shows the source protocol, but open messages only by kind and size,
// like header names without their values.
func TestHandlerStatusShowsSourceWithoutOpenMessageContent(t *testing.T) {
	f := newFixture(t, nil)
	d, e := DecodeStart([]byte(`{"connection_id":"c1","ws_url":"wss://a.example.com/f","seq_path":"data.u","resume":{"query_param":"from","value":"last"},
		"open_messages":[{"text":"{\"op\":\"login\",\"sign\":\"0pen-secret\"}","wait_for":{"path":"event","equals":"login"}},{"binary_b64":"b3Blbi1zZWNyZXQ="}],
		"app_ping":{"message":"ping","every":"20s"}}`), publicPolicy)
	if e != nil {
		t.Fatal(e)
	}
	f.store.session = sessions.Session{ConnectionID: "c1", DesiredState: "STARTED", Spec: d.Spec, Generation: 1}
	status, body, resp := f.do(t, event("GET", "/sessions/c1", ""))
	if status != 200 || body["seq_path"] != "data.u" || body["seq_mode"] != "field" || body["on_missing_seq"] != "drop" ||
		body["on_sink_refusal"] != "fail" {
		t.Fatalf("status: %d %v", status, body)
	}
	if r, _ := body["resume"].(map[string]any); r["query_param"] != "from" || r["value"] != "last" {
		t.Fatalf("resume %v", body["resume"])
	}
	oms, _ := body["open_messages"].([]any)
	if len(oms) != 2 {
		t.Fatalf("open_messages %v", body["open_messages"])
	}
	if m := oms[0].(map[string]any); m["kind"] != "text" || m["bytes"] != float64(len(`{"op":"login","sign":"0pen-secret"}`)) || m["wait_for"] == nil {
		t.Fatalf("open_messages[0] %v", m)
	}
	if m := oms[1].(map[string]any); m["kind"] != "binary" || m["bytes"] != float64(len("open-secret")) {
		t.Fatalf("open_messages[1] %v", m)
	}
	if strings.Contains(resp.Body, "0pen-secret") || strings.Contains(resp.Body, "b3Blbi1zZWNyZXQ") {
		t.Fatalf("status shows an open message: %s", resp.Body)
	}
}

// A start whose body is within the body limit (about 131 KB here) but
// whose stored form would not be (each U+2028 takes 3 bytes in the body and
// 6 as stored) is refused with a 400 naming open_messages, and nothing
// reaches the store: limits apply to what is stored.
func TestHandlerRefusesAStartLargerAsStored(t *testing.T) {
	f := newFixture(t, nil)
	msg := strings.Repeat("\u2028", 21_800) // 65,400 bytes: within one message's limit
	body := `{"connection_id":"big","ws_url":"wss://a.example.com","open_messages":[{"text":"` + msg + `"},{"text":"` + msg + `"}]}`
	status, resp, _ := f.do(t, event("POST", "/sessions", body))
	code, message := errorOf(t, resp)
	if status != 400 || code != source.FieldCode("open_messages") || !strings.Contains(message, "as stored") {
		t.Fatalf("a %d-byte start: %d %s %q", len(body), status, code, message)
	}
	if len(f.store.started) != 0 || len(f.notif.sent) != 0 {
		t.Fatalf("the refused start reached the store (%d) or the queue (%d)", len(f.store.started), len(f.notif.sent))
	}
}
