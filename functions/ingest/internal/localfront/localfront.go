// Package localfront owns ingest's local HTTP front: a small net/http server
// that turns each real HTTP request into the API Gateway HTTP API (payload
// format 2.0) event the Lambda would receive, calls the handler directly and
// writes its response back, as API Gateway would. The local stack and the
// docs' curl examples use it; it is not deployed.
package localfront

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// HandlerFunc is a Lambda handler for API Gateway v2 events.
type HandlerFunc func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// MaxPayloadBytes is API Gateway's request payload limit (10 MB): larger
// requests get 413 before the handler runs, as in AWS.
const MaxPayloadBytes = 10 << 20

// Front serves HTTP by calling a handler with API Gateway v2 events.
type Front struct {
	handler HandlerFunc
	now     func() time.Time
}

// New returns a Front calling h.
func New(h HandlerFunc) *Front { return &Front{handler: h, now: time.Now} }

// ServeHTTP implements http.Handler.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxPayloadBytes+1))
	if err != nil {
		writeGatewayError(w, http.StatusBadRequest, "Bad Request")
		return
	}
	if len(body) > MaxPayloadBytes {
		writeGatewayError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		return
	}
	ev := Event(r, body, newRequestID(), f.now())
	resp, err := f.handler(r.Context(), ev)
	if err != nil {
		writeGatewayError(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	WriteResponse(w, resp)
}

// Event builds the API Gateway v2 event of r (whose body was read into body).
// Header names are lower-cased and repeated values joined with commas, as
// API Gateway does; cookies move to Cookies.
func Event(r *http.Request, body []byte, requestID string, now time.Time) events.APIGatewayV2HTTPRequest {
	headers := make(map[string]string, len(r.Header))
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if lk == "cookie" {
			continue
		}
		headers[lk] = strings.Join(vs, ",")
	}
	if r.Host != "" {
		headers["host"] = r.Host
	}
	var cookies []string
	for _, c := range r.Cookies() {
		cookies = append(cookies, c.Name+"="+c.Value)
	}
	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = make(map[string]string, len(q))
		for k, vs := range q {
			query[k] = strings.Join(vs, ",")
		}
	}
	sourceIP := r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		sourceIP = host
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              "$default",
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     "$default",
			AccountID:    "000000000000",
			Stage:        "$default",
			RequestID:    requestID,
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: strings.Split(r.Host, ".")[0],
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body = base64.StdEncoding.EncodeToString(body)
			ev.IsBase64Encoded = true
		}
	}
	return ev
}

// WriteResponse writes a handler's response as API Gateway would.
func WriteResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) {
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			writeGatewayError(w, http.StatusInternalServerError, "Internal Server Error")
			return
		}
		body = b
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	status := resp.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeGatewayError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, "{\"message\":%q}", msg)
}

// newRequestID returns an id shaped like API Gateway's (base64 of 10 random bytes).
func newRequestID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

// Serve serves h on ln until ctx is done, then shuts down gracefully (within
// shutdownGrace) and returns nil. It returns the server's error otherwise.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, shutdownGrace time.Duration) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("local front: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("local front shutdown: %w", err)
	}
	return nil
}
