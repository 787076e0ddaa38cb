//go:build fleetsim

package fleetsim

// The light source: each session's stream made on the worker's read from
// virtual time, with no socket, no HTTP, no WebSocket client or server and
// no goroutine of its own (issue 36: "simulated sessions that dial,
// deliver at a rate, checkpoint and resume without sockets"). The worker's
// session is the binary's code above its connection (streamer.SimConn);
// what it reads is what the test feed would send it: seq N of a session
// produced at t0 + N/rate (t0: the session's first connection), the
// backlog from the resume parameter at once, then live.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/workers/streamer"
)

// lightSource is the fleet's source when Config.Feed is off.
type lightSource struct {
	rate    float64
	limit   feed.ConnLimit
	standby bool // admit a standby's connection beside the owner's (tenure header)

	mu       sync.Mutex
	sessions map[string]*lightSession
	attempts map[string][]time.Time // the limit's attempts per host and IP (connlimit)
	limited  int64
	overlaps int
	closed   bool
}

// lightSession is one session at the source.
type lightSession struct {
	t0      time.Time // its first connection (zero: none yet)
	open    []*lightConn
	overlap bool // two owners' connections are open (counted once per overlap)
}

func newLightSource(rate float64, limit feed.ConnLimit, standby bool) *lightSource {
	return &lightSource{rate: rate, limit: limit, standby: standby, sessions: map[string]*lightSession{}}
}

// ProducedAt is when seq of session is produced (feed.Server.ProducedAt).
func (l *lightSource) ProducedAt(session string, seq int64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ss := l.sessions[session]
	if ss == nil || ss.t0.IsZero() {
		return time.Time{}, false
	}
	return ss.t0.Add(feed.SeqDuration(l.rate, seq)), true
}

// Overlaps is how many times two owners' connections of one session were
// open at once (feed.Stats.Overlaps: a standby's conflicts with nothing,
// and one tenure's two connections are a planned overlap).
func (l *lightSource) Overlaps() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.overlaps
}

// RateLimited is how many dials were refused over the connection-rate limit.
func (l *lightSource) RateLimited() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limited
}

// Close refuses every later dial; open connections end with their workers.
func (l *lightSource) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// dialer is what worker addr's sessions dial through.
func (l *lightSource) dialer(addr net.Addr) streamer.SimDialer {
	ip := addr.String()
	if ta, ok := addr.(*net.TCPAddr); ok {
		ip = ta.IP.String()
	}
	return func(ctx context.Context, target string, opts *websocket.DialOptions) (streamer.SimConn, *http.Response, error) {
		return l.dial(ctx, ip, target, opts)
	}
}

// refusal is a refused handshake: its response and coder/websocket's error.
func refusal(u *url.URL, code int) (*http.Response, error) {
	return &http.Response{StatusCode: code, Request: &http.Request{URL: u}, Body: http.NoBody},
		fmt.Errorf("failed to WebSocket dial: expected handshake response status code %d but got %d", http.StatusSwitchingProtocols, code)
}

func (l *lightSource) dial(ctx context.Context, ip, target string, opts *websocket.DialOptions) (streamer.SimConn, *http.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, nil, err
	}
	name, ok := strings.CutPrefix(u.Path, feed.PathPrefix)
	if !ok || name == "" {
		resp, err := refusal(u, http.StatusNotFound)
		return nil, resp, err
	}
	var from int64
	if v := u.Query().Get(feed.DefaultResumeParam); v != "" {
		if from, err = strconv.ParseInt(v, 10, 64); err != nil || from < 0 {
			resp, err := refusal(u, http.StatusBadRequest)
			return nil, resp, err
		}
	}
	tenure := ""
	if opts != nil && opts.HTTPHeader != nil {
		tenure = opts.HTTPHeader.Get(standbyTenureHeader)
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		resp, err := refusal(u, http.StatusServiceUnavailable)
		return nil, resp, err
	}
	if l.overLimitLocked(u.Host+" "+ip, now) {
		resp, err := refusal(u, http.StatusTooManyRequests)
		return nil, resp, err
	}
	ss := l.sessions[name]
	if ss == nil {
		ss = &lightSession{}
		l.sessions[name] = ss
	}
	if ss.t0.IsZero() {
		ss.t0 = feed.StartOf(now, l.rate, from)
	}
	next := feed.ProducedBy(ss.t0, now, l.rate) + 1
	if from > 0 {
		next = from
	}
	c := &lightConn{src: l, ss: ss, name: name, tenure: tenure, next: next, done: make(chan struct{}),
		standby: l.standby && feed.IsStandbyTenure(tenure)}
	ss.open = append(ss.open, c)
	l.overlapLocked(ss)
	return c, nil, nil
}

