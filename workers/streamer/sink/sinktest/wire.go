package sinktest

// The requests a sink wrote to its destination, as the wire saw them.

import (
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// Request is one request a sink wrote to its destination.
type Request struct {
	At       time.Time // when its last byte was written
	Deadline time.Time // its context's deadline (zero: none)
}

// Wire records the requests of a sink: an SDK client's through Client, a
// Go handler's through Record.
type Wire struct {
	mu   sync.Mutex
	reqs []Request
}

// Doer is an HTTP client as the AWS SDK takes it (aws.HTTPClient).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Client wraps next so that every request it writes completely is recorded
// (httptrace's WroteRequest, or a response to it): a request its context
// ended before it was written is not one the destination can have taken.
func (w *Wire) Client(next Doer) Doer { return &wired{w: w, next: next} }

type wired struct {
	w    *Wire
	next Doer
}

// A request is recorded once: when its writer reports it written, or, if
// that report is missing or an error, when a response to it came back (the
// destination read it whole). Two CI runs recorded no request for 20
// messages a sink acknowledged (net/http reports the write from the
// connection's writer goroutine, before its last flush), once after two
// minutes of waiting; the response is the writer-independent proof.
func (c *wired) Do(req *http.Request) (*http.Response, error) {
	deadline, _ := req.Context().Deadline()
	var recorded atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err == nil && recorded.CompareAndSwap(false, true) {
			c.w.Record(deadline)
		}
	}}
	resp, err := c.next.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err == nil && recorded.CompareAndSwap(false, true) {
		c.w.Record(deadline)
	}
	return resp, err
}

// Record records a request written now under deadline.
func (w *Wire) Record(deadline time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reqs = append(w.reqs, Request{At: time.Now(), Deadline: deadline})
}

// Requests are the requests recorded so far.
func (w *Wire) Requests() []Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Request(nil), w.reqs...)
}
