package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/config"
	"github.com/wsfleet/wsfleet/shared/source"
)

const validStart = `{"connection_id":"c1","ws_url":"wss://a.example.com"}`

// serve serves req with net/http's httptest recorder, as ingest-local
// serves it (no API Gateway, no adapter).
func (f *fixture) serve(t *testing.T, req *http.Request) (int, map[string]any, *http.Response) {
	t.Helper()
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	resp := rec.Result()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%s %s: headers %v", req.Method, req.URL, resp.Header)
	}
	if resp.Header.Get("Location") != "" || resp.Header.Get("Allow") != "" {
		t.Fatalf("%s %s: the mux answered: %v", req.Method, req.URL, resp.Header)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s %s: body %q: %v", req.Method, req.URL, rec.Body.Bytes(), err)
	}
	return resp.StatusCode, body, resp
}

// lastLog is the last request log line.
func (f *fixture) lastLog(t *testing.T) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(f.logs.String()), "\n")
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil {
		t.Fatalf("log line %q: %v", lines[len(lines)-1], err)
	}
	return line
}

// The routes, and how every other method and path is answered: the same
// through the adapter (API Gateway events) and over net/http, the mux's own
// plain-text 404, 405 and redirects never.
func TestRoutesAndRefusals(t *testing.T) {
	badID := source.FieldCode("connection_id") // a path's id is refused as the body's
	cases := []struct {
		method, path, body string
		status             int
		code, route, id    string
		eventOnly          bool // not a request net/http would parse
	}{
		{"POST", "/sessions", validStart, 202, "", routeStart, "c1", false},
		{"GET", "/sessions", "", 200, "", routeList, "", false},
		{"GET", "/sessions/abc", "", 200, "", routeStatus, "abc", false},
		{"GET", "/sessions/a%3Ab", "", 200, "", routeStatus, "a:b", false},
		{"POST", "/sessions/abc/stop", "", 202, "", routeStop, "abc", false},
		{"GET", "/workers", "", 200, "", routeWorkers, "", false},
		{"GET", "/sessions/", "", 200, "", routeList, "", false}, // one trailing slash is dropped
		{"GET", "/sessions/abc/", "", 200, "", routeStatus, "abc", false},
		{"POST", "/sessions/abc/stop/", "", 202, "", routeStop, "abc", false},
		{"GET", "/workers/", "", 200, "", routeWorkers, "", false},
		{"get", "/sessions/abc", "", 200, "", routeStatus, "abc", false}, // methods are upper-cased
		{"DELETE", "/sessions", "", 405, CodeMethodNotAllowed, "", "", false},
		{"PUT", "/sessions/abc", "", 405, CodeMethodNotAllowed, routeStatus, "", false},
		{"POST", "/sessions/abc", "", 405, CodeMethodNotAllowed, routeStatus, "", false},
		{"GET", "/sessions/abc/stop", "", 405, CodeMethodNotAllowed, routeStop, "", false},
		{"POST", "/workers", "", 405, CodeMethodNotAllowed, routeWorkers, "", false},
		{"HEAD", "/sessions", "", 405, CodeMethodNotAllowed, "", "", false}, // not served as a GET
		{"HEAD", "/sessions/abc", "", 405, CodeMethodNotAllowed, routeStatus, "", false},
		{"HEAD", "/workers", "", 405, CodeMethodNotAllowed, routeWorkers, "", false},
		{"OPTIONS", "/sessions", "", 405, CodeMethodNotAllowed, "", "", false},
		{"CONNECT", "/sessions", "", 405, CodeMethodNotAllowed, "", "", false},
		{"DELETE", "/sessions/a%20b", "", 405, CodeMethodNotAllowed, routeStatus, "", false}, // the method before the id
		{"POST", "/sessions/abc/start", "", 404, CodeRouteNotFound, "", "", false},
		{"GET", "/", "", 404, CodeRouteNotFound, "", "", false},
		{"POST", "/", "", 404, CodeRouteNotFound, "", "", false},
		{"GET", "/other", "", 404, CodeRouteNotFound, "", "", false},
		{"GET", "/sessions/a/b/c", "", 404, CodeRouteNotFound, "", "", false},
		{"GET", "/workers/w1", "", 404, CodeRouteNotFound, "", "", false},
		{"GET", "/Sessions", "", 404, CodeRouteNotFound, "", "", false},
		{"GET", "//sessions", "", 404, CodeRouteNotFound, "", "", false},
		{"GET", "/a/../sessions", "", 404, CodeRouteNotFound, "", "", false},
		{"GET", "/sessions/abc/./stop", "", 404, CodeRouteNotFound, "", "", false},
		{"GET", "/sessions%2Fabc", "", 404, CodeRouteNotFound, "", "", false},
		{"GET", "/sessions/a%2Fb", "", 400, badID, routeStatus, "", false},
		{"GET", "/sessions/a%20b", "", 400, badID, routeStatus, "", false},
		{"GET", "/sessions/..", "", 400, badID, routeStatus, "", false},
		{"GET", "/sessions/.", "", 400, badID, routeStatus, "", false},
		{"GET", "/sessions/%2e%2e", "", 400, badID, routeStatus, "", false},
		{"POST", "/sessions/./stop", "", 400, badID, routeStop, "", false},
		{"POST", "/sessions//stop", "", 400, badID, routeStop, "", false},
		{"GET", "/sessions//", "", 400, badID, routeStatus, "", false},
		{"POST", "/sessions//", "", 405, CodeMethodNotAllowed, routeStatus, "", false},
		{"GET", "/sessions/" + strings.Repeat("a", 129), "", 400, badID, routeStatus, "", false},
		// Events API Gateway would not deliver, answered as the route they name.
		{"GET", "/sessions/%zz", "", 400, badID, routeStatus, "", true},
		{"GET", "/sessions/a%", "", 400, badID, routeStatus, "", true},
		{"GET", "/sessions/a b", "", 400, badID, routeStatus, "", true},
		{"GET", "/sessions/a#b", "", 400, badID, routeStatus, "", true},
		{"GET", "/sessions/a?b", "", 400, badID, routeStatus, "", true},
		{"POST", "/sessions/a\x01b/stop", "", 400, badID, routeStop, "", true},
		{"GET", "/nope%zz", "", 404, CodeRouteNotFound, "", "", true},
		{"GET", "sessions", "", 200, "", routeList, "", true}, // the adapter adds the leading slash
		{"", "/sessions", "", 405, CodeMethodNotAllowed, "", "", true},
		{"GE T", "/sessions", "", 405, CodeMethodNotAllowed, "", "", true},
		{"GET\n", "/nope", "", 405, CodeMethodNotAllowed, "", "", true},
	}
	check := func(t *testing.T, f *fixture, how, method, path string, status int, body map[string]any, want int, code, route, id string) {
		t.Helper()
		got := ""
		if want >= 400 {
			got, _ = errorOf(t, body)
		}
		line := f.lastLog(t)
		logged, _ := line["connection_id"].(string)
		if status != want || got != code || line["route"] != route || logged != id || line["status"] != float64(want) {
			t.Errorf("%s %q %q: %d %q, logged route %v id %q; want %d %q, %q %q", how, method, path, status, got, line["route"], logged, want, code, route, id)
		}
	}
	f := newFixture(t, nil)
	for _, c := range cases {
		ev := event(c.method, c.path, c.body)
		status, body, _ := f.do(t, ev)
		check(t, f, "event", c.method, c.path, status, body, c.status, c.code, c.route, c.id)
		if c.eventOnly {
			continue
		}
		req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		status, body, _ = f.serve(t, req)
		check(t, f, "http", c.method, c.path, status, body, c.status, c.code, c.route, c.id)
	}
	// A named stage prefixes the raw path: it is not part of the route.
	for path, want := range map[string]int{"/prod/sessions/x/stop": 202, "/prod/sessions": 200, "/prod": 404, "/production/sessions": 404, "/sessions": 200} {
		ev := event("GET", path, "")
		if want == 202 {
			ev = event("POST", path, "")
		}
		ev.RequestContext.Stage = "prod"
		if status, body, _ := f.do(t, ev); status != want {
			t.Errorf("stage prod, %s: %d %v, want %d", path, status, body, want)
		}
	}
	if n := len(f.store.stopped); n == 0 || f.store.stopped[n-1] != "x" {
		t.Fatalf("staged stop stopped %v", f.store.stopped)
	}
}

