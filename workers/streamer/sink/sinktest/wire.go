package sinktest

// The requests a sink wrote to its destination, as the wire saw them.

import (
	"net/http"
	"net/http/httptrace"
	"sync"
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
// (httptrace's WroteRequest): a request its context ended before it was
// written is not one the destination can have taken.
func (w *Wire) Client(next Doer) Doer { return &wired{w: w, next: next} }

type wired struct {
	w    *Wire
	next Doer
}

func (c *wired) Do(req *http.Request) (*http.Response, error) {
	deadline, _ := req.Context().Deadline()
	trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err == nil {
			c.w.Record(deadline)
		}
	}}
	return c.next.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
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
