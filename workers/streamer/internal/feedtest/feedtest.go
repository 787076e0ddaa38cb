// Package feedtest is a WebSocket source for tests and local runs that
// behaves like the real sources wsfleet targets, and records everything a
// test needs to check the exactly-one-owner property from the source's side.
//
// Behaviour (the local stack's scripts/feed reproduces the same contract):
//
//   - Endpoint: ws://HOST/feed/{session}. Any query parameters other than the
//     resume parameter are ignored (so a "new ws_url" can be the same stream
//     under another query string or the same path on another Server).
//   - Each session is one live stream of JSON text messages
//     {"seq":N,"session":"…","ts":MS[,"pad":"…"]}, N = 1, 2, 3, … produced at
//     Options.Rate per second from the session's first connection on, whether
//     or not anybody is connected (like a meeting or a market).
//   - Resume: with ?from=K (Options.ResumeParam) a connection first receives
//     every already-produced message with seq ≥ K at once, then the live ones;
//     without it, only messages produced after it opened. History is unlimited
//     (messages are computed, not stored).
//   - Headers: with Options.RequireHeaders set, a handshake missing any of
//     them is refused with HTTP 401.
//   - One connection per session: a connection that opens while another one
//     of the same session is open is a violation and is counted
//     (Violations); with Options.Policy KickOlder the older connection is
//     then closed with status 4000 (what meeting media servers do), with
//     RefuseNewer the new handshake is refused with HTTP 409.
//   - Every connection is recorded (Conns) with its open and close times, the
//     request URI, the resume point, the seqs sent and the close status the
//     client sent (-1: none, the TCP connection just ended). A connection
//     ends (Conn.End) when the server sends a close frame (its echo of the
//     client's close, or its own close), or else when its reader sees the TCP
//     connection end. A client that dials again as soon as its close
//     handshake completed does not overlap its previous connection.
//   - Drop closes a session's open connections, abruptly or with a status code
//     (a source restarting).
//
// It depends only on the standard library and github.com/coder/websocket.
package feedtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Policy says what the server does when a second connection of a session
// opens while one is open. The violation is counted in every case.
type Policy int

const (
	// Allow keeps both connections.
	Allow Policy = iota
	// KickOlder closes the older connection with status 4000.
	KickOlder
	// RefuseNewer refuses the new handshake with HTTP 409.
	RefuseNewer
)

// StatusKicked is the close status of a connection kicked by a newer one.
const StatusKicked websocket.StatusCode = 4000

// Options configure a Server.
type Options struct {
	Rate           float64           // messages per second per session (default 20)
	SeqField       string            // default "seq"
	ResumeParam    string            // default "from"
	Policy         Policy            // default Allow
	RequireHeaders map[string]string // headers a handshake must carry
	Pad            int               // bytes of padding per message
}

// Conn is the record of one connection.
type Conn struct {
	ID         int
	Session    string
	RequestURI string
	Header     http.Header
	From       int64 // resume point asked for; -1 when none
	Opened     time.Time
	Closing    time.Time // when the server sent a close frame; zero if it never did
	Closed     time.Time // when the server's reader saw the connection end; zero while open
	FirstSeq   int64     // -1 until a message was sent
	LastSeq    int64
	Sent       int64
	ClientCode int  // close status the client sent; -1 when none
	Kicked     bool // closed by a newer connection (KickOlder)
	Dropped    bool // closed by Drop
}

// End is when the connection ended as far as the source is concerned: the
// close frame the server sent, else the end of the TCP connection; zero
// while open.
func (c Conn) End() time.Time {
	if !c.Closing.IsZero() {
		return c.Closing
	}
	return c.Closed
}

type stream struct {
	t0         time.Time
	open       map[*conn]struct{}
	records    []*Conn
	violations int
	refused    int
}

type conn struct {
	c   *websocket.Conn
	rec *Conn
	// dropAfterAccept is set when Drop found c still in its handshake:
	// the drop happens as soon as Accept returns (dropCode 0 = abruptly).
	dropAfterAccept bool
	dropCode        websocket.StatusCode
}