// Over a real net/http server (as ingest-local serves it): JSON everywhere,
// no redirect for an unclean path, no mux 405 with its Allow header.
func TestServedOverHTTPNeverAnswersPlainText(t *testing.T) {
	f := newFixture(t, nil)
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, method := range []string{"GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "BREW"} {
		for _, path := range []string{"/", "/nope", "/sessions", "/sessions/", "/sessions/..", "/sessions/x/..", "//sessions", "/sessions//stop",
			"/sessions/abc/stop", "/sessions/abc", "/sessions/a%2F..%2Fb", "/workers", "/workers/", "/workers/x", "/sessions?state=x"} {
			req, err := http.NewRequest(method, srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode >= 300 && resp.StatusCode < 400 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Allow") != "" {
				t.Fatalf("%s %s: %d %v %q", method, path, resp.StatusCode, resp.Header, b)
			}
			if method == "HEAD" {
				if resp.StatusCode != 405 && resp.StatusCode != 404 && resp.StatusCode != 400 {
					t.Fatalf("HEAD %s: %d", path, resp.StatusCode)
				}
				continue
			}
			var body map[string]any
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("%s %s: %d %q is not JSON", method, path, resp.StatusCode, b)
			}
			if resp.StatusCode >= 400 {
				errorOf(t, body)
			}
		}
	}
}

