// Command bareclient is the capacity benchmark's reference client (bench
// only, never shipped): what a minimal user program does with the worker's
// WebSocket library (github.com/coder/websocket, the version in go.mod) and
// nothing else. It dials -n connections to the URL patterns the worker's
// sessions use (connection n on pattern n mod count, {id} its connection id
// -prefix + %06d, {n} its index), compression disabled as the worker
// dials, one goroutine per connection that dials, then reads every message
// and discards it; a closed connection is dialled again after a second. No
// parsing, no dedupe, no lease, no sink. It reads the cheapest way the
// library offers (Conn.Reader copied into io.Discard: no allocation per
// message, and no context that could be cancelled, which would arm a
// context.AfterFunc on every read, as the worker's reads avoid too); it
// stops by closing its connections.
//
//	bareclient -n 19000 -urls 'wss://127.0.0.1:9000/feed/{id},wss://127.0.0.2:9000/feed/{id}' \
//	  -prefix cap- -ca out/bench/run/tls/ca.pem -admin 127.0.0.1:7001
//
// -ca adds a PEM bundle to the system roots for wss:// (the certificate is
// always verified). Dials are paced at -dial-rate per second and at most
// -dials-in-flight at once (the worker's claims are paced too; an unbounded
// storm of TLS handshakes on a small machine outlasts the source's
// handshake deadline and dials again, and its peak stays in the RSS). The bench measures it as it measures the worker:
// on -admin (loopback only) GET /stats is a JSON document with the open
// connections, the messages read, the reconnects, the goroutines and the
// runtime.MemStats the report breaks memory down with; /debug/pprof/ is
// net/http/pprof (heap?debug=1 ends with the same MemStats lines as the
// worker's). GOGC is whatever its environment says (the bench sets the
// worker's).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/shared/cmdmain"
)

func main() {
	cmdmain.Run("bareclient", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stderr) })
}

// Options are the command's flags.
type Options struct {
	N        int
	URLs     []string
	Prefix   string
	CAFile   string
	Admin    string
	DialRate float64
	InFlight int
	Redial   time.Duration
}

