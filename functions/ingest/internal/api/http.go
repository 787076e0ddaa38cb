package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/functions/ingest/internal/sessions"
)

// call is one request being served: what ServeHTTP, the route handlers and
// the request's log line share.
type call struct {
	method    string // as received (the log's method)
	sourceIP  string
	requestID string // API Gateway's, or a fresh one when served without it
	path      string // routePath: what is routed and signed
	log       zerolog.Logger
	reply     reply
}

type callKey struct{}

func callOf(req *http.Request) *call { return req.Context().Value(callKey{}).(*call) }

var errRouteNotFound = &apiError{status: http.StatusNotFound, code: CodeRouteNotFound, message: "no such route"}

// routes is the API's ServeMux: one pattern per route, then, for each of
// their paths, a method-less pattern answering every other method with 405
// (HEAD too where GET is allowed: a GET pattern would serve it), and "/"
// answering every other path with 404.
func (h *Handler) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for _, route := range []string{routeStart, routeList, routeStatus, routeStop, routeWorkers} {
		mux.Handle(route, h.route(route))
	}
	for _, p := range []struct{ path, route, allow, hint string }{
		{"/sessions", "", "GET, POST", " (GET /sessions lists the sessions, POST /sessions starts one)"},
		{"/sessions/{id}", routeStatus, http.MethodGet, " (GET /sessions/{id} reads a session; to stop it: POST /sessions/{id}/stop)"},
		{"/sessions/{id}/stop", routeStop, http.MethodPost, " (POST /sessions/{id}/stop stops the session)"},
		{"/workers", routeWorkers, http.MethodGet, " (GET /workers lists the workers)"},
	} {
		refusal := refuse(p.route, &apiError{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed, message: "use " + p.allow + p.hint})
		mux.Handle(p.path, refusal)
		if strings.Contains(p.allow, http.MethodGet) {
			mux.Handle(http.MethodHead+" "+p.path, refusal)
		}
	}
	mux.Handle("/", refuse("", errRouteNotFound))
	return mux
}

// ServeHTTP serves one request. The ServeMux only chooses the route: it is
// handed a ResponseWriter that drops anything written to it, and every
// answer, refusals included, is the JSON that ServeHTTP writes from the
// call's reply. So the mux's own plain-text 404, 405 and redirects never
// reach a client (should the mux ever answer itself, the client gets
// route_not_found).
func (h *Handler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := h.clock.Now()
	c := h.newCall(req.Context(), req.Method, sourceIP(req), requestID(req))
	c.path = routePath(req)
	defer func() {
		if p := recover(); p != nil {
			c.reply = reply{err: &apiError{status: http.StatusInternalServerError, code: CodeInternal, message: "internal error"},
				cause: fmt.Errorf("panic: %v", p), route: c.reply.route}
		}
		h.finish(c, h.write(w, c.reply), start)
	}()
	h.mux.ServeHTTP(discard{}, routed(req, c))
}

// newCall starts a call whose reply, until a route sets it, is 404
// route_not_found.
func (h *Handler) newCall(ctx context.Context, method, sourceIP, requestID string) *call {
	c := &call{method: method, sourceIP: sourceIP, requestID: requestID, reply: reply{err: errRouteNotFound}}
	lc := h.log.With().Str("request_id", requestID)
	if l, ok := lambdacontext.FromContext(ctx); ok {
		lc = lc.Str("aws_request_id", l.AwsRequestID)
	}
	c.log = lc.Logger()
	return c
}

// route serves one of the API's routes.
func (h *Handler) route(route string) http.HandlerFunc {
	return func(_ http.ResponseWriter, req *http.Request) {
		c := callOf(req)
		c.reply = reply{route: route} // a panic below still logs the route
		c.reply = h.serveRoute(req, c, route)
	}
}

// refuse answers e.
func refuse(route string, e *apiError) http.HandlerFunc {
	return func(_ http.ResponseWriter, req *http.Request) { callOf(req).reply = reply{route: route, err: e} }
}