// What ingest-local's requests carry to the handler: the path as sent
// (percent-encoded ids decoded once, by the route), the query, repeated
// headers joined, a non-UTF-8 body as it is, the peer's address as the
// source IP and a request id of its own.
func TestServeHTTPRequestParts(t *testing.T) {
	f := newFixture(t, nil)
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	c := srv.Client()
	req, _ := http.NewRequest("POST", srv.URL+"/sessions/a%3Ab/stop", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "test-agent")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 || len(f.store.stopped) != 1 || f.store.stopped[0] != "a:b" {
		t.Fatalf("stop a%%3Ab: %d %v", resp.StatusCode, f.store.stopped)
	}
	line := f.lastLog(t)
	if line["source_ip"] != "127.0.0.1" || line["method"] != "POST" || line["request_id"] == "" || line["request_id"] == nil || line["aws_request_id"] != nil {
		t.Fatalf("log line %v", line)
	}
	first := line["request_id"]
	resp, err = c.Get(srv.URL + "/sessions?state=STOPPED&limit=3")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || f.store.listArg != [3]string{"STOPPED", "3", ""} || f.lastLog(t)["request_id"] == first {
		t.Fatalf("list: %d %v %v", resp.StatusCode, f.store.listArg, f.lastLog(t))
	}
	// Two Content-Type headers are one joined value: refused.
	req, _ = http.NewRequest("POST", srv.URL+"/sessions", strings.NewReader(validStart))
	req.Header.Add("Content-Type", "application/json")
	req.Header.Add("Content-Type", "application/json")
	status, body := send(t, c, req)
	if code, _ := errorOf(t, body); status != 400 || code != CodeInvalidContentType {
		t.Fatalf("repeated content type: %d %s", status, code)
	}
	// A binary body reaches the decoder as it is.
	req, _ = http.NewRequest("POST", srv.URL+"/sessions", strings.NewReader("\xff\xfe"))
	req.Header.Set("Content-Type", "application/json")
	status, body = send(t, c, req)
	if code, msg := errorOf(t, body); status != 400 || code != CodeInvalidJSON || !strings.Contains(msg, "UTF-8") {
		t.Fatalf("binary body: %d %s %s", status, code, msg)
	}
}

