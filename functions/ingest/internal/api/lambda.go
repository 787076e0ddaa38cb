package api

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

// LambdaFunc is the Lambda handler of API Gateway HTTP API (payload format
// 2.0) events.
type LambdaFunc func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Lambda returns h as the Lambda handler: httpadapter turns each event into
// an *http.Request (URL from rawPath and rawQueryString, headers from the
// event's, the body base64-decoded when the event says so, RemoteAddr from
// the source IP, and the Lambda context and API Gateway's request context in
// its context), h serves it, and the adapter turns what h wrote into the
// response event. It never returns an error: every failure is an HTTP
// response (a Go error would become API Gateway's bare 500).
//
// Before the adapter, it repairs what the adapter would refuse or misread,
// none of which API Gateway sends a valid request with, so that such an
// event is answered as the route it names: a path byte that url.Parse
// refuses (a '%' starting no escape, a control byte) or that would cut the
// path ('#', '?') is percent-encoded, which only ever makes a connection id
// or a route name invalid; in the query string, the control bytes and '#'
// are; a body that is not valid base64 is dropped and the route answers 400
// invalid_json, as for any unreadable body. A method that is not an HTTP
// token is answered 405 here.
func (h *Handler) Lambda() LambdaFunc {
	adapter := httpadapter.NewV2(h)
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if m := ev.RequestContext.HTTP.Method; m == "" || strings.IndexFunc(m, notToken) >= 0 {
			return h.refuseEvent(ctx, ev, &apiError{status: http.StatusMethodNotAllowed, code: CodeMethodNotAllowed,
				message: "the method is not an HTTP token"}, nil), nil
		}
		ev.RawPath = escapePath(cmp.Or(ev.RawPath, ev.RequestContext.HTTP.Path))
		ev.RawQueryString = escapeQuery(ev.RawQueryString)
		if ev.IsBase64Encoded {
			if _, err := base64.StdEncoding.DecodeString(ev.Body); err != nil {
				ev.Body, ev.IsBase64Encoded = "", false
				ctx = context.WithValue(ctx, unreadableBodyKey{}, true)
			}
		}
		resp, err := adapter.ProxyWithContext(ctx, ev)
		if err != nil { // what the repairs above leave: unreachable
			return h.refuseEvent(ctx, ev, &apiError{status: http.StatusInternalServerError, code: CodeInternal, message: "internal error"},
				fmt.Errorf("httpadapter: %w", err)), nil
		}
		return resp, nil
	}
}

// refuseEvent answers an event that never became a request, logged and
// counted like any other answer.
func (h *Handler) refuseEvent(ctx context.Context, ev events.APIGatewayV2HTTPRequest, e *apiError, cause error) events.APIGatewayV2HTTPResponse {
	start := h.clock.Now()
	c := h.newCall(ctx, ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.SourceIP, ev.RequestContext.RequestID)
	c.reply = reply{err: e, cause: cause}
	w := core.NewProxyResponseWriterV2()
	h.finish(c, h.write(w, c.reply), start)
	resp, _ := w.GetProxyResponse() // fails only when no status was written
	return resp
}

// notToken reports whether r may not appear in an HTTP token (RFC 9110
// tchar), as a method.
func notToken(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r))
}

// escapePath returns p with every byte that may not appear as it is in a
// URL path percent-encoded, valid escapes and the bytes a path may hold
// (RFC 3986 unreserved, sub-delims, ':', '@', '/', and '[' ']' as url.URL
// keeps them) left as they are. A valid path comes back unchanged.
func escapePath(p string) string {
	return escapeBytes(p, func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~!$&'()*+,;=:@/[]", c) >= 0
	}, true)
}

// escapeQuery returns q with its control bytes and '#' percent-encoded.
func escapeQuery(q string) string {
	return escapeBytes(q, func(c byte) bool { return c >= 0x20 && c != 0x7f && c != '#' }, false)
}

// escapeBytes percent-encodes the bytes of s that keep refuses; with
// validEscapes, a '%' is kept only when it starts a valid escape.
func escapeBytes(s string, keep func(byte) bool, validEscapes bool) string {
	ok := func(i int) bool {
		if s[i] == '%' && validEscapes {
			return i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2])
		}
		return s[i] == '%' || keep(s[i])
	}
	i := 0
	for i < len(s) && ok(i) {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		if ok(i) {
			b.WriteByte(s[i])
		} else {
			fmt.Fprintf(&b, "%%%02X", s[i])
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
