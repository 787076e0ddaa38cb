// The request path. A request is delayed by half its drawn latency, handled,
// and answered after the other half. Handling routes each operation: the
// writes (writes.go, batchwrite.go), the reads (reads.go), a table's
// creation, change or deletion (ddl, here: the primary, then the mirror);
// what the model does not change goes to the primary as it is. Latency is
// slept outside the item locks the handlers take.

package dynamodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

const (
	targetPrefix    = "DynamoDB_20120810."
	upstreamTimeout = 30 * time.Second
)

var requestSeq atomic.Int64

// ServeHTTP serves DynamoDB's JSON protocol (and the control endpoints,
// under /dynamodel/).
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, controlPrefix) {
		m.control(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	if r.Method != http.MethodPost || !ok {
		m.passThrough(w, r, body)
		return
	}
	ctx := r.Context()
	lat := m.draw(m.prof.Latency[op])
	if !sleep(ctx, lat/2) {
		return
	}
	rep := m.handle(ctx, op, body)
	if !sleep(ctx, lat-lat/2) {
		return
	}
	respond(w, rep)
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func respond(w http.ResponseWriter, rep *reply) {
	if rep.drop {
		panic(http.ErrAbortHandler) // the server closes the connection without a reply
	}
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(rep.body)), 10))
	h.Set("X-Amzn-Requestid", fmt.Sprintf("DYNAMODEL%043d", requestSeq.Add(1)))
	h.Set("Content-Length", strconv.Itoa(len(rep.body)))
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

// passThrough forwards what is not a DynamoDB operation (dynalite's health
// check, an unknown target) to the primary as it is.
func (m *Model) passThrough(w http.ResponseWriter, r *http.Request, body []byte) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, m.primary+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := m.client.Do(req)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (m *Model) handle(ctx context.Context, op string, body []byte) *reply {
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		return m.writeItem(ctx, op, body)
	case "BatchWriteItem":
		return m.batchWrite(ctx, body)
	case "GetItem":
		return m.getItem(ctx, body)
	case "BatchGetItem":
		return m.batchGet(ctx, body)
	case "Query", "Scan":
		return m.query(ctx, op, body)
	case "CreateTable", "UpdateTable", "DeleteTable":
		return m.ddl(ctx, op, body)
	}
	return m.forward(ctx, m.primary, op, body)
}

// forward sends the request to a dynalite and returns its answer (a dropped
// connection when it does not answer).
func (m *Model) forward(ctx context.Context, endpoint, op string, body []byte) *reply {
	ctx, cancel := context.WithTimeout(ctx, upstreamTimeout)
	defer cancel()
	rep, err := m.call(ctx, endpoint, op, body)
	if err != nil {
		m.logf("%s: %v", op, err)
		return &reply{drop: true}
	}
	return rep
}

// writeContext is a write's context: it goes on when the client gives up
// (DynamoDB applies a write it has received).
func writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), upstreamTimeout)
}

// ddl forwards a table's creation, change or deletion to the primary and,
// when it succeeds, to the mirror (before answering: the mirror has the
// table before any write to it).
func (m *Model) ddl(ctx context.Context, op string, body []byte) *reply {
	ctx, cancel := writeContext(ctx)
	defer cancel()
	rep := m.forward(ctx, m.primary, op, body)
	if rep.status != 200 {
		return rep
	}
	var in struct{ TableName string }
	_ = json.Unmarshal(body, &in)
	m.tables.forget(in.TableName)
	if m.mirror != nil {
		if op != "UpdateTable" {
			m.mirror.bump(in.TableName)
		}
		if mrep, err := m.call(ctx, m.mirror.endpoint, op, body); err != nil || mrep.status != 200 {
			m.logf("mirror %s %s: %v", op, in.TableName, errors.Join(err, replyError(op, mrep)))
		} else if op != "DeleteTable" {
			m.mirror.waitActive(ctx, in.TableName)
		}
	}
	return rep
}