// Server is a test feed. Start it with Start (or mount Handler yourself).
type Server struct {
	opts Options

	// beforeAccept, when set (tests of this package), runs after a
	// connection is registered and before its handshake is answered.
	beforeAccept func(session string)

	mu       sync.Mutex
	streams  map[string]*stream
	nextID   int
	closed   bool
	ln       net.Listener
	srv      *http.Server
	handlers sync.WaitGroup
}

// New returns a server with opts (zero fields take their defaults).
func New(opts Options) *Server {
	if opts.Rate <= 0 {
		opts.Rate = 20
	}
	if opts.SeqField == "" {
		opts.SeqField = "seq"
	}
	if opts.ResumeParam == "" {
		opts.ResumeParam = "from"
	}
	return &Server{opts: opts, streams: map[string]*stream{}}
}

// Start listens on addr ("127.0.0.1:0" for a free port) and serves.
func (s *Server) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("feedtest listen %s: %w", addr, err)
	}
	s.mu.Lock()
	s.ln = ln
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	srv := s.srv
	s.mu.Unlock()
	s.handlers.Add(1)
	go func() {
		defer s.handlers.Done()
		_ = srv.Serve(ln)
	}()
	return nil
}

// Addr is the listening address (host:port).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// URL is the ws:// URL of session on this server.
func (s *Server) URL(session string) string { return "ws://" + s.Addr() + "/feed/" + session }

// Close stops serving, closes every open connection and waits for the
// handlers to return.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	srv := s.srv
	var open []*websocket.Conn
	for _, st := range s.streams {
		for c := range st.open {
			if c.c != nil {
				open = append(open, c.c)
			}
		}
	}
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	for _, c := range open {
		_ = c.CloseNow()
	}
	s.handlers.Wait()
}

// Handler serves /feed/{session}.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serve) }

func (s *Server) streamLocked(session string, now time.Time) *stream {
	st := s.streams[session]
	if st == nil {
		st = &stream{t0: now, open: map[*conn]struct{}{}}
		s.streams[session] = st
	}
	return st
}

// produced is the highest seq produced at now.
func (s *Server) produced(st *stream, now time.Time) int64 {
	return int64(now.Sub(st.t0).Seconds() * s.opts.Rate)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	session, ok := strings.CutPrefix(r.URL.Path, "/feed/")
	if !ok || session == "" || strings.Contains(session, "/") {
		http.NotFound(w, r)
		return
	}
	for k, v := range s.opts.RequireHeaders {
		if r.Header.Get(k) != v {
			http.Error(w, "missing or wrong header "+k, http.StatusUnauthorized)
			return
		}
	}
	from := int64(-1)
	if v := r.URL.Query().Get(s.opts.ResumeParam); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			http.Error(w, "bad "+s.opts.ResumeParam, http.StatusBadRequest)
			return
		}
		from = n
	}
	now := time.Now()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "closing", http.StatusServiceUnavailable)
		return
	}
	st := s.streamLocked(session, now)
	if st.live() > 0 {
		st.violations++
		if s.opts.Policy == RefuseNewer {
			st.refused++
			s.mu.Unlock()
			http.Error(w, "session already connected", http.StatusConflict)
			return
		}
	}
	// Registered before the handshake completes: the client may see the 101
	// (and dial again) before Accept returns here.
	s.nextID++
	rec := &Conn{ID: s.nextID, Session: session, RequestURI: r.RequestURI, Header: r.Header.Clone(), From: from,
		Opened: now, FirstSeq: -1, LastSeq: -1, ClientCode: -1}
	c := &conn{rec: rec}
	var kicked []*conn
	if s.opts.Policy == KickOlder {
		for old := range st.open {
			if old.c != nil {
				old.rec.Kicked = true
				kicked = append(kicked, old)
			}
		}
	}
	st.open[c] = struct{}{}
	st.records = append(st.records, rec)
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()

	if s.beforeAccept != nil {
		s.beforeAccept(session)
	}
	wc, err := websocket.Accept(closeWatcher{ResponseWriter: w, closing: func() { s.closing(rec) }}, r,
		&websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.ended(st, c, -1)
		return
	}
	s.mu.Lock()
	c.c = wc
	closed := s.closed
	dropNow, dropCode := c.dropAfterAccept, c.dropCode
	next := s.produced(st, rec.Opened) + 1
	if from >= 1 {
		next = from
	} else if from == 0 {
		next = 1
	}
	s.mu.Unlock()
	if closed {
		_ = wc.CloseNow()
		s.ended(st, c, -1)
		return
	}
	for _, old := range kicked {
		s.handlers.Go(func() { _ = old.c.Close(StatusKicked, "kicked by a newer connection") })
	}
	if dropNow {
		s.drop(c, dropCode)
	}
	s.stream(r.Context(), st, c, next)
}

