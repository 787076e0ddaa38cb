// The proxy's HTTP exchanges: a request sent to an engine (whole, or with
// only the entries it kept), the engine's answer copied back, and the AWS
// JSON error answer the proxy gives itself for a refusal, with its codes.

package sinkfault

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// forwardKept sends the batch request req to the destination with only the
// kept entries in its list field (the refused ones are answered by the
// proxy); ok false: the destination could not be reached and w has a 503.
func (p *Proxy) forwardKept(w http.ResponseWriter, r *http.Request, req map[string]json.RawMessage, field string, keep []json.RawMessage) (int, http.Header, []byte, bool) {
	kb, _ := json.Marshal(keep)
	req[field] = kb
	fb, _ := json.Marshal(req)
	p.count(func(s *Stats) { s.Forwarded++ })
	st, h, b, err := p.upstream(r.Context(), r, p.cfg.Dest, fb)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return 0, nil, nil, false
	}
	return st, h, b, true
}

// upstream sends body to base with r's method, path and headers; it
// returns the answer read whole.
func (p *Proxy) upstream(ctx context.Context, r *http.Request, base string, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, base+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("sinkfault upstream request: %w", err)
	}
	for k, vs := range r.Header {
		if k == "Content-Length" || k == "Connection" {
			continue
		}
		req.Header[k] = vs
	}
	req.ContentLength = int64(len(body))
	resp, err := p.hc.Do(req)
	if err != nil {
		p.count(func(s *Stats) { s.UpstreamErrs++ })
		return 0, nil, nil, fmt.Errorf("sinkfault upstream %s: %w", base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.count(func(s *Stats) { s.UpstreamErrs++ })
		return 0, nil, nil, fmt.Errorf("sinkfault upstream %s answer: %w", base, err)
	}
	return resp.StatusCode, resp.Header, b, nil
}

func writeAnswer(w http.ResponseWriter, status int, h http.Header, body []byte) {
	for k, vs := range h {
		if k == "Content-Length" || k == "Connection" || k == "Transfer-Encoding" {
			continue
		}
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// forwardRaw forwards a request that is not the sink's, untouched. An
// unreachable engine (sqs-down) answers 503, which the SDK retries.
func (p *Proxy) forwardRaw(w http.ResponseWriter, r *http.Request, base string, body []byte) {
	status, h, b, err := p.upstream(r.Context(), r, base, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeAnswer(w, status, h, b)
}

func jsonError(w http.ResponseWriter, status int, contentType, typ, msg string, sender bool) {
	b, _ := json.Marshal(map[string]string{"__type": typ, "message": msg})
	w.Header().Set("Content-Type", contentType)
	if contentType == sqsContentType {
		fault := "Receiver"
		if sender {
			fault = "Sender"
		}
		w.Header().Set("x-amzn-query-error", typ[strings.LastIndexByte(typ, '#')+1:]+";"+fault)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

const (
	sqsContentType     = "application/x-amz-json-1.0"
	kinesisContentType = "application/x-amz-json-1.1"
)

// Refusal codes. SQS: a transient entry failure is not the sender's fault
// (throttled, internal error); a permanent one is (the entry itself is
// refused). Kinesis has per-record transient codes only; a permanent
// refusal is the whole request's 400.
const (
	CodeThrottled       = "RequestThrottled"
	CodeInternal        = "InternalError"
	CodeInvalid         = "InvalidParameterValue"
	CodeKinesisThrottle = "ProvisionedThroughputExceededException"
	CodeKinesisDenied   = "AccessDeniedException"
)