func send(t *testing.T, c *http.Client, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// Bodies: the limit, base64 (through the adapter), and the content type.
func TestBodyLimitAndContentType(t *testing.T) {
	f := newFixture(t, nil)
	max := config.DefaultMaxBodyBytes
	post := func(body string, b64 bool) (int, string, string) {
		ev := event("POST", "/sessions", body)
		ev.IsBase64Encoded = b64
		status, out, _ := f.do(t, ev)
		if status < 400 {
			return status, "", ""
		}
		code, msg := errorOf(t, out)
		return status, code, msg
	}
	if _, code, _ := post(strings.Repeat(" ", max), false); code != CodeInvalidJSON { // at the limit: read, then decoded
		t.Fatalf("at the limit: %s", code)
	}
	if status, code, _ := post(strings.Repeat(" ", max+1), false); status != 400 || code != CodeBodyTooLarge {
		t.Fatalf("over the limit: %d %s", status, code)
	}
	if status, code, _ := post(base64.StdEncoding.EncodeToString([]byte(strings.Repeat(" ", max+1))), true); status != 400 || code != CodeBodyTooLarge {
		t.Fatalf("base64 over the limit: %d %s", status, code)
	}
	if status, code, msg := post(base64.StdEncoding.EncodeToString([]byte(`{"a":1}`)), true); status != 400 || code != CodeUnknownField || !strings.Contains(msg, `"a"`) {
		t.Fatalf("base64 body not decoded: %d %s %s", status, code, msg)
	}
	if status, _, _ := post(base64.StdEncoding.EncodeToString([]byte(validStart)), true); status != 202 {
		t.Fatalf("base64 start: %d", status)
	}
	if status, code, msg := post("!!", true); status != 400 || code != CodeInvalidJSON || msg != "body is not valid base64" {
		t.Fatalf("bad base64: %d %s %s", status, code, msg)
	}
	// The route still comes first: a bad base64 body on no route is a 404.
	ev := event("POST", "/nope", "!!")
	ev.IsBase64Encoded = true
	if status, _, _ := f.do(t, ev); status != 404 {
		t.Fatalf("bad base64 on no route: %d", status)
	}

	// Over HTTP: refused from its Content-Length without reading it, and a
	// chunked one (no length) read only up to the limit.
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	started := len(f.store.started)
	for _, chunked := range []bool{false, true} {
		var r io.Reader = strings.NewReader(strings.Repeat(" ", 4*max))
		if chunked {
			r = io.MultiReader(r) // hides the length
		}
		req, _ := http.NewRequest("POST", srv.URL+"/sessions", r)
		req.Header.Set("Content-Type", "application/json")
		status, body := send(t, srv.Client(), req)
		if code, _ := errorOf(t, body); status != 400 || code != CodeBodyTooLarge {
			t.Fatalf("chunked %v: %d %s", chunked, status, code)
		}
	}
	if len(f.store.started) != started {
		t.Fatal("an oversized body reached the store")
	}

	ct := func(headers map[string]string) int {
		ev := event("POST", "/sessions", validStart)
		ev.Headers = headers
		status, _, _ := f.do(t, ev)
		return status
	}
	for _, ok := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; charset=UTF-8"} {
		if status := ct(map[string]string{"content-type": ok}); status != 202 {
			t.Fatalf("%q: %d", ok, status)
		}
	}
	for _, bad := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", "application/json; x=y", "application/jsonp", "multipart/form-data; boundary=x"} {
		ev := event("POST", "/sessions", validStart)
		ev.Headers["content-type"] = bad
		status, body, _ := f.do(t, ev)
		if code, _ := errorOf(t, body); status != 400 || code != CodeInvalidContentType {
			t.Fatalf("%q: %d %s", bad, status, code)
		}
	}
	if status := ct(map[string]string{"Content-Type": "application/json"}); status != 202 {
		t.Fatalf("mixed-case header name: %d", status)
	}
}