// stream writes the session's messages to c from seq next on until c ends.
func (s *Server) stream(ctx context.Context, st *stream, c *conn, next int64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer cancel()
		for {
			if _, _, err := c.c.Read(ctx); err != nil {
				s.ended(st, c, websocket.CloseStatus(err))
				return
			}
		}
	}()
	interval := time.Duration(float64(time.Second) / s.opts.Rate)
	if interval < time.Millisecond {
		interval = time.Millisecond
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var buf []byte
	for {
		s.mu.Lock()
		hi := s.produced(st, time.Now())
		s.mu.Unlock()
		for ; next <= hi; next++ {
			buf = s.message(buf[:0], c.rec.Session, next)
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.c.Write(wctx, websocket.MessageText, buf)
			wcancel()
			if err != nil {
				_ = c.c.CloseNow()
				<-readDone
				return
			}
			s.mu.Lock()
			if c.rec.FirstSeq < 0 {
				c.rec.FirstSeq = next
			}
			c.rec.LastSeq = next
			c.rec.Sent++
			s.mu.Unlock()
		}
		select {
		case <-readDone:
			_ = c.c.CloseNow()
			return
		case <-tick.C:
		}
	}
}

// closing records the first close frame the server sent on rec.
func (s *Server) closing(rec *Conn) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec.Closing.IsZero() {
		rec.Closing = now
	}
}

// live is the number of open connections that have not started closing.
func (st *stream) live() int {
	n := 0
	for c := range st.open {
		if c.rec.Closing.IsZero() {
			n++
		}
	}
	return n
}

// ended records the end of c, once.
func (s *Server) ended(st *stream, c *conn, code websocket.StatusCode) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.rec.Closed.IsZero() {
		c.rec.Closed = now
		c.rec.ClientCode = int(code)
	}
	delete(st.open, c)
}

func (s *Server) message(dst []byte, session string, seq int64) []byte {
	dst = append(dst, `{"`...)
	dst = append(dst, s.opts.SeqField...)
	dst = append(dst, `":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"session":`...)
	dst = strconv.AppendQuote(dst, session)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, time.Now().UnixMilli(), 10)
	if s.opts.Pad > 0 {
		dst = append(dst, `,"pad":"`...)
		for i := 0; i < s.opts.Pad; i++ {
			dst = append(dst, 'x')
		}
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// Drop closes every open connection of session: with code when code > 0
// (a close handshake, started in the background), abruptly (TCP close)
// otherwise. It returns how many it closed.
func (s *Server) Drop(session string, code websocket.StatusCode) int {
	s.mu.Lock()
	var open []*conn
	pending := 0
	if st := s.streams[session]; st != nil {
		for c := range st.open {
			c.rec.Dropped = true
			if c.c == nil {
				// Still in its handshake (the client may already hold the
				// 101): dropped the moment Accept returns.
				c.dropAfterAccept, c.dropCode = true, code
				pending++
				continue
			}
			open = append(open, c)
		}
	}
	s.mu.Unlock()
	for _, c := range open {
		s.drop(c, code)
	}
	return len(open) + pending
}

// drop closes c with code, or abruptly when code is 0.
func (s *Server) drop(c *conn, code websocket.StatusCode) {
	if code > 0 {
		// The handshake waits for the client's answer: do not block the caller.
		s.handlers.Go(func() { _ = c.c.Close(code, "dropped by the source") })
	} else {
		_ = c.c.CloseNow()
	}
}

// Conns returns copies of session's connection records, oldest first.
func (s *Server) Conns(session string) []Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[session]
	if st == nil {
		return nil
	}
	out := make([]Conn, len(st.records))
	for i, r := range st.records {
		out[i] = *r
	}
	return out
}

