package localfront

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts a Front on a loopback port and returns its base URL.
func serve(t *testing.T, h HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, New(h), 2*time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func client(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func TestFrontTranslatesRequestAndResponse(t *testing.T) {
	var got events.APIGatewayV2HTTPRequest
	base := serve(t, func(_ context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		got = req
		return events.APIGatewayV2HTTPResponse{StatusCode: 202, Headers: map[string]string{"Content-Type": "application/json", "X-Out": "1"},
			Cookies: []string{"a=b"}, Body: `{"ok":true}`}, nil
	})
	req, _ := http.NewRequest("POST", base+"/sessions/a%3Ab/stop?x=1&x=2&y=%20z", strings.NewReader(`{"k":"v"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("X-Multi", "1")
	req.Header.Add("X-Multi", "2")
	req.Header.Set("Cookie", "c1=v1; c2=v2")
	req.Header.Set("User-Agent", "test-agent")
	resp, err := client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 202 || string(body) != `{"ok":true}` || resp.Header.Get("X-Out") != "1" || resp.Header.Get("Set-Cookie") != "a=b" {
		t.Fatalf("response %d %s %v", resp.StatusCode, body, resp.Header)
	}
	if got.Version != "2.0" || got.RawPath != "/sessions/a%3Ab/stop" || got.RequestContext.HTTP.Path != "/sessions/a:b/stop" ||
		got.RequestContext.HTTP.Method != "POST" || got.RawQueryString != "x=1&x=2&y=%20z" {
		t.Fatalf("event path/method: %+v", got)
	}
	if got.QueryStringParameters["x"] != "1,2" || got.QueryStringParameters["y"] != " z" {
		t.Fatalf("query %v", got.QueryStringParameters)
	}
	if got.Headers["content-type"] != "application/json" || got.Headers["x-multi"] != "1,2" || got.Headers["cookie"] != "" {
		t.Fatalf("headers %v", got.Headers)
	}
	if strings.Join(got.Cookies, ";") != "c1=v1;c2=v2" {
		t.Fatalf("cookies %v", got.Cookies)
	}
	if got.Body != `{"k":"v"}` || got.IsBase64Encoded || got.RequestContext.RequestID == "" || got.RequestContext.HTTP.SourceIP != "127.0.0.1" ||
		got.RequestContext.HTTP.UserAgent != "test-agent" || got.RequestContext.Stage != "$default" || got.RequestContext.TimeEpoch == 0 {
		t.Fatalf("event: %+v", got)
	}
}

func TestFrontBinaryBodiesAndErrors(t *testing.T) {
	var got events.APIGatewayV2HTTPRequest
	fail := false
	base := serve(t, func(_ context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		got = req
		if fail {
			return events.APIGatewayV2HTTPResponse{}, errors.New("handler error")
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 200, IsBase64Encoded: true, Body: base64.StdEncoding.EncodeToString([]byte{0xff, 0x00})}, nil
	})
	c := client(t)
	resp, err := c.Post(base+"/x", "application/octet-stream", strings.NewReader("\xff\xfe"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !got.IsBase64Encoded || got.Body != base64.StdEncoding.EncodeToString([]byte("\xff\xfe")) {
		t.Fatalf("binary request body: %+v", got)
	}
	if string(b) != "\xff\x00" {
		t.Fatalf("binary response body %q", b)
	}
	fail = true
	resp, err = c.Get(base + "/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(b), "Internal Server Error") {
		t.Fatalf("handler error: %d %s", resp.StatusCode, b)
	}
}

func TestFrontRefusesOversizedPayload(t *testing.T) {
	called := false
	base := serve(t, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		called = true
		return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
	})
	resp, err := client(t).Post(base+"/sessions", "application/json", strings.NewReader(strings.Repeat("a", MaxPayloadBytes+1)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || called {
		t.Fatalf("status %d, called %v", resp.StatusCode, called)
	}
}

func TestServeReturnsListenerErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if err := Serve(context.Background(), ln, http.NotFoundHandler(), time.Second); err == nil {
		t.Fatal("Serve on a closed listener returned nil")
	}
}
