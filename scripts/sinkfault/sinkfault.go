// The proxy itself: its configuration, Start and Close, and the routing of
// each request (the sink's calls to their handlers, every other request
// forwarded untouched to its engine).

package sinkfault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Mode is the destination's protocol.
type Mode string

// Modes.
const (
	ModeSQS     Mode = "sqs"
	ModeKinesis Mode = "kinesis"
)

// Config configures a Proxy.
type Config struct {
	Mode Mode
	// Dest is the destination engine's endpoint (http://127.0.0.1:port).
	Dest string
	// Work is where requests that are not the sink's go (ModeSQS: the work
	// queue's engine); "" forwards them to Dest.
	Work string
	// OutputQueue is the output queue's name (ModeSQS): requests whose
	// QueueUrl ends in /OutputQueue (or whose QueueName is it) are the
	// sink's.
	OutputQueue string
	// Seed seeds the draws of latency and refusals.
	Seed uint64
}

// Proxy is a running sink fault proxy.
type Proxy struct {
	cfg Config
	ln  net.Listener
	srv *http.Server
	hc  *http.Client

	mu        sync.Mutex
	rng       *rand.Rand
	latency   Latency
	refuse    Refuse
	frozen    bool
	frozenFor map[string]bool // worker ids frozen (empty with frozen: every worker)
	thaw      chan struct{}   // closed at Thaw
	permanent map[Key]bool    // records refused permanently, at every attempt (by session, seq, sub)
	stamps    map[Key][]int64
	stats     Stats
}

// Start listens on 127.0.0.1 and serves.
func Start(cfg Config) (*Proxy, error) {
	if cfg.Mode != ModeSQS && cfg.Mode != ModeKinesis {
		return nil, fmt.Errorf("sinkfault: mode %q: want sqs or kinesis", cfg.Mode)
	}
	if cfg.Dest == "" {
		return nil, errors.New("sinkfault: no destination endpoint")
	}
	if cfg.Mode == ModeSQS && cfg.OutputQueue == "" {
		return nil, errors.New("sinkfault: sqs mode needs the output queue's name")
	}
	if cfg.Work == "" {
		cfg.Work = cfg.Dest
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sinkfault listen: %w", err)
	}
	p := &Proxy{
		cfg: cfg, ln: ln,
		hc:        &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}},
		rng:       rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
		frozenFor: map[string]bool{}, thaw: make(chan struct{}),
		permanent: map[Key]bool{}, stamps: map[Key][]int64{},
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's endpoint (the workers' AWS_ENDPOINT_URL_SQS or
// AWS_ENDPOINT_URL_KINESIS).
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy (held requests are released unforwarded).
func (p *Proxy) Close() {
	p.Thaw()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	_ = p.srv.Close()
	p.hc.CloseIdleConnections()
}

// ServeHTTP routes one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "read request: "+err.Error(), http.StatusBadRequest)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndexByte(target, '.')+1:]
	switch p.cfg.Mode {
	case ModeSQS:
		var q struct{ QueueUrl, QueueName string }
		_ = json.Unmarshal(body, &q)
		name := q.QueueName
		if q.QueueUrl != "" {
			name = q.QueueUrl[strings.LastIndexByte(q.QueueUrl, '/')+1:]
		}
		if name != p.cfg.OutputQueue {
			p.count(func(s *Stats) { s.Other++ })
			p.forwardRaw(w, r, p.cfg.Work, body)
			return
		}
		switch op {
		case "SendMessageBatch":
			p.sqsBatch(w, r, body)
		case "SendMessage":
			p.sqsSingle(w, r, body)
		default:
			p.count(func(s *Stats) { s.Other++ })
			p.forwardRaw(w, r, p.cfg.Dest, body)
		}
	case ModeKinesis:
		if op == "PutRecords" {
			p.kinesisPut(w, r, body)
			return
		}
		p.count(func(s *Stats) { s.Other++ })
		p.forwardRaw(w, r, p.cfg.Dest, body)
	}
}