// serveRoute checks the path's connection id, reads the body, checks the
// signature, then serves the route.
func (h *Handler) serveRoute(req *http.Request, c *call, route string) reply {
	ctx := req.Context()
	r := reply{route: route}
	if route == routeStatus || route == routeStop {
		id := req.PathValue("id")
		if e := CheckConnectionID(id); e != nil {
			r.err = e
			return r
		}
		r.connID = id
	}
	body, e := h.readBody(req)
	if e != nil {
		r.err = e
		return r
	}
	if h.verifier != nil {
		if e, cause := h.checkSignature(ctx, req, c.path, body); e != nil {
			r.err, r.cause = e, cause
			return r
		}
	}
	switch route {
	case routeStart:
		return h.start(ctx, req, body, r, &c.log)
	case routeStop:
		return h.stop(ctx, req, body, r, &c.log)
	case routeStatus:
		return h.status(ctx, r)
	case routeWorkers:
		return h.workers(ctx, req, r)
	default:
		return h.list(ctx, req, r)
	}
}

// checkSignature verifies a signed request and then remembers its nonce,
// so that the same request is accepted once: a replay within the window is
// refused before it reaches the session table or the queue.
// The error returned with a 503 is its cause, for the log line.
func (h *Handler) checkSignature(ctx context.Context, req *http.Request, path string, body []byte) (*apiError, error) {
	sr := SignedRequest{Timestamp: header(req, HeaderTimestamp), Nonce: header(req, HeaderNonce),
		Method: req.Method, Path: path, Query: req.URL.RawQuery, Body: body}
	until, e := h.verifier.Verify(h.clock.Now(), header(req, HeaderSignature), sr)
	if e != nil {
		return e, nil
	}
	nctx, cancel := context.WithTimeout(ctx, h.cfg.StoreTimeout)
	defer cancel()
	switch err := h.nonces.RememberNonce(nctx, sr.Nonce, until.Add(time.Minute)); {
	case errors.Is(err, sessions.ErrReplay):
		return unauthorized(CodeReplayed, "this "+HeaderNonce+" was already used: sign every request, retries included, with a new nonce"), nil
	case err != nil:
		return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable,
			message: "the session table is unavailable; nothing was done, retry with a new nonce", retryable: true}, err
	}
	return nil, nil
}