func parse(args []string, stderr io.Writer) (Options, error) {
	var o Options
	var urls string
	fs := flag.NewFlagSet("bareclient", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.N, "n", 0, "connections to hold")
	fs.StringVar(&urls, "urls", "", "comma-separated ws:// or wss:// URL patterns; {id} = connection id, {n} = index; connection n uses pattern n mod count")
	fs.StringVar(&o.Prefix, "prefix", "mem-", "connection id prefix (ids are prefix + %06d, as memstreamer's)")
	fs.StringVar(&o.CAFile, "ca", "", "PEM file of extra root certificates for wss:// (added to the system roots)")
	fs.StringVar(&o.Admin, "admin", "127.0.0.1:0", "loopback address of /stats, /healthz and /debug/pprof/")
	fs.Float64Var(&o.DialRate, "dial-rate", 2000, "dials per second (0: all at once)")
	fs.IntVar(&o.InFlight, "dials-in-flight", 32, "most dials (TCP, TLS and WebSocket handshakes) at once (0: no bound)")
	fs.DurationVar(&o.Redial, "redial", time.Second, "wait before dialling a closed connection again")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if urls != "" {
		o.URLs = strings.Split(urls, ",")
	}
	var errs []error
	if o.N < 0 {
		errs = append(errs, fmt.Errorf("-n %d: want ≥ 0", o.N))
	}
	if o.N > 0 && len(o.URLs) == 0 {
		errs = append(errs, errors.New("-urls: need at least one URL pattern"))
	}
	for _, u := range o.URLs {
		if !strings.HasPrefix(u, "ws://") && !strings.HasPrefix(u, "wss://") {
			errs = append(errs, fmt.Errorf("-urls %q: want ws:// or wss://", u))
		}
	}
	if o.DialRate < 0 || o.Redial < 0 || o.InFlight < 0 {
		errs = append(errs, errors.New("-dial-rate, -dials-in-flight and -redial: want ≥ 0"))
	}
	if host, _, err := net.SplitHostPort(o.Admin); err != nil || !isLoopback(host) {
		errs = append(errs, fmt.Errorf("-admin %q: want a loopback host:port", o.Admin))
	}
	return o, errors.Join(errs...)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL is connection n's URL.
func (o Options) URL(n int) string {
	id := fmt.Sprintf("%s%06d", o.Prefix, n)
	return strings.NewReplacer("{id}", id, "{n}", strconv.Itoa(n)).Replace(o.URLs[n%len(o.URLs)])
}

// httpClient is the dials' client: http.DefaultTransport's settings, with
// the extra roots when caFile is set.
func httpClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return http.DefaultClient, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("-ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("-ca %s: no PEM certificate in it", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

// conn is one connection's counters (its own: no two readers share a
// cache line's counter).
type conn struct {
	messages   atomic.Int64
	reconnects atomic.Int64
	dialErrs   atomic.Int64
	open       atomic.Bool
	ws         atomic.Pointer[websocket.Conn]
}

// Client holds the connections.
type Client struct {
	opts   Options
	http   *http.Client
	mu     sync.Mutex
	conns  []*conn
	errMu  sync.Mutex
	errors map[string]int // dial and read errors by text (the first 20 kinds)
	wg     sync.WaitGroup
	dials  chan struct{} // the dials in flight (nil: no bound)
}

// Stats is the /stats document.
type Stats struct {
	Connections int   `json:"connections"` // open now
	Dialled     int   `json:"dialled"`     // connections started (≤ n)
	Messages    int64 `json:"messages"`
	Reconnects  int64 `json:"reconnects"`
	DialErrors  int64 `json:"dial_errors"`
	Goroutines  int   `json:"goroutines"`
	// MemStats (bytes): heap in use, stacks in use, heap allocated, all
	// from the OS; NumGC the collections so far.
	HeapInuse  uint64         `json:"heap_inuse"`
	StackInuse uint64         `json:"stack_inuse"`
	HeapAlloc  uint64         `json:"heap_alloc"`
	Sys        uint64         `json:"sys"`
	NumGC      uint32         `json:"num_gc"`
	Errors     map[string]int `json:"errors,omitempty"`
}

// Stats returns the counts so far.
func (c *Client) Stats() Stats {
	var st Stats
	c.mu.Lock()
	conns := c.conns
	c.mu.Unlock()
	st.Dialled = len(conns)
	for _, x := range conns {
		st.Messages += x.messages.Load()
		st.Reconnects += x.reconnects.Load()
		st.DialErrors += x.dialErrs.Load()
		if x.open.Load() {
			st.Connections++
		}
	}
	st.Goroutines = runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st.HeapInuse, st.StackInuse, st.HeapAlloc, st.Sys, st.NumGC = ms.HeapInuse, ms.StackInuse, ms.HeapAlloc, ms.Sys, ms.NumGC
	c.errMu.Lock()
	if len(c.errors) > 0 {
		st.Errors = make(map[string]int, len(c.errors))
		for k, v := range c.errors {
			st.Errors[k] = v
		}
	}
	c.errMu.Unlock()
	return st
}

func (c *Client) noteErr(err error) {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	k := err.Error()
	if _, ok := c.errors[k]; ok || len(c.errors) < 20 {
		c.errors[k]++
	}
}

// Start dials the connections (paced) until ctx ends; every connection's
// goroutine keeps reading until ctx ends.
func (c *Client) Start(ctx context.Context) {
	var gap time.Duration
	if c.opts.DialRate > 0 {
		gap = time.Duration(float64(time.Second) / c.opts.DialRate)
	}
	next := time.Now()
	for n := range c.opts.N {
		if gap > 0 {
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
			next = next.Add(gap)
		}
		if ctx.Err() != nil {
			return
		}
		x := &conn{}
		c.mu.Lock()
		c.conns = append(c.conns, x)
		c.mu.Unlock()
		c.wg.Add(1)
		go c.hold(ctx, x, c.opts.URL(n))
	}
}

// hold is one connection: dial, read and discard every message; dial again
// after Redial when it ends.
func (c *Client) hold(ctx context.Context, x *conn, url string) {
	defer c.wg.Done()
	for first := true; ctx.Err() == nil; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.opts.Redial):
			}
		}
		if c.dials != nil {
			select {
			case <-ctx.Done():
				return
			case c.dials <- struct{}{}:
			}
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		ws, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPClient: c.http, CompressionMode: websocket.CompressionDisabled})
		cancel()
		if c.dials != nil {
			<-c.dials
		}
		if err != nil {
			if ctx.Err() == nil {
				x.dialErrs.Add(1)
				c.noteErr(err)
			}
			continue
		}
		if !first {
			x.reconnects.Add(1)
		}
		x.ws.Store(ws)
		if ctx.Err() != nil { // closeAll may have swept before the store
			_ = ws.CloseNow()
		}
		x.open.Store(true)
		err = readAll(ws, &x.messages)
		x.open.Store(false)
		x.ws.Store(nil)
		if ctx.Err() == nil {
			c.noteErr(err)
		}
		_ = ws.CloseNow()
	}
}

// readAll reads every message of ws into io.Discard, counting them, until
// the connection ends.
func readAll(ws *websocket.Conn, count *atomic.Int64) error {
	bg := context.Background() // reads end by the connection's close
	for {
		_, r, err := ws.Reader(bg)
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			return err
		}
		count.Add(1)
	}
}

// closeAll closes every open connection (their reads then end).
func (c *Client) closeAll() {
	c.mu.Lock()
	conns := c.conns
	c.mu.Unlock()
	for _, x := range conns {
		if ws := x.ws.Load(); ws != nil {
			_ = ws.CloseNow()
		}
	}
}

// Wait waits, once ctx (Start's) has ended, for every connection's
// goroutine to return, closing the connections.
func (c *Client) Wait() {
	c.closeAll()
	c.wg.Wait()
}

// Handler serves /healthz, /stats and /debug/pprof/.
func (c *Client) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(c.Stats())
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// New checks opts and builds the client.
func New(o Options) (*Client, error) {
	hc, err := httpClient(o.CAFile)
	if err != nil {
		return nil, err
	}
	c := &Client{opts: o, http: hc, errors: map[string]int{}}
	if o.InFlight > 0 {
		c.dials = make(chan struct{}, o.InFlight)
	}
	return c, nil
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	c, err := New(o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Admin)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	srv := &http.Server{Handler: c.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(stderr, "bareclient: admin on %s, %d connections\n", ln.Addr(), o.N)
	c.Start(ctx)
	<-ctx.Done()
	c.Wait()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	st := c.Stats()
	fmt.Fprintf(stderr, "bareclient: stopped: %d messages, %d reconnects, %d dial errors\n", st.Messages, st.Reconnects, st.DialErrors)
	return nil
}
