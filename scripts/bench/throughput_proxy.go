// The throughput phase's delaying proxy in front of the sink engines: it
// adds the modelled AWS latency, counts the requests and samples the lag of
// the oldest message each one carries.

package bench

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// delayProxy forwards every request to an engine after Delay, counts them
// and samples the lag of the oldest message each one carries.
type delayProxy struct {
	delay    time.Duration
	base     http.RoundTripper
	requests atomic.Int64
	mu       sync.Mutex
	lagMs    []float64
	engineMs []float64
	gapMs    []float64
	lastDone time.Time // when the last answer came back from the engine
	record   bool
	// meter counts what the requests would be billed (the bill phase).
	meter sinkMeter
}

func newDelayProxy(target string, delay time.Duration) (*delayProxy, *httputil.ReverseProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy target %s: %w", target, err)
	}
	d := &delayProxy{delay: delay, base: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = d
	rp.ErrorLog = log.New(io.Discard, "", 0) // a worker stopping mid-request is expected
	return d, rp, nil
}

// RoundTrip delays req, forwards it and samples its lag.
func (d *delayProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	arrived := time.Now()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	t := time.NewTimer(d.delay)
	select {
	case <-t.C:
	case <-req.Context().Done():
		t.Stop()
		return nil, req.Context().Err()
	}
	sent := time.Now()
	resp, err := d.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	done := time.Now()
	d.mu.Lock()
	if d.record {
		d.engineMs = append(d.engineMs, msSince(sent, done))
		if !d.lastDone.IsZero() && arrived.After(d.lastDone) {
			d.gapMs = append(d.gapMs, msSince(d.lastDone, arrived))
		}
	}
	d.lastDone = done
	d.mu.Unlock()
	d.requests.Add(1)
	d.meter.observe(req.Header.Get("X-Amz-Target"), body, arrived.UnixMilli())
	if ts, ok := firstTS(body); ok {
		lag := float64(time.Now().UnixMilli() - ts)
		d.mu.Lock()
		if d.record {
			d.lagMs = append(d.lagMs, lag)
		}
		d.mu.Unlock()
	}
	return resp, nil
}

func msSince(t0, t1 time.Time) float64 { return float64(t1.Sub(t0)) / float64(time.Millisecond) }

// proxySamples are a window's samples (ms).
type proxySamples struct{ lag, engine, gap []float64 }

// window starts (or ends) the sampling; ending returns the samples.
func (d *delayProxy) window(on bool) proxySamples {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.record = on
	out := proxySamples{d.lagMs, d.engineMs, d.gapMs}
	d.lagMs, d.engineMs, d.gapMs = nil, nil, nil
	return out
}

var (
	tsEscaped = []byte(`\"ts\":`) // in an SQS JSON body, the envelope is a JSON string
	tsPlain   = []byte(`"ts":`)
	dataKey   = []byte(`"Data":"`) // a Kinesis JSON body: base64 record data
)

// firstTS finds the feed's ts of the first message in a sink request body.
func firstTS(body []byte) (int64, bool) {
	if i := bytes.Index(body, tsEscaped); i >= 0 {
		return leadingInt(body[i+len(tsEscaped):])
	}
	i := bytes.Index(body, dataKey)
	if i < 0 {
		return 0, false
	}
	rest := body[i+len(dataKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0, false
	}
	data, err := base64.StdEncoding.DecodeString(string(bytes.ReplaceAll(rest[:j], []byte(`\/`), []byte("/"))))
	if err != nil {
		return 0, false
	}
	if k := bytes.Index(data, tsPlain); k >= 0 {
		return leadingInt(data[k+len(tsPlain):])
	}
	return 0, false
}

func leadingInt(b []byte) (int64, bool) {
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	v, err := strconv.ParseInt(string(b[:n]), 10, 64)
	return v, err == nil
}