// write writes a reply as the response and returns its status.
func (h *Handler) write(w http.ResponseWriter, r reply) int {
	status, body := r.status, r.body
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	if r.err != nil {
		status = r.err.status
		body = errorBody{Error: errorDetail{Code: r.err.code, Message: r.err.message, Retryable: r.err.retryable}}
		if r.err.retryable {
			hd.Set("Retry-After", retryAfterSecs)
		}
	}
	b, err := json.Marshal(body)
	if err != nil { // only our own types are marshalled: unreachable
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return status
}

// finish writes the request's log line and flushes its metrics.
func (h *Handler) finish(c *call, status int, start time.Time) {
	r, log := c.reply, &c.log
	code := ""
	if r.err != nil {
		code = r.err.code
		h.meter.reject(code)
	}
	ev := log.Info()
	if status >= 500 {
		ev = log.Error().Err(r.cause)
	} else if r.cause != nil {
		ev = log.Warn().Err(r.cause)
	}
	ev = ev.Str("method", c.method).Str("route", r.route).Int("status", status).Str("source_ip", c.sourceIP)
	if code != "" {
		ev = ev.Str("code", code)
	}
	if r.connID != "" {
		ev = ev.Str("connection_id", r.connID)
	}
	if r.generation != 0 {
		ev = ev.Int64("generation", r.generation)
	}
	if r.outcome != "" {
		ev = ev.Str("outcome", string(r.outcome))
	}
	if r.notified != nil {
		ev = ev.Bool("notified", *r.notified)
	}
	if r.wsURL != "" {
		ev = ev.Str("ws_url", r.wsURL).Int("header_count", r.headers)
	}
	ev.Float64("duration_ms", float64(h.clock.Now().Sub(start).Microseconds())/1000).Msg("request")
	if err := h.meter.flush(h.clock.Now()); err != nil {
		log.Warn().Err(err).Msg("metrics not written")
	}
}

// routePath is the request's path as sent (percent-encoded: ids are not
// decoded yet), without the API Gateway stage prefix and without one
// trailing slash. It is what the routes match and what a signature covers.
// Behind API Gateway the adapter builds the URL from the event's rawPath, so
// this is rawPath as API Gateway delivered it (EscapedPath gives back the
// raw form whenever it is a valid encoding, which every routable path is).
func routePath(req *http.Request) string {
	p := req.URL.EscapedPath()
	if gw, ok := core.GetAPIGatewayV2ContextFromContext(req.Context()); ok {
		if st := gw.Stage; st != "" && st != "$default" {
			if rest, ok := strings.CutPrefix(p, "/"+st); ok && (rest == "" || rest[0] == '/') {
				p = rest
			}
		}
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

// routed is req as the mux sees it: c in its context, the method
// upper-cased (the API always took it so), and the path c.path with each
// empty, "." or ".." segment percent-encoded (as %00, %2E, %2E%2E). The mux
// would redirect such a path to its cleaned form; encoded, it is matched as
// it was sent: such a segment is never a route's name nor a valid connection
// id, so "/sessions//stop" and "/sessions/.." answer invalid_connection_id
// and other such paths route_not_found.
func routed(req *http.Request, c *call) *http.Request {
	r := req.WithContext(context.WithValue(req.Context(), callKey{}, c))
	r.Method = strings.ToUpper(req.Method)
	u := *req.URL
	u.RawPath = muxPath(c.path)
	u.Path, _ = url.PathUnescape(u.RawPath) // c.path is a valid encoding (EscapedPath)
	r.URL = &u
	return r
}

func muxPath(p string) string {
	if p == "" || p == "/" {
		return "/"
	}
	if p[0] != '/' { // "*": the mux redirects, which answers route_not_found
		return p
	}
	seg := strings.Split(p[1:], "/")
	for i, s := range seg {
		switch s {
		case "":
			seg[i] = "%00"
		case ".":
			seg[i] = "%2E"
		case "..":
			seg[i] = "%2E%2E"
		}
	}
	return "/" + strings.Join(seg, "/")
}

// discard is the mux's ResponseWriter: ServeHTTP writes the response.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// unreadableBodyKey marks a request whose event body was not valid base64.
type unreadableBodyKey struct{}

// readBody returns the raw body, refusing bodies over MaxBodyBytes.
func (h *Handler) readBody(req *http.Request) ([]byte, *apiError) {
	if bad, _ := req.Context().Value(unreadableBodyKey{}).(bool); bad {
		return nil, badRequest(CodeInvalidJSON, "body is not valid base64")
	}
	max := h.cfg.MaxBodyBytes
	tooLarge := badRequest(CodeBodyTooLarge, "body is larger than "+strconv.Itoa(max)+" bytes")
	if req.ContentLength > int64(max) {
		return nil, tooLarge
	}
	if req.Body == nil {
		return []byte{}, nil
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, int64(max)+1))
	if err != nil {
		return nil, badRequest(CodeInvalidBody, "the body could not be read")
	}
	if len(b) > max {
		return nil, tooLarge
	}
	return b, nil
}

// header returns a request header; repeated ones joined with commas, as API
// Gateway joins them (so a repeated signing header is refused, not one of
// its values picked).
func header(req *http.Request, name string) string {
	return strings.Join(req.Header.Values(name), ",")
}

// requestID is API Gateway's request id, or a new one shaped like it
// (base64 of 10 random bytes) for a request served without API Gateway.
func requestID(req *http.Request) string {
	if gw, ok := core.GetAPIGatewayV2ContextFromContext(req.Context()); ok {
		return gw.RequestID
	}
	var b [10]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

// sourceIP is the client's address as API Gateway saw it, or the peer's.
func sourceIP(req *http.Request) string {
	if gw, ok := core.GetAPIGatewayV2ContextFromContext(req.Context()); ok {
		return gw.HTTP.SourceIP
	}
	if host, _, err := net.SplitHostPort(req.RemoteAddr); err == nil {
		return host
	}
	return req.RemoteAddr
}
