// Package feed is a seq-numbered WebSocket source for local stacks, demos,
// chaos runs and benchmarks. It behaves like the sources wsfleet connects to
// (meeting media streams, exchange feeds) and keeps its own evidence of what it
// did, so that a harness can judge the workers from the source's side.
//
// A client connects to ws://HOST/feed/<session>[?from=N]. Each session is one
// live stream, like a meeting or a market: seq N (from 1) is produced at
// t0 + N/Config.Rate, t0 being the session's first connection, whether or not
// anybody is connected. Messages are JSON text {"seq":N,"session":S,"ts":MS
// [,"pad":"..."]} (the same contract as the streamer's internal feedtest).
// With from=K (the resume parameter) a connection first receives every
// produced message with seq >= K at once, then the live ones; without it only
// the messages produced after it opened. History is unlimited (messages are
// computed, not stored); a session first seen resuming at K counts as
// having produced K-1 already (a feed restarted under a running stream).
// Other query parameters are ignored.
//
// One connection per session is enforced: in ModeKickOlder (as meeting media
// streams do) a new connection closes the older one (close code 4000); in
// ModeRefuseNewer a connection attempt while another is open is refused with
// HTTP 409; ModeAllow keeps both (to measure overlaps). In every mode the
// server counts the connections it held open at once per session (a kick
// counts as 2: two clients wanted the session at the same time) and records
// every overlap.
//
// Like real sources, the feed can check that its peers are alive
// (Config.PingEvery, off by default): a connection that does not answer a
// WebSocket ping within PingTimeout (a frozen or vanished client) is closed
// without a close handshake (ReasonPingTimeout).
//
// Every connection leaves a ConnRecord: session, open and close times, why it
// closed, and the seqs it sent. Seqs on one connection are contiguous, so the
// range [FirstSeq, LastSeq] is exactly the set of seqs that were written to
// that connection.
//
// Controls (methods, and the same over HTTP under /control/, see Handler):
// switch the mode, drop connections (with a close frame or by aborting the
// TCP connection), refuse new connections (all or one session), read the
// records and the per-session stats. Client speaks the HTTP controls for a
// feed running in another process (cmd/feed).
package feed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Mode says how the feed enforces one connection per session.
type Mode string

// Modes.
const (
	ModeKickOlder   Mode = "kick-older"   // a new connection closes the older one
	ModeRefuseNewer Mode = "refuse-newer" // a new connection is refused (HTTP 409) while one is open
	ModeAllow       Mode = "allow"        // both are kept (the overlap is still counted)
)

// ParseMode parses a mode name.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeKickOlder, ModeRefuseNewer, ModeAllow:
		return Mode(s), nil
	}
	return "", fmt.Errorf("feed mode %q: want %s, %s or %s", s, ModeKickOlder, ModeRefuseNewer, ModeAllow)
}

// Close reasons of a ConnRecord.
const (
	ReasonOpen     = ""             // still open
	ReasonClient   = "client"       // the client closed or went away
	ReasonKicked   = "kicked"       // a newer connection for the session replaced it
	ReasonDropped  = "dropped"      // Drop with a close frame
	ReasonAborted  = "aborted"      // Drop without a close frame (TCP closed)
	ReasonShutdown = "shutdown"     // the server stopped
	ReasonWriteErr = "write-error"  // a write failed or timed out
	ReasonRefused  = "refused"      // refused before the upgrade (see RefusedBy)
	ReasonBadReq   = "bad-request"  // not a valid feed request
	ReasonUpgrade  = "upgrade-fail" // the WebSocket handshake failed
	ReasonPingLost = "ping-timeout" // no pong within Config.PingTimeout (Config.PingEvery > 0)
)

// Close code sent to a connection replaced by a newer one.
const StatusKicked websocket.StatusCode = 4000

