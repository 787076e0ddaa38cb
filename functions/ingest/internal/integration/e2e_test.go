package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/api"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/app"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
	"github.com/wsfleet/wsfleet/functions/ingest/internal/testenv"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/faultnet"
	"github.com/wsfleet/wsfleet/testkit/syncbuf"
)

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, enginetest.Needs{Dynamo: true, SQS: true}))
}

var leakOpts = []goleak.Option{
	goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
}

// noLeaks checks, after every cleanup of t has run, that t left no goroutine.
func noLeaks(t *testing.T) {
	opts := append(append([]goleak.Option{}, leakOpts...), goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

type syncBuffer = syncbuf.Buffer

func testConfig(e *testenv.Env) config.Config {
	cfg := config.Default()
	cfg.TableName, cfg.QueueURL, cfg.Environment = e.Table, e.QueueURL, "test"
	return cfg
}

// front serves h over HTTP on a loopback port, as ingest-local does.
func front(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

type httpClient struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newClient(t *testing.T, base string) *httpClient {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &httpClient{t: t, base: base, c: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

func (c *httpClient) do(method, path, body string) (int, map[string]any, http.Header) {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		c.t.Fatalf("%s %s: body %q: %v", method, path, raw, err)
	}
	return resp.StatusCode, out, resp.Header
}

// receive drains the queue (1 s long polls) until want messages or a poll
// comes back empty.
func receive(t *testing.T, q *sqsnotify.Queue, want int) []notify.Notification {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []notify.Notification
	for len(out) < want {
		msgs, err := q.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if m.Err != nil {
				t.Fatalf("undecodable message %q: %v", m.Body, m.Err)
			}
			out = append(out, m.Notification)
			if err := q.Delete(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

func checkNote(t *testing.T, n notify.Notification, typ, id string, gen int64, after time.Time) {
	t.Helper()
	if n.Type != typ || n.ConnectionID != id || n.Generation != gen || n.SentAtMs < after.UnixMilli() || n.SentAtMs > time.Now().UnixMilli() {
		t.Fatalf("notification %+v, want %s %s gen %d sent after %d", n, typ, id, gen, after.UnixMilli())
	}
}

// serveAPI checks t leaks nothing and serves the API on fresh engines over
// HTTP: the engines, a client of the front, and the API's log.
func serveAPI(t *testing.T) (*testenv.Env, *httpClient, *syncBuffer) {
	t.Helper()
	noLeaks(t)
	e := testenv.New(t)
	logs := &syncBuffer{}
	h, err := app.Build(testConfig(e), e.AWS, zerolog.New(logs), logs)
	if err != nil {
		t.Fatal(err)
	}
	return e, newClient(t, front(t, h)), logs
}

func TestHTTPEndToEnd(t *testing.T) {
	e, c, logs := serveAPI(t)
	t0 := time.Now()

	// start: new
	start := `{"connection_id":"e2e-1","ws_url":"wss://stream.example.com/v1?token=qu3ry-secret","headers":{"Authorization":"Bearer h3ader-secret"}}`
	status, body, _ := c.do("POST", "/sessions", start)
	if status != 202 || body["connection_id"] != "e2e-1" || body["desired_state"] != "STARTED" || body["generation"] != 1.0 ||
		body["outcome"] != "created" || body["notified"] != true {
		t.Fatalf("start: %d %v", status, body)
	}
	checkNote(t, receive(t, e.Queue, 1)[0], schema.NotifyStart, "e2e-1", 1, t0)

	// start: the same again is idempotent (and notifies again)
	status, body, _ = c.do("POST", "/sessions", start)
	if status != 202 || body["generation"] != 1.0 || body["outcome"] != "unchanged" {
		t.Fatalf("repeat: %d %v", status, body)
	}
	checkNote(t, receive(t, e.Queue, 1)[0], schema.NotifyStart, "e2e-1", 1, t0)

	// start: a new URL bumps the generation
	status, body, _ = c.do("POST", "/sessions", strings.Replace(start, "/v1?", "/v2?", 1))
	if status != 202 || body["generation"] != 2.0 || body["outcome"] != "updated" {
		t.Fatalf("url change: %d %v", status, body)
	}
	checkNote(t, receive(t, e.Queue, 1)[0], schema.NotifyStart, "e2e-1", 2, t0)

	// start without connection_id: one is generated
	status, body, _ = c.do("POST", "/sessions", `{"ws_url":"wss://stream.example.com/x"}`)
	genID, _ := body["connection_id"].(string)
	if status != 202 || !notify.ConnectionIDPattern.MatchString(genID) || body["generation"] != 1.0 {
		t.Fatalf("generated id: %d %v", status, body)
	}
	checkNote(t, receive(t, e.Queue, 1)[0], schema.NotifyStart, genID, 1, t0)

	// status
	status, body, _ = c.do("GET", "/sessions/e2e-1", "")
	if status != 200 || body["desired_state"] != "STARTED" || body["ws_url"] != "wss://stream.example.com/v2?token=REDACTED" ||
		body["generation"] != 2.0 || body["lease_owner"] != "" || body["lease_epoch"] != 0.0 ||
		body["last_seq"] != nil || body["seq_field"] != "seq" || body["updated_at_ms"].(float64) < float64(t0.UnixMilli()) {
		t.Fatalf("status: %d %v", status, body)
	}
	for k := range body {
		if strings.Contains(k, "expires") {
			t.Fatalf("status shows a lease expiry (%s): there is none any more", k)
		}
	}
	if names, _ := body["header_names"].([]any); len(names) != 1 || names[0] != "Authorization" {
		t.Fatalf("header_names %v", body["header_names"])
	}
	status, body, _ = c.do("GET", "/sessions/unknown-id", "")
	if status != 404 || body["error"].(map[string]any)["code"] != api.CodeNotFound {
		t.Fatalf("status unknown: %d %v", status, body)
	}

	// stop: unknown → 404 and no message
	status, body, _ = c.do("POST", "/sessions/unknown-id/stop", "")
	if status != 404 || body["error"].(map[string]any)["code"] != api.CodeNotFound {
		t.Fatalf("stop unknown: %d %v", status, body)
	}
	// stop, then stop again
	status, body, _ = c.do("POST", "/sessions/e2e-1/stop", "")
	if status != 202 || body["connection_id"] != "e2e-1" || body["desired_state"] != "STOPPED" || body["outcome"] != "stopped" {
		t.Fatalf("stop: %d %v", status, body)
	}
	status, body, _ = c.do("POST", "/sessions/e2e-1/stop", "{}")
	if status != 202 || body["desired_state"] != "STOPPED" || body["outcome"] != "unchanged" {
		t.Fatalf("stop again: %d %v", status, body)
	}
	notes := receive(t, e.Queue, 2)
	if len(notes) != 2 {
		t.Fatalf("stop notifications: %+v (the unknown stop must send none)", notes)
	}
	for _, n := range notes {
		checkNote(t, n, schema.NotifyStop, "e2e-1", 2, t0)
	}
	if status, body, _ = c.do("GET", "/sessions/e2e-1", ""); body["desired_state"] != "STOPPED" || body["generation"] != 2.0 {
		t.Fatalf("status after stop: %d %v", status, body)
	}
	// restart after stop
	if status, body, _ = c.do("POST", "/sessions", strings.Replace(start, "/v1?", "/v2?", 1)); status != 202 || body["generation"] != 3.0 || body["outcome"] != "restarted" {
		t.Fatalf("restart: %d %v", status, body)
	}
	if status, _, _ = c.do("POST", "/sessions/e2e-1/stop", ""); status != 202 {
		t.Fatal(status)
	}

	// list with pagination
	want := []string{genID}
	for i := 0; i < 5; i++ {
		id := fmt.Sprintf("e2e-list-%d", i)
		want = append(want, id)
		if status, body, _ := c.do("POST", "/sessions", `{"connection_id":"`+id+`","ws_url":"wss://stream.example.com/?k=secret-`+id+`"}`); status != 202 {
			t.Fatalf("start %s: %d %v", id, status, body)
		}
	}
	var got []string
	next, pages := "", 0
	for {
		path := "/sessions?limit=2"
		if next != "" {
			path += "&next=" + next
		}
		status, body, _ := c.do("GET", path, "")
		if status != 200 {
			t.Fatalf("list: %d %v", status, body)
		}
		pages++
		for _, s := range body["sessions"].([]any) {
			m := s.(map[string]any)
			if m["desired_state"] != "STARTED" || strings.Contains(m["ws_url"].(string), "secret-") {
				t.Fatalf("listed %v", m)
			}
			got = append(got, m["connection_id"].(string))
		}
		n, _ := body["next"].(string)
		if n == "" {
			break
		}
		if pages > 10 {
			t.Fatal("list does not end")
		}
		next = n
	}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) || pages < 3 {
		t.Fatalf("listed %v in %d pages, want %v", got, pages, want)
	}
	status, body, _ = c.do("GET", "/sessions?state=STOPPED", "")
	if list := body["sessions"].([]any); status != 200 || len(list) != 1 || list[0].(map[string]any)["connection_id"] != "e2e-1" {
		t.Fatalf("list stopped: %d %v", status, body)
	}
	status, body, _ = c.do("GET", "/sessions?next=bm90LWEtY3Vyc29y", "")
	if status != 400 || body["error"].(map[string]any)["code"] != api.CodeInvalidQuery {
		t.Fatalf("bad cursor: %d %v", status, body)
	}

	// Nothing secret was logged; request ids were.
	out := logs.String()
	for _, secret := range []string{"qu3ry-secret", "h3ader-secret", "secret-e2e"} {
		if strings.Contains(out, secret) {
			t.Fatalf("logs leak %q", secret)
		}
	}
	if !strings.Contains(out, `"request_id":"`) || !strings.Contains(out, `"connection_id":"e2e-1"`) || !strings.Contains(out, `"Starts":`) {
		t.Fatalf("logs/metrics lack ids or counters:\n%s", out)
	}
}

// TestSQSFailureStill202AndReconciled: when the notification cannot be sent
// after the write, the start still answers 202, logs and counts the failure,
// and the session is in by_unowned, where the workers' reconciliation
// looks.
func TestSQSFailureStill202AndReconciled(t *testing.T) {
	noLeaks(t)
	e := testenv.New(t)
	for name, q := range map[string]*sqsnotify.Queue{
		"missing queue": sqsnotify.New(e.SQS, e.QueueURL+"-does-not-exist", 0),
		"sqs down":      sqsnotify.New(testenv.DeadSQS(e.AWS), e.QueueURL, 0),
	} {
		t.Run(name, func(t *testing.T) {
			logs := &syncBuffer{}
			h, err := api.New(testConfig(e), api.Deps{Store: sessions.New(e.Dynamo, e.Table), Notifier: q, Log: zerolog.New(logs), Metrics: logs})
			if err != nil {
				t.Fatal(err)
			}
			c := newClient(t, front(t, h))
			id := "lost-" + strings.ReplaceAll(name, " ", "-")
			before := time.Now()
			status, body, _ := c.do("POST", "/sessions", `{"connection_id":"`+id+`","ws_url":"wss://stream.example.com/"}`)
			if status != 202 || body["notified"] != false || body["generation"] != 1.0 {
				t.Fatalf("start: %d %v", status, body)
			}
			out := logs.String()
			if !strings.Contains(out, `"level":"warn"`) || !strings.Contains(out, `"`+schema.MetricNotifyFailures+`":1`) {
				t.Fatalf("failure not logged/counted:\n%s", out)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			in, err := sessionitem.IndexQuery(e.Table, schema.IndexByUnowned, schema.AttrUnownedShard, schema.UnownedShardOf(id), 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			qo, err := e.Dynamo.Query(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, raw := range qo.Items {
				if it, err := sessionitem.Decode(raw); err == nil && it.ConnectionID == id {
					found = true
				}
			}
			if !found {
				t.Fatalf("%s not in by_unowned %+v (started %v)", id, qo.Items, before)
			}
		})
	}
	if msgs := receive(t, e.Queue, 1); len(msgs) != 0 {
		t.Fatalf("messages on the real queue: %+v", msgs)
	}
}

// TestDynamoFailureIs503: a table that cannot be reached answers 503 with a
// retryable body; a table that does not exist (the deployment's fault: a
// ResourceNotFoundException, which no retry fixes) answers 500, not
// retryable. No notification is sent (nothing half-done).
func TestDynamoFailureIs503(t *testing.T) {
	noLeaks(t)
	e := testenv.New(t)
	for name, tc := range map[string]struct {
		store     *sessions.Store
		status    int
		code      string
		retryable bool
	}{
		"dynamo down":   {sessions.New(testenv.DeadDynamo(e.AWS), e.Table), 503, api.CodeUnavailable, true},
		"missing table": {sessions.New(e.Dynamo, e.Table+"-missing"), 500, api.CodeRejected, false},
	} {
		store := tc.store
		t.Run(name, func(t *testing.T) {
			logs := &syncBuffer{}
			h, err := api.New(testConfig(e), api.Deps{Store: store, Notifier: e.Queue, Log: zerolog.New(logs), Metrics: logs})
			if err != nil {
				t.Fatal(err)
			}
			c := newClient(t, front(t, h))
			for _, r := range [][3]string{
				{"POST", "/sessions", `{"connection_id":"d1","ws_url":"wss://stream.example.com/"}`},
				{"POST", "/sessions/d1/stop", ""},
				{"GET", "/sessions/d1", ""},
				{"GET", "/sessions", ""},
			} {
				status, body, hdr := c.do(r[0], r[1], r[2])
				e, _ := body["error"].(map[string]any)
				retryable, _ := e["retryable"].(bool)
				if status != tc.status || e["code"] != tc.code || retryable != tc.retryable || (hdr.Get("Retry-After") != "") != tc.retryable || e["message"] == "" {
					t.Fatalf("%s %s: %d %v %v", r[0], r[1], status, body, hdr)
				}
			}
			if out := logs.String(); !strings.Contains(out, `"level":"error"`) || !strings.Contains(out, `"Code":"`+tc.code+`"`) {
				t.Fatalf("failure not logged/counted:\n%s", out)
			}
		})
	}
	if msgs := receive(t, e.Queue, 1); len(msgs) != 0 {
		t.Fatalf("a failed write was notified: %+v", msgs)
	}
	// And the real table holds nothing.
	out, err := e.Dynamo.Scan(context.Background(), &dynamodb.ScanInput{TableName: &e.Table})
	if err != nil {
		t.Fatal(err)
	}
	if out.Count != 0 {
		t.Fatalf("%d items written", out.Count)
	}
}

// TestFrozenTableMidWriteIsOutcomeUnknown: with the table frozen after it
// received a stop (the write applies, the answer never comes), the API does
// not claim nothing was written: 503 outcome_unknown, retryable. The retry
// after the thaw finds the stop applied, answers 202 and sends the stop
// notification that the first attempt never sent.
func TestFrozenTableMidWriteIsOutcomeUnknown(t *testing.T) {
	noLeaks(t)
	e := testenv.New(t)
	proxy, err := faultnet.StartEndpoint(os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	db := dynamodb.NewFromConfig(e.AWS, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(proxy.URL()) })
	cfg := testConfig(e)
	cfg.StoreTimeout = time.Second
	logs := &syncBuffer{}
	h, err := api.New(cfg, api.Deps{Store: sessions.New(db, e.Table), Notifier: e.Queue, Log: zerolog.New(logs), Metrics: logs})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, front(t, h))
	if status, body, _ := c.do("POST", "/sessions", `{"connection_id":"frozen-1","ws_url":"wss://stream.example.com/"}`); status != 202 {
		t.Fatalf("start: %d %v", status, body)
	}
	if n := receive(t, e.Queue, 1); len(n) != 1 {
		t.Fatalf("start notifications %+v", n)
	}

	proxy.FreezeAnswers()
	status, body, hdr := c.do("POST", "/sessions/frozen-1/stop", "")
	ee, _ := body["error"].(map[string]any)
	if status != 503 || ee["code"] != api.CodeOutcomeUnknown || ee["retryable"] != true || hdr.Get("Retry-After") == "" ||
		strings.Contains(fmt.Sprint(ee["message"]), "nothing was written") {
		t.Fatalf("frozen stop: %d %v", status, body)
	}
	proxy.Thaw()
	// The stop was applied although its answer was lost.
	got, err := sessions.New(e.Dynamo, e.Table).Get(context.Background(), "frozen-1")
	if err != nil || got.DesiredState != schema.StateStopped {
		t.Fatalf("after the thaw: %+v %v", got, err)
	}
	if n := receive(t, e.Queue, 1); len(n) != 0 {
		t.Fatalf("the unanswered stop was notified: %+v", n)
	}
	status, body, _ = c.do("POST", "/sessions/frozen-1/stop", "")
	if status != 202 || body["outcome"] != string(sessions.Unchanged) || body["notified"] != true {
		t.Fatalf("retried stop: %d %v", status, body)
	}
	n := receive(t, e.Queue, 1)
	if len(n) != 1 || n[0].Type != schema.NotifyStop || n[0].ConnectionID != "frozen-1" {
		t.Fatalf("retried stop notifications %+v", n)
	}
}

// The source protocol over HTTP on the real table: stored (source_config),
// a change bumps the generation and a repeat does not, GET shows open
// messages by kind and size only, the request log never holds them, and a
// bad field is a 400 that names it and writes nothing.
func TestHTTPSourceProtocol(t *testing.T) {
	e, c, logs := serveAPI(t)
	start := `{"connection_id":"src-1","ws_url":"wss://stream.example.com/ws","seq_path":"data.u",
		"open_messages":[{"text":"{\"op\":\"login\",\"sign\":\"0pen-secret\",\"from\":\"{{resume_from}}\"}","wait_for":{"path":"event","equals":"login"}}],
		"app_ping":{"message":"ping","every":"20s","pong":"pong"},"idle_timeout":"45s"}`
	for i, want := range []struct {
		outcome string
		gen     float64
	}{{"created", 1}, {"unchanged", 1}} {
		status, body, _ := c.do("POST", "/sessions", start)
		if status != 202 || body["outcome"] != want.outcome || body["generation"] != want.gen {
			t.Fatalf("start %d: %d %v", i, status, body)
		}
	}
	receive(t, e.Queue, 2)
	status, body, _ := c.do("POST", "/sessions", strings.Replace(start, `"every":"20s"`, `"every":"25s"`, 1))
	if status != 202 || body["outcome"] != "updated" || body["generation"] != 2.0 {
		t.Fatalf("app_ping change: %d %v", status, body)
	}
	receive(t, e.Queue, 1)

	status, body, _ = c.do("GET", "/sessions/src-1", "")
	oms, _ := body["open_messages"].([]any)
	if status != 200 || body["seq_path"] != "data.u" || body["idle_timeout"] != "45s" || len(oms) != 1 ||
		oms[0].(map[string]any)["kind"] != "text" || body["app_ping"].(map[string]any)["every"] != "25s" {
		t.Fatalf("status: %d %v", status, body)
	}
	out, err := e.Dynamo.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.Table, Key: sessionitem.Key("src-1"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	// The stored spec (in the spec item the session names) holds the open
	// message ingest will never show.
	ref, _ := out.Item[schema.AttrSpecRef].(*types.AttributeValueMemberS)
	if ref == nil {
		t.Fatalf("no %s in %v", schema.AttrSpecRef, out.Item)
	}
	out, err = e.Dynamo.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.Table, Key: sessionitem.Key(schema.SpecKey("src-1", ref.Value)), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	if sp, ok := out.Item[schema.AttrSpec].(*types.AttributeValueMemberS); !ok || !strings.Contains(sp.Value, "0pen-secret") {
		t.Fatalf("no %s attribute with the open message in %v", schema.AttrSpec, out.Item)
	}
	raw, _ := json.Marshal(body)
	if strings.Contains(string(raw), "0pen-secret") || strings.Contains(logs.String(), "0pen-secret") {
		t.Fatal("an open message reached the GET body or the request log")
	}

	status, body, _ = c.do("POST", "/sessions", `{"connection_id":"src-2","ws_url":"wss://stream.example.com/ws","open_messages":[{"text":"{{token}}"}]}`)
	if e, _ := body["error"].(map[string]any); status != 400 || e["code"] != source.FieldCode("open_messages") || !strings.Contains(e["message"].(string), "placeholder") {
		t.Fatalf("unknown placeholder: %d %v", status, body)
	}
	if status, _, _ := c.do("GET", "/sessions/src-2", ""); status != 404 {
		t.Fatalf("a refused start was stored: %d", status)
	}
}