// overLimitLocked counts an attempt on key (host and IP) at now and
// reports whether it is over the limit (feed.ConnLimit.Count).
func (l *lightSource) overLimitLocked(key string, now time.Time) bool {
	if l.limit == (feed.ConnLimit{}) {
		return false
	}
	if l.attempts == nil {
		l.attempts = map[string][]time.Time{}
	}
	ts, over := l.limit.Count(l.attempts[key], now)
	l.attempts[key] = ts
	if over {
		l.limited++
	}
	return over
}

// overlapLocked starts or ends ss's overlap after a connection opened or
// closed: more than one owner's connections open at once
// (feed.OwnerGroups).
func (l *lightSource) overlapLocked(ss *lightSession) {
	var tenures []string
	for _, c := range ss.open {
		if !c.standby {
			tenures = append(tenures, c.tenure)
		}
	}
	switch groups := feed.OwnerGroups(tenures); {
	case groups > 1 && !ss.overlap:
		ss.overlap = true
		l.overlaps++
	case groups <= 1:
		ss.overlap = false
	}
}

// ended forgets c at the source.
func (l *lightSource) ended(c *lightConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ss := c.ss
	for i, o := range ss.open {
		if o == c {
			ss.open = append(ss.open[:i], ss.open[i+1:]...)
			break
		}
	}
	if len(ss.open) == 0 {
		ss.open = nil
	}
	l.overlapLocked(ss)
}

// lightConn is one connection: the session's messages made on its reader's
// goroutine when each is due (no goroutine of its own).
type lightConn struct {
	src     *lightSource
	ss      *lightSession
	name    string
	tenure  string
	standby bool

	next  int64 // the reader's only
	buf   []byte
	rd    bytes.Reader
	timer *time.Timer

	once sync.Once
	done chan struct{} // closed by Close, CloseNow or Abort
}

// errLightClosed is the read error of a connection this side closed (as
// coder/websocket's reads fail once its Conn was closed).
var errLightClosed = fmt.Errorf("failed to get reader: %w", net.ErrClosed)

func (c *lightConn) Reader(ctx context.Context) (websocket.MessageType, io.Reader, error) {
	due := c.ss.t0.Add(feed.SeqDuration(c.src.rate, c.next))
	if wait := time.Until(due); wait > 0 {
		if c.timer == nil {
			c.timer = time.NewTimer(wait)
		} else {
			c.timer.Reset(wait)
		}
		select {
		case <-c.timer.C:
		case <-c.done:
			return 0, nil, errLightClosed
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
	select {
	case <-c.done:
		return 0, nil, errLightClosed
	default:
	}
	c.buf = feed.AppendMessage(c.buf[:0], c.name, c.next, due.UnixMilli(), "", "")
	c.rd.Reset(c.buf)
	c.next++
	return websocket.MessageText, &c.rd, nil
}

func (c *lightConn) Write(context.Context, websocket.MessageType, []byte) error {
	select {
	case <-c.done:
		return errLightClosed
	default:
		return nil // open messages and app pings: the source reads and forgets them
	}
}

func (c *lightConn) Ping(context.Context) error { return c.Write(context.Background(), 0, nil) }

func (c *lightConn) end() {
	c.once.Do(func() {
		close(c.done)
		c.src.ended(c)
	})
}

func (c *lightConn) Close(websocket.StatusCode, string) error {
	c.end()
	return nil
}

func (c *lightConn) CloseNow() error {
	c.end()
	return nil
}

func (c *lightConn) Abort() bool {
	c.end()
	return true
}

func (c *lightConn) SetReadLimit(int64) {}

var _ streamer.SimConn = (*lightConn)(nil)