// Config configures a Server.
type Config struct {
	// Rate is each session's message rate, in messages per second.
	Rate float64
	// Mode is the one-connection-per-session policy.
	Mode Mode
	// PathPrefix is where sessions live: PathPrefix + <session>.
	PathPrefix string
	// ResumeParam is the query parameter carrying the first seq to send.
	ResumeParam string
	// PayloadBytes pads every message with a "pad" string of that length.
	PayloadBytes int
	// RequireHeaders are headers a handshake must carry (else HTTP 401).
	RequireHeaders map[string]string
	// WriteTimeout bounds one message write; a slower client is closed.
	WriteTimeout time.Duration
	// CloseTimeout bounds a close handshake the server starts.
	CloseTimeout time.Duration
	// PingEvery, when > 0, pings every connection that often; one that does
	// not answer within PingTimeout is closed (ReasonPingLost). 0 (the
	// default) never pings.
	PingEvery   time.Duration
	PingTimeout time.Duration
	// OnClose, when set, is called once with the final record of every
	// connection (and of every refused attempt). It must not block for long.
	OnClose func(ConnRecord)
}

// Defaults.
const (
	DefaultRate         = 5.0
	DefaultMode         = ModeKickOlder
	DefaultPathPrefix   = "/feed/"
	DefaultResumeParam  = "from"
	DefaultWriteTimeout = 5 * time.Second
	DefaultCloseTimeout = 2 * time.Second
)

// DefaultConfig returns the defaults: 5 messages/s, kick-older, /feed/, from.
func DefaultConfig() Config {
	return Config{
		Rate:         DefaultRate,
		Mode:         DefaultMode,
		PathPrefix:   DefaultPathPrefix,
		ResumeParam:  DefaultResumeParam,
		WriteTimeout: DefaultWriteTimeout,
		CloseTimeout: DefaultCloseTimeout,
	}
}

// Validate reports every invalid setting.
func (c Config) Validate() error {
	var errs []error
	if !(c.Rate > 0 && c.Rate <= 100000) {
		errs = append(errs, fmt.Errorf("feed rate %v: want 0 < rate <= 100000 messages/s", c.Rate))
	}
	if _, err := ParseMode(string(c.Mode)); err != nil {
		errs = append(errs, err)
	}
	if !strings.HasPrefix(c.PathPrefix, "/") || !strings.HasSuffix(c.PathPrefix, "/") || strings.HasPrefix(c.PathPrefix, "/control/") {
		errs = append(errs, fmt.Errorf("feed path prefix %q: want /.../ and not /control/", c.PathPrefix))
	}
	if c.ResumeParam == "" {
		errs = append(errs, errors.New("feed resume parameter: empty"))
	}
	if c.PayloadBytes < 0 || c.PayloadBytes > 1<<20 {
		errs = append(errs, fmt.Errorf("feed payload bytes %d: want 0..1MiB", c.PayloadBytes))
	}
	if c.WriteTimeout <= 0 || c.CloseTimeout <= 0 {
		errs = append(errs, errors.New("feed write and close timeouts: want > 0"))
	}
	if c.PingEvery < 0 || (c.PingEvery > 0 && c.PingTimeout <= 0) {
		errs = append(errs, fmt.Errorf("feed ping every %v, timeout %v: want ping every >= 0 and, when pinging, a timeout > 0", c.PingEvery, c.PingTimeout))
	}
	return errors.Join(errs...)
}

// ConnRecord is the feed's record of one connection (or refused attempt).
type ConnRecord struct {
	ID        int64     `json:"id"`
	Session   string    `json:"session"`
	Remote    string    `json:"remote"`
	From      int64     `json:"from"` // the resume parameter; 0 when absent
	OpenedAt  time.Time `json:"opened_at"`
	ClosedAt  time.Time `json:"closed_at"` // zero while open
	Reason    string    `json:"reason"`    // ReasonOpen while open
	RefusedBy string    `json:"refused_by,omitempty"`
	// FirstSeq..LastSeq are the seqs written to this connection (none when
	// Sent is 0).
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
	Sent     int64 `json:"sent"`
}

// Open reports whether the connection was open when the record was taken.
func (r ConnRecord) Open() bool { return r.ClosedAt.IsZero() && r.Reason == ReasonOpen }

// Overlap is a time during which a session had more than one connection.
type Overlap struct {
	Session string    `json:"session"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"` // zero while ongoing
	Max     int       `json:"max"`
}