func TestListParams(t *testing.T) {
	f := newFixture(t, nil)
	list := func(raw string) (int, string) {
		ev := event("GET", "/sessions", "")
		ev.RawQueryString = raw
		status, body, _ := f.do(t, ev)
		if status != 200 {
			code, _ := errorOf(t, body)
			return status, code
		}
		return status, ""
	}
	if status, _ := list(""); status != 200 || f.store.listArg != [3]string{"STARTED", strconv.Itoa(DefaultListLimit), ""} {
		t.Fatalf("defaults: %d %v", status, f.store.listArg)
	}
	if status, _ := list("state=stopped&limit=100&next=abc"); status != 200 || f.store.listArg != [3]string{"STOPPED", "100", "abc"} {
		t.Fatalf("explicit: %d %v", status, f.store.listArg)
	}
	for _, bad := range []string{"state=RUNNING", "limit=0", "limit=101", "limit=x", "limit=-1", "next=", "next=" + strings.Repeat("a", 513),
		"state=STARTED&state=STOPPED", "limt=5", "%zz", "state=STARTED%23x", "state=\x01", "state=STARTED#x"} {
		if status, code := list(bad); status != 400 || code != CodeInvalidQuery {
			t.Fatalf("%q: %d %s", bad, status, code)
		}
	}
	// Without a raw query string, the adapter encodes the parsed map.
	ev := event("GET", "/sessions", "")
	ev.QueryStringParameters = map[string]string{"state": "STOPPED"}
	if status, body, _ := f.do(t, ev); status != 200 || f.store.listArg[0] != "STOPPED" {
		t.Fatalf("map: %d %v", status, body)
	}
}

// Through the adapter the handler reads API Gateway's request id and
// source IP from the event's request context and Lambda's request id from
// the invocation's context; the response event has only the handler's
// headers, as a text body.
func TestLambdaCarriesTheEventsContext(t *testing.T) {
	f := newFixture(t, nil)
	ev := event("GET", "/sessions/c1", "")
	ev.RequestContext.RequestID = "apigw-7"
	ev.RequestContext.HTTP.SourceIP = "198.51.100.4"
	ev.Headers["x-forwarded-for"] = "192.0.2.1"
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "lambda-7"})
	resp, err := f.h.Lambda()(ctx, ev)
	if err != nil || resp.StatusCode != 200 || resp.IsBase64Encoded || len(resp.Headers) != 2 || resp.Headers["Cache-Control"] != "no-store" {
		t.Fatalf("%+v %v", resp, err)
	}
	line := f.lastLog(t)
	if line["request_id"] != "apigw-7" || line["aws_request_id"] != "lambda-7" || line["source_ip"] != "198.51.100.4" || line["connection_id"] != "c1" {
		t.Fatalf("log line %v", line)
	}
	// A refusal made before the adapter is logged and counted the same way.
	ev.RequestContext.HTTP.Method = "G(T"
	resp, err = f.h.Lambda()(ctx, ev)
	if err != nil || resp.StatusCode != 405 || resp.Headers["Content-Type"] != "application/json" || !strings.Contains(resp.Body, CodeMethodNotAllowed) {
		t.Fatalf("%+v %v", resp, err)
	}
	if line := f.lastLog(t); line["request_id"] != "apigw-7" || line["aws_request_id"] != "lambda-7" || line["code"] != CodeMethodNotAllowed || line["method"] != "G(T" {
		t.Fatalf("log line %v", line)
	}
	if !strings.Contains(f.metrics.String(), `"Code":"method_not_allowed"`) {
		t.Fatalf("refusal not counted:\n%s", f.metrics)
	}
}