// Open is the number of session's connections open now (a connection
// counts until the server sent its close frame or saw the TCP connection
// end).
func (s *Server) Open(session string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.streams[session]; st != nil {
		return st.live()
	}
	return 0
}

// Ended reports whether every connection session ever had has ended from
// the server's side (its reader saw the end: Conn.Closed and ClientCode are
// final). Open can already be 0 a moment before, once the close frame went out.
func (s *Server) Ended(session string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[session]
	return st == nil || len(st.open) == 0
}

// Violations is how many times a connection of session opened (or tried to)
// while another was open.
func (s *Server) Violations(session string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.streams[session]; st != nil {
		return st.violations
	}
	return 0
}

// Produced is the highest seq session has produced so far (0: none).
func (s *Server) Produced(session string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.streams[session]; st != nil {
		return s.produced(st, time.Now())
	}
	return 0
}

// Overlaps checks the records of session: it returns an error naming the
// first two connections whose [Opened, End] intervals overlap.
func Overlaps(conns []Conn) error {
	for i := range conns {
		for j := i + 1; j < len(conns); j++ {
			a, b := conns[i], conns[j]
			aEnd, bEnd := a.End(), b.End()
			if aEnd.IsZero() {
				aEnd = time.Now()
			}
			if bEnd.IsZero() {
				bEnd = time.Now()
			}
			if a.Opened.Before(bEnd) && b.Opened.Before(aEnd) {
				return fmt.Errorf("connections %d [%s, %s] and %d [%s, %s] of %s overlap",
					a.ID, a.Opened.Format(time.StampMicro), fmtEnd(a.End()), b.ID, b.Opened.Format(time.StampMicro), fmtEnd(b.End()), a.Session)
			}
		}
	}
	return nil
}

func fmtEnd(t time.Time) string {
	if t.IsZero() {
		return "open"
	}
	return t.Format(time.StampMicro)
}

// closeWatcher hands coder/websocket a hijacked connection whose writes it
// watches: the server's frames are flushed one write per frame, unmasked,
// so a write starting with 0x88 (FIN + opcode close) is the server sending
// its close frame. (Were frames ever coalesced, the close would only be
// noticed later, when the reader sees the connection end: a stricter check,
// never a laxer one.)
type closeWatcher struct {
	http.ResponseWriter
	closing func()
}

func (w closeWatcher) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	wc := &watchConn{Conn: c, closing: w.closing}
	buffered, _ := brw.Reader.Peek(brw.Reader.Buffered())
	r := bufio.NewReader(io.MultiReader(bytes.NewReader(bytes.Clone(buffered)), wc))
	if len(buffered) > 0 {
		_, _ = r.Peek(len(buffered)) // keep them buffered: Accept re-reads Buffered() bytes first
	}
	return wc, bufio.NewReadWriter(r, bufio.NewWriter(wc)), nil
}

type watchConn struct {
	net.Conn
	once    sync.Once
	closing func()
}

func (c *watchConn) Write(p []byte) (int, error) {
	if len(p) > 0 && p[0] == 0x88 {
		c.once.Do(c.closing)
	}
	return c.Conn.Write(p)
}