// SessionStats summarises one session.
type SessionStats struct {
	Connections   int64 `json:"connections"` // accepted connections
	Open          int   `json:"open"`
	MaxConcurrent int   `json:"max_concurrent"`
	Kicks         int64 `json:"kicks"`
	Refused       int64 `json:"refused"`
	Head          int64 `json:"head"`     // highest seq sent on any connection
	Produced      int64 `json:"produced"` // highest seq produced so far
	Sent          int64 `json:"sent"`     // messages written, replays included
}

// Stats is the whole feed's state for a harness.
type Stats struct {
	Mode     Mode                    `json:"mode"`
	Rate     float64                 `json:"rate"`
	Refusing []string                `json:"refusing,omitempty"` // "*" = every session
	Sessions map[string]SessionStats `json:"sessions"`
	Overlaps []Overlap               `json:"overlaps,omitempty"`
}

var sessionPattern = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,200}$`)

type conn struct {
	rec    ConnRecord
	ws     *websocket.Conn // nil until upgraded
	stop   context.CancelCauseFunc
	closed bool
}

type session struct {
	t0      time.Time
	stats   SessionStats
	open    map[int64]*conn
	overlap *Overlap // ongoing
}

// Server is the feed. Create it with New; serve it with Serve or mount
// Handler on your own server (then call Close when done).
type Server struct {
	cfg Config

	mu        sync.Mutex
	mode      Mode
	nextID    int64
	sessions  map[string]*session
	records   []*conn
	overlaps  []*Overlap
	refuseAll bool
	refuse    map[string]bool
	closing   bool

	wg sync.WaitGroup // connection handlers
}

// New returns a Server. cfg must be valid.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("feed config: %w", err)
	}
	return &Server{cfg: cfg, mode: cfg.Mode, sessions: map[string]*session{}, refuse: map[string]bool{}}, nil
}

// URL is the WebSocket URL of session on a feed whose HTTP base is base
// (e.g. "http://127.0.0.1:8790").
func URL(base, session string) string {
	b := strings.TrimSuffix(base, "/")
	b = strings.Replace(strings.Replace(b, "https://", "wss://", 1), "http://", "ws://", 1)
	return b + DefaultPathPrefix + session
}

// Serve serves HTTP on ln until ctx is done, then closes every connection
// (close frame "shutdown") and returns nil. It returns an error only when the
// listener fails.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Close()
		return fmt.Errorf("feed serve: %w", err)
	case <-ctx.Done():
	}
	s.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	<-errc
	return nil
}

// Close refuses new connections, closes the open ones and waits for their
// handlers. It is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	s.closing = true
	var all []*conn
	for _, ss := range s.sessions {
		for _, c := range ss.open {
			all = append(all, c)
		}
	}
	s.mu.Unlock()
	for _, c := range all {
		c.stop(errShutdown)
	}
	s.wg.Wait()
}

// Handler serves the feed at PathPrefix and the controls:
//
//	GET  /healthz
//	GET  /control/stats                      Stats
//	GET  /control/records[?session=S]        []ConnRecord
//	POST /control/mode?mode=kick-older|refuse-newer
//	POST /control/drop[?session=S][&abort=1] {"dropped":N}
//	POST /control/refuse?on=1|0[&session=S]
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /control/stats", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, s.Stats()) })
	mux.HandleFunc("GET /control/records", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, s.Records(r.URL.Query().Get("session")))
	})
	mux.HandleFunc("POST /control/mode", func(w http.ResponseWriter, r *http.Request) {
		m, err := ParseMode(r.URL.Query().Get("mode"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.SetMode(m)
		writeJSON(w, map[string]string{"mode": string(m)})
	})
	mux.HandleFunc("POST /control/drop", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n := s.Drop(q.Get("session"), q.Get("abort") == "1" || q.Get("abort") == "true")
		writeJSON(w, map[string]int{"dropped": n})
	})
	mux.HandleFunc("POST /control/refuse", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		on, err := strconv.ParseBool(q.Get("on"))
		if err != nil {
			http.Error(w, "on: want true or false", http.StatusBadRequest)
			return
		}
		s.SetRefuse(q.Get("session"), on)
		writeJSON(w, map[string]bool{"refusing": on})
	})
	mux.HandleFunc("GET "+s.cfg.PathPrefix+"{session}", s.serveFeed)
	return mux
}

// SetMode switches the one-connection policy for new connections.
func (s *Server) SetMode(m Mode) {
	s.mu.Lock()
	s.mode = m
	s.mu.Unlock()
}

// SetRefuse makes the feed refuse (HTTP 503) new connections for session, or
// for every session when session is "". Turning "" off clears every refusal.
func (s *Server) SetRefuse(session string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if session == "" {
		s.refuseAll = on
		if !on {
			clear(s.refuse)
		}
		return
	}
	if on {
		s.refuse[session] = true
	} else {
		delete(s.refuse, session)
	}
}

var (
	errShutdown = errors.New(ReasonShutdown)
	errKicked   = errors.New(ReasonKicked)
	errDropped  = errors.New(ReasonDropped)
	errAborted  = errors.New(ReasonAborted)
	errPingLost = errors.New(ReasonPingLost)
)

// Drop closes the open connections of session (every session when ""): with
// a close frame (1001 going away), or when abort is set by closing the TCP
// connection without one. It returns how many it dropped.
func (s *Server) Drop(session string, abort bool) int {
	cause := errDropped
	if abort {
		cause = errAborted
	}
	s.mu.Lock()
	var victims []*conn
	for name, ss := range s.sessions {
		if session != "" && name != session {
			continue
		}
		for _, c := range ss.open {
			victims = append(victims, c)
		}
	}
	s.mu.Unlock()
	for _, c := range victims {
		c.stop(cause)
	}
	return len(victims)
}

// Records returns a copy of every connection record (of session only when
// not ""), in the order the connections were attempted.
func (s *Server) Records(session string) []ConnRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ConnRecord, 0, len(s.records))
	for _, c := range s.records {
		if session == "" || c.rec.Session == session {
			out = append(out, c.rec)
		}
	}
	return out
}

// Stats returns the per-session counters and every overlap.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Mode: s.mode, Rate: s.cfg.Rate, Sessions: make(map[string]SessionStats, len(s.sessions))}
	if s.refuseAll {
		st.Refusing = append(st.Refusing, "*")
	}
	for k := range s.refuse {
		st.Refusing = append(st.Refusing, k)
	}
	sort.Strings(st.Refusing)
	now := time.Now()
	for k, ss := range s.sessions {
		v := ss.stats
		v.Open = len(ss.open)
		v.Produced = s.producedLocked(ss, now)
		st.Sessions[k] = v
	}
	for _, o := range s.overlaps {
		st.Overlaps = append(st.Overlaps, *o)
	}
	return st
}

func (s *Server) sessionLocked(name string) *session {
	ss := s.sessions[name]
	if ss == nil {
		ss = &session{open: map[int64]*conn{}}
		s.sessions[name] = ss
	}
	return ss
}

// producedLocked is the highest seq of ss produced at now (0 before its first
// connection).
func (s *Server) producedLocked(ss *session, now time.Time) int64 {
	if ss.t0.IsZero() {
		return 0
	}
	return int64(now.Sub(ss.t0).Seconds() * s.cfg.Rate)
}

// dueAt is when seq is produced.
func (s *Server) dueAt(t0 time.Time, seq int64) time.Time {
	return t0.Add(time.Duration(float64(seq) / s.cfg.Rate * float64(time.Second)))
}

// refused records an attempt that never became a connection.
func (s *Server) refusedLocked(rec ConnRecord, reason, by string) ConnRecord {
	s.nextID++
	rec.ID = s.nextID
	rec.ClosedAt = rec.OpenedAt
	rec.Reason, rec.RefusedBy = reason, by
	s.records = append(s.records, &conn{rec: rec, closed: true})
	if reason == ReasonRefused {
		s.sessionLocked(rec.Session).stats.Refused++
	}
	return rec
}

func (s *Server) serveFeed(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	name := r.PathValue("session")
	rec := ConnRecord{Session: name, Remote: r.RemoteAddr, OpenedAt: now}
	if !sessionPattern.MatchString(name) {
		http.Error(w, "session: want [A-Za-z0-9._~-]{1,200}", http.StatusBadRequest)
		return
	}
	for k, v := range s.cfg.RequireHeaders {
		if r.Header.Get(k) != v {
			s.mu.Lock()
			done := s.refusedLocked(rec, ReasonBadReq, "missing header "+k)
			s.mu.Unlock()
			s.notify(done)
			http.Error(w, "missing or wrong header "+k, http.StatusUnauthorized)
			return
		}
	}
	if v := r.URL.Query().Get(s.cfg.ResumeParam); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.mu.Lock()
			done := s.refusedLocked(rec, ReasonBadReq, "bad "+s.cfg.ResumeParam)
			s.mu.Unlock()
			s.notify(done)
			http.Error(w, s.cfg.ResumeParam+": want a non-negative integer", http.StatusBadRequest)
			return
		}
		rec.From = n
	}

	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	ss := s.sessionLocked(name)
	if s.refuseAll || s.refuse[name] {
		done := s.refusedLocked(rec, ReasonRefused, "control")
		s.mu.Unlock()
		s.notify(done)
		http.Error(w, "refused by feed control", http.StatusServiceUnavailable)
		return
	}
	if s.mode == ModeRefuseNewer && len(ss.open) > 0 {
		done := s.refusedLocked(rec, ReasonRefused, string(ModeRefuseNewer))
		s.mu.Unlock()
		s.notify(done)
		http.Error(w, "session already has a connection", http.StatusConflict)
		return
	}
	s.nextID++
	rec.ID = s.nextID
	if ss.t0.IsZero() {
		// A session first seen resuming at K (the feed restarted under a
		// running stream) has already produced K-1 messages.
		ss.t0 = now
		if rec.From > 1 {
			ss.t0 = now.Add(-time.Duration(float64(rec.From-1) / s.cfg.Rate * float64(time.Second)))
		}
	}
	start := s.producedLocked(ss, now) + 1
	if rec.From > 0 {
		start = rec.From
	}
	if start < 1 {
		start = 1
	}
	t0 := ss.t0
	rec.FirstSeq, rec.LastSeq = start, start-1
	ctx, stop := context.WithCancelCause(context.WithoutCancel(r.Context()))
	c := &conn{rec: rec, stop: stop}
	s.records = append(s.records, c)
	var older []*conn
	for _, o := range ss.open {
		older = append(older, o)
	}
	ss.open[c.rec.ID] = c
	ss.stats.Connections++
	if n := len(ss.open); n > ss.stats.MaxConcurrent {
		ss.stats.MaxConcurrent = n
	}
	if len(ss.open) > 1 {
		if ss.overlap == nil {
			ss.overlap = &Overlap{Session: name, Start: now}
			s.overlaps = append(s.overlaps, ss.overlap)
		}
		ss.overlap.Max = max(ss.overlap.Max, len(ss.open))
	}
	if s.mode != ModeKickOlder {
		older = nil
	}
	ss.stats.Kicks += int64(len(older))
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	for _, o := range older {
		o.stop(errKicked)
	}

	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.finish(c, ReasonUpgrade)
		stop(nil)
		return
	}
	s.mu.Lock()
	c.ws = ws
	s.mu.Unlock()
	ws.SetReadLimit(64 << 10)
	s.pump(ctx, c, ws, t0, start)
}

// pump writes the session's messages to one connection until it ends.
func (s *Server) pump(ctx context.Context, c *conn, ws *websocket.Conn, t0 time.Time, next int64) {
	// CloseRead's context must outlive a kick or a drop: cancelling it aborts
	// the connection without a close frame.
	readCtx := ws.CloseRead(context.Background()) // done when the client closes or goes away
	pinged := make(chan struct{})
	if s.cfg.PingEvery > 0 {
		go func() {
			defer close(pinged)
			s.keepalive(ctx, readCtx, c, ws)
		}()
	} else {
		close(pinged)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	buf := make([]byte, 0, 96+len(c.rec.Session)+s.cfg.PayloadBytes)
	pad := strings.Repeat("x", s.cfg.PayloadBytes)
	reason := ReasonClient
	for {
		if wait := time.Until(s.dueAt(t0, next)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-readCtx.Done():
			case <-ctx.Done():
			}
		}
		if readCtx.Err() != nil || ctx.Err() != nil {
			break
		}
		buf = AppendMessage(buf[:0], c.rec.Session, next, time.Now().UnixMilli(), pad)
		wctx, cancel := context.WithTimeout(context.Background(), s.cfg.WriteTimeout)
		err := ws.Write(wctx, websocket.MessageText, buf)
		cancel()
		if err != nil {
			if readCtx.Err() == nil && ctx.Err() == nil {
				reason = ReasonWriteErr
			}
			break
		}
		s.sent(c, next)
		next++
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errKicked):
		reason = ReasonKicked
	case errors.Is(cause, errDropped):
		reason = ReasonDropped
	case errors.Is(cause, errAborted):
		reason = ReasonAborted
	case errors.Is(cause, errShutdown):
		reason = ReasonShutdown
	case errors.Is(cause, errPingLost):
		reason = ReasonPingLost
	}
	// Stop counting the connection as open as soon as it stops sending: a
	// kicked connection is gone from the source's point of view.
	s.finish(c, reason)
	switch reason {
	case ReasonAborted, ReasonPingLost:
		_ = ws.CloseNow()
	case ReasonKicked:
		s.closeWS(ws, StatusKicked, "replaced by a newer connection")
	case ReasonDropped:
		s.closeWS(ws, websocket.StatusGoingAway, "dropped by feed control")
	case ReasonShutdown:
		s.closeWS(ws, websocket.StatusGoingAway, "feed shutting down")
	case ReasonWriteErr:
		s.closeWS(ws, websocket.StatusPolicyViolation, "write timed out")
	default:
		s.closeWS(ws, websocket.StatusNormalClosure, "")
	}
	c.stop(nil)
	<-pinged
}

// keepalive pings ws every PingEvery until the connection ends, and stops
// it (ReasonPingLost) when a pong does not come within PingTimeout.
func (s *Server) keepalive(ctx, readCtx context.Context, c *conn, ws *websocket.Conn) {
	t := time.NewTimer(s.cfg.PingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-readCtx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, s.cfg.PingTimeout)
		err := ws.Ping(pctx)
		timedOut := errors.Is(pctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil {
			if timedOut && ctx.Err() == nil && readCtx.Err() == nil {
				c.stop(errPingLost)
			}
			return
		}
		t.Reset(s.cfg.PingEvery)
	}
}

func (s *Server) closeWS(ws *websocket.Conn, code websocket.StatusCode, why string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ws.Close(code, why)
	}()
	select {
	case <-done:
	case <-time.After(s.cfg.CloseTimeout):
		_ = ws.CloseNow()
		<-done
	}
}

func (s *Server) sent(c *conn, seq int64) {
	s.mu.Lock()
	c.rec.LastSeq = seq
	c.rec.Sent++
	ss := s.sessions[c.rec.Session]
	ss.stats.Sent++
	if seq > ss.stats.Head {
		ss.stats.Head = seq
	}
	s.mu.Unlock()
}

func (s *Server) finish(c *conn, reason string) {
	s.mu.Lock()
	if c.closed {
		s.mu.Unlock()
		return
	}
	now := time.Now()
	c.closed = true
	c.rec.ClosedAt, c.rec.Reason = now, reason
	ss := s.sessions[c.rec.Session]
	delete(ss.open, c.rec.ID)
	if ss.overlap != nil && len(ss.open) <= 1 {
		ss.overlap.End = now
		ss.overlap = nil
	}
	rec := c.rec
	s.mu.Unlock()
	s.notify(rec)
}

func (s *Server) notify(rec ConnRecord) {
	if s.cfg.OnClose != nil {
		s.cfg.OnClose(rec)
	}
}

// AppendMessage appends the feed's message for seq of session:
// {"seq":N,"session":S,"ts":MS[,"pad":"x..."]}. session must match the
// session pattern (no character JSON must escape).
func AppendMessage(b []byte, session string, seq, nowMs int64, pad string) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"session":"`...)
	b = append(b, session...)
	b = append(b, `","ts":`...)
	b = strconv.AppendInt(b, nowMs, 10)
	if pad != "" {
		b = append(b, `,"pad":"`...)
		b = append(b, pad...)
		b = append(b, '"')
	}
	return append(b, '}')
}