// The signature covers the path as sent, percent-encoding included, the
// raw query and the body bytes: the same through the adapter (from the
// event's rawPath, rawQueryString and decoded body) and over net/http.
func TestSigningSeesThePathQueryAndBodyAsSent(t *testing.T) {
	secret := "signing-secret-0123456789"
	f := newFixture(t, func(c *config.Config) { c.SigningSecret = secret })
	ts := strconv.FormatInt(f.clock.Now().Unix(), 10)
	n := 0
	signed := func(method, path, query, body string) (http.Header, SignedRequest) {
		n++
		sr := SignedRequest{Timestamp: ts, Nonce: fmt.Sprintf("nonce-%012d", n), Method: method, Path: path, Query: query, Body: []byte(body)}
		h := http.Header{}
		h.Set(HeaderTimestamp, sr.Timestamp)
		h.Set(HeaderNonce, sr.Nonce)
		h.Set(HeaderSignature, Sign([]byte(secret), sr))
		h.Set("Content-Type", "application/json")
		return h, sr
	}
	viaEvent := func(method, rawPath, signedPath, query, body string, b64 bool) int {
		hd, _ := signed(method, signedPath, query, body)
		ev := event(method, rawPath, body)
		ev.RawQueryString = query
		if b64 {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(body)), true
		}
		for k := range hd {
			ev.Headers[strings.ToLower(k)] = hd.Get(k)
		}
		status, _, _ := f.do(t, ev)
		return status
	}
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	viaHTTP := func(method, rawPath, signedPath, query, body string) int {
		hd, _ := signed(method, signedPath, query, body)
		u := srv.URL + rawPath
		if query != "" {
			u += "?" + query
		}
		req, _ := http.NewRequest(method, u, strings.NewReader(body))
		req.Header = hd
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	startB := `{"connection_id":"a:b","ws_url":"wss://a.example.com/?q=%41"}`
	for _, c := range []struct {
		method, rawPath, signedPath, query, body string
		want                                     int
	}{
		{"GET", "/sessions/a%3Ab", "/sessions/a%3Ab", "", "", 200},
		{"GET", "/sessions/a%3ab", "/sessions/a%3ab", "", "", 200},
		{"GET", "/sessions/a%3Ab", "/sessions/a:b", "", "", 401}, // signed decoded: not what was sent
		{"GET", "/sessions/a:b", "/sessions/a%3Ab", "", "", 401},
		{"GET", "/sessions/a:b/", "/sessions/a:b", "", "", 200}, // the trailing slash is not signed
		{"POST", "/sessions/a%3Ab/stop", "/sessions/a%3Ab/stop", "", "", 202},
		{"GET", "/sessions", "/sessions", "state=STOPPED&limit=5", "", 200},
		{"GET", "/sessions", "/sessions", "limit=5&state=STOPPED", "", 200},
		{"GET", "/sessions", "/sessions", "state=%53TOPPED", "", 200},
		{"POST", "/sessions", "/sessions", "", startB, 202},
		{"POST", "/sessions", "/sessions", "", startB + "\n", 202},
	} {
		if got := viaEvent(c.method, c.rawPath, c.signedPath, c.query, c.body, false); got != c.want {
			t.Errorf("event %s %s signed as %s ?%s: %d, want %d", c.method, c.rawPath, c.signedPath, c.query, got, c.want)
		}
		if c.body != "" {
			if got := viaEvent(c.method, c.rawPath, c.signedPath, c.query, c.body, true); got != c.want {
				t.Errorf("base64 event %s %s: %d, want %d", c.method, c.rawPath, got, c.want)
			}
		}
		if got := viaHTTP(c.method, c.rawPath, c.signedPath, c.query, c.body); got != c.want {
			t.Errorf("http %s %s signed as %s ?%s: %d, want %d", c.method, c.rawPath, c.signedPath, c.query, got, c.want)
		}
	}
	// A named stage is not signed.
	hd, _ := signed("GET", "/sessions/a%3Ab", "", "")
	ev := event("GET", "/prod/sessions/a%3Ab", "")
	ev.RequestContext.Stage = "prod"
	for k := range hd {
		ev.Headers[strings.ToLower(k)] = hd.Get(k)
	}
	if status, body, _ := f.do(t, ev); status != 200 {
		t.Fatalf("staged: %d %v", status, body)
	}
	// A repeated signing header is one joined value, refused as such.
	hd, _ = signed("GET", "/sessions/c1", "", "")
	req, _ := http.NewRequest("GET", srv.URL+"/sessions/c1", nil)
	req.Header = hd
	req.Header.Add(HeaderNonce, "nonce-999999999999")
	status, body := send(t, srv.Client(), req)
	if code, _ := errorOf(t, body); status != 401 || code != CodeBadNonce {
		t.Fatalf("two nonces: %d %s", status, code)
	}
}

func TestEscapePathAndQuery(t *testing.T) {
	for in, want := range map[string]string{
		"/sessions/abc":             "/sessions/abc",
		"/sessions/a%3Ab/stop":      "/sessions/a%3Ab/stop",
		"/a-._~!$&'()*+,;=:@[]/%41": "/a-._~!$&'()*+,;=:@[]/%41",
		"/sessions/%zz":             "/sessions/%25zz",
		"/a%":                       "/a%25",
		"/a%4":                      "/a%254",
		"/a b#c?d\x01\x7f\xff|":     "/a%20b%23c%3Fd%01%7F%FF%7C",
		"":                          "",
	} {
		if got := escapePath(in); got != want {
			t.Errorf("escapePath(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"state=STOPPED&limit=5": "state=STOPPED&limit=5",
		"a=%zz b":               "a=%zz b",
		"a=1#x\x00":             "a=1%23x%00",
	} {
		if got := escapeQuery(in); got != want {
			t.Errorf("escapeQuery(%q) = %q, want %q", in, got, want)
		}
	}
}

// A panic in a route is a JSON 500 over HTTP too, logged with its route.
func TestServeHTTPRecoversFromPanic(t *testing.T) {
	f := newFixture(t, nil)
	f.store.panics = true
	req := httptest.NewRequest("POST", "/sessions", strings.NewReader(validStart))
	req.Header.Set("Content-Type", "application/json")
	status, body, _ := f.serve(t, req)
	if code, _ := errorOf(t, body); status != 500 || code != CodeInternal {
		t.Fatalf("%d %s", status, code)
	}
	if line := f.lastLog(t); line["route"] != routeStart || !strings.Contains(fmt.Sprint(line["error"]), "panic: boom") {
		t.Fatalf("log line %v", line)
	}
}

// A body that cannot be read (the client went away mid-body) is a 400.
func TestServeHTTPUnreadableBody(t *testing.T) {
	f := newFixture(t, nil)
	req := httptest.NewRequest("POST", "/sessions", io.NopCloser(errReader{}))
	req.Header.Set("Content-Type", "application/json")
	status, body, _ := f.serve(t, req)
	if code, _ := errorOf(t, body); status != 400 || code != CodeInvalidBody {
		t.Fatalf("%d %s", status, code)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// TestMethodNotAllowedNamesTheRoute: a 405 says which method the path
// takes and what it does, and points a DELETE of a session at its stop.
func TestMethodNotAllowedNamesTheRoute(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct{ method, path, msg string }{
		{"DELETE", "/sessions/hello", "to stop it: POST /sessions/{id}/stop"},
		{"PUT", "/sessions/hello", "use GET"},
		{"GET", "/sessions/hello/stop", "use POST"},
		{"DELETE", "/sessions", "POST /sessions starts one"},
		{"POST", "/workers", "use GET"},
	} {
		status, body, _ := f.do(t, event(c.method, c.path, ""))
		code, msg := errorOf(t, body)
		if status != 405 || code != CodeMethodNotAllowed || !strings.Contains(msg, c.msg) {
			t.Errorf("%s %s: %d %s %q, want 405 %s containing %q", c.method, c.path, status, code, msg, CodeMethodNotAllowed, c.msg)
		}
	}
}
