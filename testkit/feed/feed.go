// Package feed owns the seq-numbered WebSocket source that the streamer's
// tests, the local stack, the demo, chaos and bench connect workers to
// (cmd/feed runs it in its own process). It is test infrastructure, in the
// testkit module: no shipped binary (functions/ingest, workers/streamer)
// imports it. It behaves like the sources wsfleet targets (meeting media
// streams, exchange feeds) and keeps its own evidence, so that a test or a
// harness can judge the workers from the source's side.
//
// A client connects to ws://HOST/feed/<session>[?from=K]. Each session is one
// live stream: seq N (from 1) is produced at t0 + N/Config.Rate, t0 being
// its first connection, whether or not anybody is connected. Messages are
// JSON text {"seq":N,"session":S,"ts":MS[,"pad":"..."][,"auth":D]}, MS
// the instant seq N was produced (the same on every connection), D
// being AuthDigest of the connection's Authorization header (absent when the
// handshake had none): a rotated credential shows as a new D, the value never
// leaves the feed. With from=K >= 1 a
// connection first gets every produced message with seq >= K at once, then
// the live ones; without it only those produced after it opened. A session
// first seen resuming at K counts as having produced K-1 already (a feed
// restarted under a running stream). Other query parameters are ignored.
// With Config.RequireHeaders a handshake missing one is refused (HTTP 401).
//
// One connection per session: an attempt while another connection of the
// session is open is a violation (SessionStats.Violations). ModeKickOlder
// (what meeting media servers do) closes the older one with code 4000,
// ModeRefuseNewer refuses the newer with HTTP 409, ModeAllow keeps both. The
// feed also counts the connections open at once (a kick counts as 2) and
// records every overlap (Stats.Overlaps). A connection is open until the
// server sends a close frame (its echo of the client's, or its own) or else
// the TCP connection ends: a client that dials again as soon as its close
// handshake completed does not overlap its previous connection. With
// Config.PingEvery, a client that does not answer a ping within PingTimeout
// is closed without a close handshake (ReasonPingLost).
//
// Planned overlaps: with Config.TenureHeader, the value of that handshake
// header is the connection's tenure (a worker and its lease epoch,
// ConnRecord.Tenure). A connection opened while another of the session with
// the same non-empty tenure is open is a planned overlap, a make-before-break
// reconnect: no violation, nobody is kicked or refused, and it is counted in
// SessionStats.PlannedOverlaps and recorded in Stats.PlannedOverlaps instead
// of Stats.Overlaps. Different or empty tenures are violations as above. The
// stream being the session's, both connections get the same seqs at about
// the same time (the newer one from its from=K).
//
// Hot standbys (standby.go): a tenure "<anything>/standby/<n>" names a
// standby connection, a second worker's non-delivering copy of the stream
// (an owner's is "<worker id>/<lease epoch>"). With Config.AllowStandby
// (SetAllowStandby, POST /control/standby) such a connection is admitted
// beside the owner's: no violation, it kicks or refuses nobody and nobody
// kicks or refuses it (ConnRecord.Standby); it is counted apart
// (SessionStats.StandbyConns, MaxStandby; Stats.StandbyOverlaps), so that
// two owners are still a violation. Without it (the default) a standby
// connection is one like any other: kick-older kicks, refuse-newer refuses,
// as a source with a one-connection policy does.
//
// Real sources' behaviours (docs/sources.md), off by default: Config.Shape
// puts the seq elsewhere (nested at data.u, a string, none, or binary
// frames); Config.SubscribeWithin closes a connection that does not
// subscribe in time (ReasonNoSubscribe) and starts the stream at the
// subscribe's "from"; Config.KeepaliveEvery sends KEEP_ALIVE_REQ messages
// and closes a connection that does not answer them (ReasonKeepaliveLost);
// Config.MaxConnAge closes each connection at that age with 1001
// (ReasonMaxAge), as Binance does after 24 hours, and with
// Config.ShutdownNotice it first sends, that long before, the text message
// {"e":"serverShutdown","E":MS} (no seq; the stream goes on until the
// close). SetSchedule switches those two at run time, for the connections
// opened after it.
//
// Poisoned messages (SetPoison, POST /control/poison): for a while, every
// N-th seq of a session is sent as a text message a sink may fail to carry
// as it is, invalid UTF-8 (PoisonUTF8) or characters SQS refuses
// (PoisonForbidden), {"seq":N,...,"poison":KIND,"x":"<bytes>"}: the seq
// first, the bytes fixed by kind and seq (PoisonBytes), so that a replay
// resends them and a harness can check them at the destination (PoisonIn).
// Stats.Poisons names every episode's seqs.
//
// Every connection and refused attempt leaves a ConnRecord: times, why it
// closed, the client's close code and the (contiguous) seqs it was sent.
// Controls (methods, and over HTTP under /control/, see Handler) switch the
// mode and the schedule, drop connections, refuse new ones and read records
// and stats; Client speaks them to a feed in another process.
package feed

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	ReasonDropped  = "dropped"      // Drop with a close code
	ReasonAborted  = "aborted"      // Drop without one (TCP closed)
	ReasonShutdown = "shutdown"     // the server stopped
	ReasonWriteErr = "write-error"  // a write failed or timed out
	ReasonRefused  = "refused"      // refused before the upgrade (see RefusedBy)
	ReasonBadReq   = "bad-request"  // not a valid feed request
	ReasonUpgrade  = "upgrade-fail" // the WebSocket handshake failed
	ReasonPingLost = "ping-timeout" // no pong within Config.PingTimeout (Config.PingEvery > 0)

	ReasonNoSubscribe   = "no-subscribe"   // no subscribe within Config.SubscribeWithin
	ReasonKeepaliveLost = "keepalive-lost" // a KEEP_ALIVE_REQ not answered (Config.KeepaliveEvery)
	ReasonMaxAge        = "max-age"        // it reached Config.MaxConnAge (closed with 1001)
)

// PathPrefix is where sessions live: PathPrefix + <session>.
const PathPrefix = "/feed/"

// StatusKicked is the close code sent to a connection replaced by a newer one.
const StatusKicked websocket.StatusCode = 4000

// ShutdownEvent is the "e" of the notice a connection gets
// Config.ShutdownNotice before it reaches Config.MaxConnAge (Binance
// WebSocket API style): {"e":"serverShutdown","E":MS}. It carries no seq.
const ShutdownEvent = "serverShutdown"

// Defaults of the zero fields of a Config.
const (
	DefaultRate         = 5.0
	DefaultMode         = ModeKickOlder
	DefaultResumeParam  = "from"
	DefaultWriteTimeout = 5 * time.Second
	DefaultCloseTimeout = 2 * time.Second
	DefaultPingTimeout  = 2 * time.Second
)

// Config configures a Server. Zero fields take the defaults above.
type Config struct {
	// Rate is each session's message rate, in messages per second.
	Rate float64
	// Mode is the one-connection-per-session policy.
	Mode Mode
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
	// not answer within PingTimeout is closed (ReasonPingLost). 0 never pings.
	PingEvery   time.Duration
	PingTimeout time.Duration
	// TLS, when set, makes the feed serve wss:// (and its controls over
	// https) with this configuration (testkit/tlsca makes one from a
	// per-run CA).
	TLS *tls.Config
	// OnClose, when set, is called once with the final record of every
	// connection (and of every refused attempt). It must not block for long.
	OnClose func(ConnRecord)

	// Real sources' behaviours (docs/sources.md; off when zero).
	//
	// Shape is the messages' shape (ShapeFlat by default).
	Shape Shape
	// SubscribeWithin, when > 0, is how long a connection has to send a
	// text message holding "op":"subscribe" (Coinbase-style); one that does
	// not is closed (ReasonNoSubscribe). The feed acks {"event":"subscribed"}
	// and sends from the message's "from":"K" as from=K would (from empty:
	// the live messages only).
	SubscribeWithin time.Duration
	// KeepaliveEvery, when > 0, sends {"msg_type":"KEEP_ALIVE_REQ"} that
	// often (Zoom RTMS-style); a connection that has not answered a request
	// with a text message holding KEEP_ALIVE_RESP within 2 × KeepaliveEvery
	// is closed (ReasonKeepaliveLost).
	KeepaliveEvery time.Duration
	// MaxConnAge, when > 0, closes every connection when it reaches that age
	// (from its OpenedAt), with close status 1001 (ReasonMaxAge), as Binance
	// ends a connection after 24 hours. SetSchedule changes it at run time.
	MaxConnAge time.Duration
	// ShutdownNotice, when > 0 (only with MaxConnAge, and shorter), is how
	// long before closing a connection at its age the feed sends it the
	// text message {"e":"serverShutdown","E":MS}; the stream goes on until
	// the close.
	ShutdownNotice time.Duration

	// TenureHeader, when set, is a handshake header naming the client's
	// tenure (a worker and its lease epoch, "<worker_id>/<lease_epoch>").
	// Its value is recorded (ConnRecord.Tenure), and a connection opened
	// while only connections of the same non-empty tenure are open is a
	// planned overlap (a make-before-break reconnect), not a violation.
	TenureHeader string
	// AllowStandby admits standby connections (a TenureHeader value
	// "<anything>/standby/<n>") beside the session's owner connection:
	// neither a violation nor kicked or refused, and kicking or refusing
	// nobody (standby.go). Off: a standby connection is like any other.
	// SetAllowStandby switches it at run time. Needs TenureHeader.
	AllowStandby bool

	// ConnLimit refuses a client IP's attempts beyond a connection rate
	// (HTTP 429; connlimit.go). Zero: off.
	ConnLimit ConnLimit
}

func (c Config) withDefaults() Config {
	c.Rate, c.Mode = cmp.Or(c.Rate, DefaultRate), cmp.Or(c.Mode, DefaultMode)
	c.ResumeParam, c.PingTimeout = cmp.Or(c.ResumeParam, DefaultResumeParam), cmp.Or(c.PingTimeout, DefaultPingTimeout)
	c.WriteTimeout, c.CloseTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout), cmp.Or(c.CloseTimeout, DefaultCloseTimeout)
	return c
}

// Validate reports every invalid setting (zero fields take their defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if !(c.Rate > 0 && c.Rate <= 100000) {
		errs = append(errs, fmt.Errorf("feed rate %v: want 0 < rate <= 100000 messages/s", c.Rate))
	}
	if _, err := ParseMode(string(c.Mode)); err != nil {
		errs = append(errs, err)
	}
	if c.PayloadBytes < 0 || c.PayloadBytes > 1<<20 {
		errs = append(errs, fmt.Errorf("feed payload bytes %d: want 0..1MiB", c.PayloadBytes))
	}
	if c.WriteTimeout < 0 || c.CloseTimeout < 0 || c.PingEvery < 0 || c.PingTimeout < 0 || c.SubscribeWithin < 0 || c.KeepaliveEvery < 0 {
		errs = append(errs, errors.New("feed write, close, ping, subscribe and keep-alive durations: want >= 0"))
	}
	if _, err := ParseShape(string(c.Shape)); err != nil {
		errs = append(errs, err)
	}
	if err := validSchedule(c.MaxConnAge, c.ShutdownNotice); err != nil {
		errs = append(errs, err)
	}
	if err := c.ConnLimit.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.AllowStandby && c.TenureHeader == "" {
		errs = append(errs, errors.New("feed allow standby: needs a tenure header (a standby connection is told by its tenure)"))
	}
	return errors.Join(errs...)
}

// validSchedule checks a max connection age and its shutdown notice.
func validSchedule(maxAge, notice time.Duration) error {
	switch {
	case maxAge < 0 || notice < 0:
		return fmt.Errorf("feed max connection age %s, shutdown notice %s: want >= 0", maxAge, notice)
	case notice > 0 && maxAge == 0:
		return fmt.Errorf("feed shutdown notice %s: needs a max connection age", notice)
	case notice > 0 && notice >= maxAge:
		return fmt.Errorf("feed shutdown notice %s: want less than the max connection age %s", notice, maxAge)
	}
	return nil
}

// ConnRecord is the feed's record of one connection (or refused attempt).
type ConnRecord struct {
	ID      int64  `json:"id"`
	Session string `json:"session"`
	Remote  string `json:"remote"`
	// RequestURI and Header are the handshake's; they may carry secrets,
	// so they stay in the process (never serialised).
	RequestURI string      `json:"-"`
	Header     http.Header `json:"-"`
	From       int64       `json:"from"` // the resume parameter; 0 when absent
	// Tenure is the handshake's Config.TenureHeader ("" when unset or absent).
	Tenure string `json:"tenure,omitempty"`
	// Standby: admitted as a standby connection (a standby tenure while
	// standbys were allowed); it conflicted with no other connection.
	Standby bool `json:"standby,omitempty"`
	// AuthDigest is AuthDigest of the handshake's Authorization header
	// ("" when absent): which credential dialled, not the credential.
	AuthDigest string    `json:"auth_digest,omitempty"`
	OpenedAt   time.Time `json:"opened_at"`
	// ClosedAt is when the connection ended for the source: the server sent
	// its close frame, or else the TCP connection ended. Zero while open.
	ClosedAt time.Time `json:"closed_at"`
	// EndedAt is when the server saw the TCP connection end; ClientCode is
	// final from then on. Zero before.
	EndedAt time.Time `json:"ended_at"`
	Reason  string    `json:"reason"` // ReasonOpen while open
	// NoticeAt is when the feed sent the shutdown notice (Config.
	// ShutdownNotice); zero when it did not.
	NoticeAt  time.Time `json:"notice_at,omitzero"`
	RefusedBy string    `json:"refused_by,omitempty"`
	// ClientCode is the close code the client sent; -1 when none.
	ClientCode int `json:"client_code"`
	// FirstSeq..LastSeq are the seqs written to this connection (none when
	// Sent is 0).
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
	Sent     int64 `json:"sent"`
}

// Open reports whether the connection was open when the record was taken.
func (r ConnRecord) Open() bool { return r.ClosedAt.IsZero() }

// Overlap is a time during which a session had more than one connection:
// in Stats.Overlaps, connections of different (or no) tenures (Max counts
// every connection open); in Stats.PlannedOverlaps, connections of one
// tenure, Tenure (Max counts those).
type Overlap struct {
	Session string    `json:"session"`
	Tenure  string    `json:"tenure,omitempty"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"` // zero while ongoing
	Max     int       `json:"max"`
}

// SessionStats summarises one session.
type SessionStats struct {
	Connections int64 `json:"connections"` // accepted connections
	Open        int   `json:"open"`
	// MaxConcurrent is the most connections open at once, planned overlaps
	// included, admitted standby connections (ConnRecord.Standby) not.
	MaxConcurrent int `json:"max_concurrent"`
	// StandbyConns counts the accepted standby connections (ConnRecord.
	// Standby), MaxStandby the most open at once.
	StandbyConns int64 `json:"standby_conns,omitempty"`
	MaxStandby   int   `json:"max_standby,omitempty"`
	// Violations counts the attempts (accepted or refused) made while
	// another connection of the session was open, one of the same
	// non-empty tenure and admitted standby connections excepted.
	Violations int64 `json:"violations"`
	// PlannedOverlaps counts the connections accepted while another one of
	// the session with the same non-empty tenure was open.
	PlannedOverlaps int64 `json:"planned_overlaps"`
	Kicks           int64 `json:"kicks"`
	Refused         int64 `json:"refused"`
	Head            int64 `json:"head"`     // highest seq sent on any connection
	Produced        int64 `json:"produced"` // highest seq produced so far
	Sent            int64 `json:"sent"`     // messages written, replays included
}

// Stats is the whole feed's state for a harness.
type Stats struct {
	Mode     Mode                    `json:"mode"`
	Rate     float64                 `json:"rate"`
	Refusing []string                `json:"refusing,omitempty"` // "*" = every session
	Sessions map[string]SessionStats `json:"sessions"`
	Overlaps []Overlap               `json:"overlaps,omitempty"`
	// PlannedOverlaps are the overlaps of connections of one tenure.
	PlannedOverlaps []Overlap `json:"planned_overlaps,omitempty"`
	// AllowStandby says whether standby connections are admitted now
	// (SetAllowStandby); StandbyOverlaps are the times a session had
	// admitted standby connections open beside an owner's (Max counts
	// every connection open).
	AllowStandby    bool      `json:"allow_standby,omitempty"`
	StandbyOverlaps []Overlap `json:"standby_overlaps,omitempty"`
	// MaxConnAgeMs and ShutdownNoticeMs are the schedule new connections
	// get (SetSchedule); 0 is off.
	MaxConnAgeMs     int64 `json:"max_conn_age_ms,omitempty"`
	ShutdownNoticeMs int64 `json:"shutdown_notice_ms,omitempty"`
	// Poisons are every session's poisoning episodes (SetPoison), in the
	// order they started.
	Poisons []PoisonSpan `json:"poisons,omitempty"`
	// RateLimited counts the attempts refused over Config.ConnLimit.
	RateLimited int64 `json:"rate_limited,omitempty"`
}

var sessionPattern = regexp.MustCompile(`^[A-Za-z0-9._~-]{1,200}$`)

type conn struct {
	rec  ConnRecord
	ctx  context.Context // cancelled, with the cause, when the server ends it
	stop context.CancelCauseFunc
	// maxAge and notice are the schedule when it opened (0: off).
	maxAge, notice time.Duration
}

type session struct {
	t0      time.Time
	stats   SessionStats
	open    map[int64]*conn
	pending int                 // accepted connections whose handler has not finished
	overlap *Overlap            // the ongoing overlap of different tenures
	standby *Overlap            // the ongoing overlap of standbys beside an owner
	planned map[string]*Overlap // the ongoing overlaps of one tenure, by tenure
	poison  *PoisonSpan         // the ongoing poisoning episode (nil: none)
	poisons []*PoisonSpan       // every poisoning episode
}

// Server is the feed. Create it with New; serve it with Start, or mount
// Handler on your own server (then call Close when done).
type Server struct {
	cfg Config

	// beforeAccept, when set (tests of this package), runs after a
	// connection is registered and before its handshake is answered.
	beforeAccept func(session string)

	mu        sync.Mutex
	mode      Mode
	maxAge    time.Duration // the schedule of new connections
	notice    time.Duration
	nextID    int64
	sessions  map[string]*session
	records   []*conn
	overlaps  []*Overlap
	planned   []*Overlap
	standbys  []*Overlap // every standby overlap (standby.go)
	allowSB   bool       // standby connections are admitted
	refuseAll bool
	refuse    map[string]bool
	poisons   []*PoisonSpan
	anyPoison atomic.Bool // a session was ever poisoned: the pump asks poisonOf
	closing   bool
	lns       []net.Listener
	hs        *http.Server

	// attempts are the attempts within Config.ConnLimit's window by host
	// and client IP; rateLimited counts those refused for it.
	attempts    map[string][]time.Time
	rateLimited int64

	wg sync.WaitGroup // connection handlers and Start's server
}

// New returns a Server. cfg must be valid.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("feed config: %w", err)
	}
	cfg = cfg.withDefaults()
	return &Server{cfg: cfg, mode: cfg.Mode, maxAge: cfg.MaxConnAge, notice: cfg.ShutdownNotice, allowSB: cfg.AllowStandby,
		sessions: map[string]*session{}, refuse: map[string]bool{}}, nil
}

// TB is the part of testing.TB that StartForTest uses.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
}

// StartForTest starts a feed with cfg on a free 127.0.0.1 port, closed when
// the test t ends.
func StartForTest(t TB, cfg Config) *Server {
	t.Helper()
	s, err := New(cfg)
	if err == nil {
		err = s.Start("127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// URL is the WebSocket URL of session on a feed whose HTTP base is base
// (e.g. "http://127.0.0.1:8790").
func URL(base, session string) string {
	b := strings.TrimSuffix(base, "/")
	b = strings.Replace(strings.Replace(b, "https://", "wss://", 1), "http://", "ws://", 1)
	return b + PathPrefix + session
}

// Start listens on every addr ("127.0.0.1:0" for a free port) and serves
// Handler there until Close. Call it once.
func (s *Server) Start(addrs ...string) error {
	var lns []net.Listener
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return fmt.Errorf("feed listen %s: %w", a, err)
		}
		if s.cfg.TLS != nil {
			ln = tls.NewListener(ln, s.cfg.TLS)
		}
		lns = append(lns, ln)
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	s.mu.Lock()
	s.lns, s.hs = lns, hs
	s.mu.Unlock()
	for _, ln := range lns {
		s.wg.Go(func() { _ = hs.Serve(ln) }) // returns at Close
	}
	return nil
}

// Addr is the first address Start listens on ("" before Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lns) == 0 {
		return ""
	}
	return s.lns[0].Addr().String()
}

// URL is the WebSocket URL of session on this server (after Start).
func (s *Server) URL(session string) string {
	return s.scheme() + "://" + s.Addr() + PathPrefix + session
}

// scheme is wss with TLS, else ws.
func (s *Server) scheme() string {
	if s.cfg.TLS != nil {
		return "wss"
	}
	return "ws"
}

// Close refuses new connections, closes the open ones (close frame 1001,
// ReasonShutdown), stops Start's server and waits for every handler. It is
// idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	s.closing = true
	var all []*conn
	for _, ss := range s.sessions {
		for _, c := range ss.open {
			all = append(all, c)
		}
	}
	hs := s.hs
	s.mu.Unlock()
	for _, c := range all {
		c.stop(errShutdown)
	}
	if hs != nil {
		_ = hs.Close() // hijacked WebSocket connections are the handlers'
	}
	s.wg.Wait()
}

// Handler serves the feed at PathPrefix + <session> and the controls:
//
//	GET  /healthz
//	GET  /control/stats                      Stats
//	GET  /control/records[?session=S]        []ConnRecord
//	POST /control/mode?mode=kick-older|refuse-newer|allow
//	POST /control/drop[?session=S][&abort=1] {"dropped":N}
//	POST /control/refuse?on=1|0[&session=S]
//	POST /control/schedule?max_age=D[&notice=D]  {"max_age":D,"notice":D}
//	POST /control/poison?session=S&kind=K[&every=N]  PoisonSpan
//	POST /control/standby?allow=1|0          {"allow_standby":B}
//
// D is a Go duration ("3s"); empty or 0 is off (see SetSchedule). K is
// invalid-utf8, forbidden or off, N a count (default 1; see SetPoison).
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
		code := websocket.StatusGoingAway
		if q.Get("abort") == "1" || q.Get("abort") == "true" {
			code = 0
		}
		writeJSON(w, map[string]int{"dropped": s.Drop(q.Get("session"), code)})
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
	mux.HandleFunc("POST /control/schedule", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var d [2]time.Duration
		for i, k := range []string{"max_age", "notice"} {
			if v := q.Get(k); v != "" {
				var err error
				if d[i], err = time.ParseDuration(v); err != nil {
					http.Error(w, k+": want a duration such as 3s", http.StatusBadRequest)
					return
				}
			}
		}
		if err := s.SetSchedule(d[0], d[1]); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]string{"max_age": d[0].String(), "notice": d[1].String()})
	})
	mux.HandleFunc("POST /control/poison", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		kind, err := ParsePoison(q.Get("kind"))
		every := int64(1)
		if v := q.Get("every"); v != "" && err == nil {
			if every, err = strconv.ParseInt(v, 10, 64); err != nil {
				err = errors.New("every: want a count such as 2")
			}
		}
		var span PoisonSpan
		if err == nil {
			span, err = s.SetPoison(q.Get("session"), kind, every)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		writeJSON(w, span)
	})
	mux.HandleFunc("POST /control/standby", s.serveSetAllowStandby)
	mux.HandleFunc("GET "+PathPrefix+"{session}", s.serveFeed)
	return mux
}

// SetMode switches the one-connection policy for new connections.
func (s *Server) SetMode(m Mode) {
	s.mu.Lock()
	s.mode = m
	s.mu.Unlock()
}

// SetSchedule sets Config.MaxConnAge and Config.ShutdownNotice (0: off) for
// the connections opened from now on; those already open keep theirs.
func (s *Server) SetSchedule(maxAge, notice time.Duration) error {
	if err := validSchedule(maxAge, notice); err != nil {
		return err
	}
	s.mu.Lock()
	s.maxAge, s.notice = maxAge, notice
	s.mu.Unlock()
	return nil
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

// Why the server ended a connection (the cause of its context).
var (
	errShutdown  = errors.New(ReasonShutdown)
	errKicked    = errors.New(ReasonKicked)
	errAborted   = errors.New(ReasonAborted)
	errPingLost  = errors.New(ReasonPingLost)
	errWriteFail = errors.New(ReasonWriteErr)

	errNoSubscribe   = errors.New(ReasonNoSubscribe)
	errKeepaliveLost = errors.New(ReasonKeepaliveLost)
	errMaxAge        = errors.New(ReasonMaxAge)
)

type dropped struct{ code websocket.StatusCode }

func (dropped) Error() string { return ReasonDropped }

// Drop closes the open connections of session (every session when ""),
// those still in their handshake included: with a close frame of code, or
// when code is 0 by closing the TCP connection without one. It returns how
// many it dropped.
func (s *Server) Drop(session string, code websocket.StatusCode) int {
	var cause error = dropped{code}
	if code == 0 {
		cause = errAborted
	}
	s.mu.Lock()
	var victims []*conn
	for name, ss := range s.sessions {
		if session == "" || name == session {
			for _, c := range ss.open {
				victims = append(victims, c)
			}
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

// Session returns the stats of one session (zero for an unknown one).
func (s *Server) Session(name string) SessionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessions[name]; ss != nil {
		return s.statsLocked(ss, time.Now())
	}
	return SessionStats{}
}

// Ended reports whether every connection session had has ended and its
// record is final (EndedAt, ClientCode, LastSeq). Session(..).Open can be 0 a
// moment before, once the close frames went out.
func (s *Server) Ended(session string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[session]
	return ss == nil || ss.pending == 0
}

// Stats returns the per-session counters and every overlap.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Mode: s.mode, Rate: s.cfg.Rate, Sessions: make(map[string]SessionStats, len(s.sessions)),
		MaxConnAgeMs: s.maxAge.Milliseconds(), ShutdownNoticeMs: s.notice.Milliseconds(), RateLimited: s.rateLimited, AllowStandby: s.allowSB}
	if s.refuseAll {
		st.Refusing = append(st.Refusing, "*")
	}
	for k := range s.refuse {
		st.Refusing = append(st.Refusing, k)
	}
	sort.Strings(st.Refusing)
	now := time.Now()
	for k, ss := range s.sessions {
		st.Sessions[k] = s.statsLocked(ss, now)
	}
	for _, o := range s.overlaps {
		st.Overlaps = append(st.Overlaps, *o)
	}
	for _, o := range s.planned {
		st.PlannedOverlaps = append(st.PlannedOverlaps, *o)
	}
	for _, o := range s.standbys {
		st.StandbyOverlaps = append(st.StandbyOverlaps, *o)
	}
	for _, p := range s.poisons {
		st.Poisons = append(st.Poisons, *p)
	}
	return st
}

func (s *Server) statsLocked(ss *session, now time.Time) SessionStats {
	v := ss.stats
	v.Open = len(ss.open)
	if !ss.t0.IsZero() {
		v.Produced = int64(now.Sub(ss.t0).Seconds() * s.cfg.Rate)
	}
	return v
}

func (s *Server) sessionLocked(name string) *session {
	ss := s.sessions[name]
	if ss == nil {
		ss = &session{open: map[int64]*conn{}, planned: map[string]*Overlap{}}
		s.sessions[name] = ss
	}
	return ss
}

// seqDuration is how long the feed takes to produce n messages.
func (s *Server) seqDuration(n int64) time.Duration {
	return time.Duration(float64(n) / s.cfg.Rate * float64(time.Second))
}

func (s *Server) serveFeed(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	name := r.PathValue("session")
	if !sessionPattern.MatchString(name) {
		http.Error(w, "session: want [A-Za-z0-9._~-]{1,200}", http.StatusBadRequest)
		return
	}
	rec := ConnRecord{Session: name, Remote: r.RemoteAddr, RequestURI: r.RequestURI, Header: r.Header.Clone(), OpenedAt: now, ClientCode: -1,
		AuthDigest: AuthDigest(r.Header.Get("Authorization"))}
	if s.cfg.TenureHeader != "" {
		rec.Tenure = r.Header.Get(s.cfg.TenureHeader)
	}
	reason, by, status := "", "", 0
	for k, v := range s.cfg.RequireHeaders {
		if r.Header.Get(k) != v {
			reason, by, status = ReasonBadReq, "missing header "+k, http.StatusUnauthorized
		}
	}
	if v := r.URL.Query().Get(s.cfg.ResumeParam); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			reason, by, status = ReasonBadReq, "bad "+s.cfg.ResumeParam, http.StatusBadRequest
		} else {
			rec.From = n
		}
	}

	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	ss := s.sessionLocked(name)
	// The open connections of another (or no) tenure conflict with this
	// one; those of its own non-empty tenure are a planned overlap. An
	// admitted standby conflicts with nothing, nothing with it.
	rec.Standby = s.allowSB && IsStandbyTenure(rec.Tenure)
	var conflicting []*conn
	planned := false
	for _, o := range ss.open {
		switch {
		case rec.Standby || o.rec.Standby:
		case sameTenure(o.rec, rec):
			planned = true
		default:
			conflicting = append(conflicting, o)
		}
	}
	if reason == "" && len(conflicting) > 0 {
		ss.stats.Violations++
	}
	switch {
	case reason != "":
	case s.refuseAll || s.refuse[name]:
		reason, by, status = ReasonRefused, "control", http.StatusServiceUnavailable
	case s.mode == ModeRefuseNewer && len(conflicting) > 0:
		reason, by, status = ReasonRefused, string(ModeRefuseNewer), http.StatusConflict
	}
	if s.overLimitLocked(r, now) && reason == "" {
		reason, by, status = ReasonRefused, RefusedByConnRate, http.StatusTooManyRequests
	}
	s.nextID++
	rec.ID = s.nextID
	if reason != "" {
		rec.ClosedAt, rec.Reason, rec.RefusedBy = now, reason, by
		s.records = append(s.records, &conn{rec: rec})
		if reason == ReasonRefused {
			ss.stats.Refused++
		}
		s.mu.Unlock()
		s.notify(rec)
		http.Error(w, "feed refused the connection: "+by, status)
		return
	}
	if ss.t0.IsZero() {
		// A session first seen resuming at K (the feed restarted under a
		// running stream) has already produced K-1 messages.
		ss.t0 = now.Add(-s.seqDuration(max(rec.From-1, 0)))
	}
	start := s.statsLocked(ss, now).Produced + 1
	if rec.From > 0 {
		start = rec.From
	}
	t0 := ss.t0
	rec.FirstSeq, rec.LastSeq = start, start-1
	ctx, stop := context.WithCancelCause(context.Background())
	c := &conn{rec: rec, ctx: ctx, stop: stop, maxAge: s.maxAge, notice: s.notice}
	s.records = append(s.records, c)
	var older []*conn
	if s.mode == ModeKickOlder {
		older = conflicting
	}
	ss.open[rec.ID] = c
	ss.pending++
	ss.stats.Connections++
	ss.stats.Kicks += int64(len(older))
	if planned {
		ss.stats.PlannedOverlaps++
	}
	owners, standbys := openKinds(ss)
	if rec.Standby {
		ss.stats.StandbyConns++
	}
	ss.stats.MaxConcurrent = max(ss.stats.MaxConcurrent, owners)
	ss.stats.MaxStandby = max(ss.stats.MaxStandby, standbys)
	s.overlapsLocked(ss, name, now)
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer stop(nil)
	defer s.finish(c)
	for _, o := range older {
		o.stop(errKicked)
	}

	if s.beforeAccept != nil {
		s.beforeAccept(name)
	}
	ws, err := websocket.Accept(closeWatcher{ResponseWriter: w, closing: func() { s.closed(c, ReasonOpen) }}, r,
		&websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		s.closed(c, ReasonUpgrade)
		s.ended(c, -1)
		return
	}
	ws.SetReadLimit(64 << 10)
	s.pump(c, ws, t0, start)
}

// pump writes the session's messages to one connection until it ends, then
// closes it as its cause says and waits for its reader.
func (s *Server) pump(c *conn, ws *websocket.Conn, t0 time.Time, next int64) {
	read, readEnded := context.WithCancel(context.Background()) // done when the reader returned
	in := newInbox()
	go func() {
		defer readEnded()
		for {
			// Not c.ctx: cancelling a read aborts the connection without a
			// close frame. The reader ends with the connection.
			typ, data, err := ws.Read(context.Background())
			if err != nil {
				s.ended(c, websocket.CloseStatus(err))
				return
			}
			if typ == websocket.MessageText {
				in.got(data)
			}
		}
	}()
	pinged := make(chan struct{})
	go func() {
		defer close(pinged)
		s.keepalive(c, ws, read)
	}()
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		s.keepaliveRequests(c, ws, read, in)
	}()
	aged := make(chan struct{})
	go func() {
		defer close(aged)
		s.schedule(c, ws, read)
	}()
	if s.cfg.SubscribeWithin > 0 {
		next = s.awaitSubscribe(c, ws, read, in, next)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	buf := make([]byte, 0, 96+len(c.rec.Session)+s.cfg.PayloadBytes)
	pad := strings.Repeat("x", s.cfg.PayloadBytes)
	for {
		if wait := time.Until(t0.Add(s.seqDuration(next))); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-read.Done():
			case <-c.ctx.Done():
			}
		}
		if read.Err() != nil || c.ctx.Err() != nil {
			break
		}
		typ := websocket.MessageText
		// ts is when seq next was produced: the same bytes on every
		// connection of the session, as a source broadcasts one event to
		// all its subscribers (a standby aligns on them).
		ts := t0.Add(s.seqDuration(next)).UnixMilli()
		if kind := s.poisonOf(c.rec.Session, next); kind != PoisonOff {
			buf = appendPoisoned(buf[:0], kind, c.rec.Session, next, ts)
		} else {
			buf, typ = appendShaped(buf[:0], s.cfg.Shape, c.rec.Session, next, ts, pad, c.rec.AuthDigest)
		}
		wctx, cancel := context.WithTimeout(context.Background(), s.cfg.WriteTimeout)
		err := ws.Write(wctx, typ, buf)
		cancel()
		if err != nil {
			if read.Err() == nil {
				c.stop(errWriteFail)
			}
			break
		}
		s.sent(c, next)
		next++
	}
	var d dropped
	switch cause := context.Cause(c.ctx); {
	case cause == nil, errors.Is(cause, errAborted), errors.Is(cause, errPingLost):
		_ = ws.CloseNow() // nil: the client closed or went away
	case errors.Is(cause, errKicked):
		s.closeWS(ws, StatusKicked, "replaced by a newer connection")
	case errors.As(cause, &d):
		s.closeWS(ws, d.code, "dropped by feed control")
	case errors.Is(cause, errShutdown):
		s.closeWS(ws, websocket.StatusGoingAway, "feed shutting down")
	case errors.Is(cause, errNoSubscribe):
		s.closeWS(ws, websocket.StatusPolicyViolation, "no subscribe in time")
	case errors.Is(cause, errKeepaliveLost):
		s.closeWS(ws, websocket.StatusPolicyViolation, "keep-alive not answered")
	case errors.Is(cause, errMaxAge):
		s.closeWS(ws, websocket.StatusGoingAway, "connection reached its max age")
	default: // errWriteFail
		s.closeWS(ws, websocket.StatusPolicyViolation, "write timed out")
	}
	<-read.Done()
	c.stop(nil)
	<-pinged
	<-kept
	<-aged
}

// schedule ends c when it reaches its max age (ReasonMaxAge), when it has
// one, after sending it the shutdown notice that long before, when it has
// one. The pump goes on writing the stream meanwhile.
func (s *Server) schedule(c *conn, ws *websocket.Conn, read context.Context) {
	if c.maxAge <= 0 {
		return
	}
	wait := func(at time.Time) bool {
		t := time.NewTimer(time.Until(at))
		defer t.Stop()
		select {
		case <-c.ctx.Done():
			return false
		case <-read.Done():
			return false
		case <-t.C:
			return true
		}
	}
	if c.notice > 0 {
		if !wait(c.rec.OpenedAt.Add(c.maxAge - c.notice)) {
			return
		}
		now := time.Now()
		s.mu.Lock()
		c.rec.NoticeAt = now
		s.mu.Unlock()
		msg := `{"e":"` + ShutdownEvent + `","E":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`
		wctx, cancel := context.WithTimeout(context.Background(), s.cfg.WriteTimeout)
		err := ws.Write(wctx, websocket.MessageText, []byte(msg))
		cancel()
		if err != nil {
			return // the pump sees the connection end
		}
	}
	if wait(c.rec.OpenedAt.Add(c.maxAge)) {
		c.stop(errMaxAge)
	}
}

// keepalive pings ws every PingEvery (when > 0) until the connection ends,
// and stops it (ReasonPingLost) when a pong does not come within PingTimeout.
func (s *Server) keepalive(c *conn, ws *websocket.Conn, read context.Context) {
	if s.cfg.PingEvery <= 0 {
		return
	}
	t := time.NewTimer(s.cfg.PingEvery)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-read.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(c.ctx, s.cfg.PingTimeout)
		err := ws.Ping(pctx)
		timedOut := errors.Is(pctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil {
			if timedOut && read.Err() == nil {
				c.stop(errPingLost)
			}
			return
		}
		t.Reset(s.cfg.PingEvery)
	}
}

// closeWS starts a close handshake and, when the client does not finish it
// within CloseTimeout, closes the TCP connection.
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
	ss.stats.Head = max(ss.stats.Head, seq)
	s.mu.Unlock()
}

// closed ends c for the source, once: the server sent its close frame or
// the connection ended. reason is ReasonOpen to take it from c's cause.
func (s *Server) closed(c *conn, reason string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.rec.ClosedAt.IsZero() {
		return
	}
	if reason == ReasonOpen {
		reason = ReasonClient
		if cause := context.Cause(c.ctx); cause != nil {
			reason = cause.Error()
		}
	}
	c.rec.ClosedAt, c.rec.Reason = now, reason
	ss := s.sessions[c.rec.Session]
	delete(ss.open, c.rec.ID)
	s.overlapsLocked(ss, c.rec.Session, now)
}

// sameTenure reports whether a and b are connections of one non-empty
// tenure: their overlap is planned.
func sameTenure(a, b ConnRecord) bool { return a.Tenure != "" && a.Tenure == b.Tenure }

// overlapsLocked starts, extends and ends ss's overlaps after a connection
// opened or closed: the overlap of connections of different tenures (a
// connection without one is its own) and those of each tenure.
func (s *Server) overlapsLocked(ss *session, name string, now time.Time) {
	s.standbyOverlapLocked(ss, name, now)
	perTenure := map[string]int{}
	groups := 0
	for _, c := range ss.open {
		if c.rec.Standby {
			continue
		}
		if c.rec.Tenure == "" || perTenure[c.rec.Tenure] == 0 {
			groups++
		}
		if c.rec.Tenure != "" {
			perTenure[c.rec.Tenure]++
		}
	}
	switch {
	case groups > 1:
		if ss.overlap == nil {
			ss.overlap = &Overlap{Session: name, Start: now}
			s.overlaps = append(s.overlaps, ss.overlap)
		}
		ss.overlap.Max = max(ss.overlap.Max, len(ss.open))
	case ss.overlap != nil:
		ss.overlap.End = now
		ss.overlap = nil
	}
	for t, n := range perTenure {
		if n < 2 {
			continue
		}
		o := ss.planned[t]
		if o == nil {
			o = &Overlap{Session: name, Tenure: t, Start: now}
			ss.planned[t] = o
			s.planned = append(s.planned, o)
		}
		o.Max = max(o.Max, n)
	}
	for t, o := range ss.planned {
		if perTenure[t] < 2 {
			o.End = now
			delete(ss.planned, t)
		}
	}
}

// ended records that the server saw c's connection end, once.
func (s *Server) ended(c *conn, code websocket.StatusCode) {
	s.closed(c, ReasonOpen)
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.rec.EndedAt.IsZero() {
		c.rec.EndedAt, c.rec.ClientCode = time.Now(), int(code)
	}
}

// finish makes c's record final, once its handler is done with it.
func (s *Server) finish(c *conn) {
	s.mu.Lock()
	s.sessions[c.rec.Session].pending--
	rec := c.rec
	s.mu.Unlock()
	s.notify(rec)
}

func (s *Server) notify(rec ConnRecord) {
	if s.cfg.OnClose != nil {
		s.cfg.OnClose(rec)
	}
}

// appendMessage appends the feed's message for seq of session:
// {"seq":N,"session":S,"ts":MS[,"pad":"x..."][,"auth":D]}. session matches
// the session pattern and auth is AuthDigest's (no character JSON must
// escape).
func appendMessage(b []byte, session string, seq, nowMs int64, pad, auth string) []byte {
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
	if auth != "" {
		b = append(b, `,"auth":"`...)
		b = append(b, auth...)
		b = append(b, '"')
	}
	return append(b, '}')
}

// NoOverlap checks records of one session: it returns an error naming the
// first two accepted connections whose [OpenedAt, ClosedAt] intervals
// overlap (an open one lasts until now). Two connections of the same
// non-empty Tenure may overlap: that is a planned overlap, not an error; an
// admitted standby connection (ConnRecord.Standby) may overlap any.
func NoOverlap(recs []ConnRecord) error {
	end := func(r ConnRecord) time.Time {
		if r.ClosedAt.IsZero() {
			return time.Now()
		}
		return r.ClosedAt
	}
	for i, a := range recs {
		for _, b := range recs[i+1:] {
			if a.RefusedBy == "" && b.RefusedBy == "" && !a.Standby && !b.Standby && !sameTenure(a, b) && a.OpenedAt.Before(end(b)) && b.OpenedAt.Before(end(a)) {
				return fmt.Errorf("connections %d [%s, %s] and %d [%s, %s] of %s overlap", a.ID, a.OpenedAt.Format(time.StampMicro),
					end(a).Format(time.StampMicro), b.ID, b.OpenedAt.Format(time.StampMicro), end(b).Format(time.StampMicro), a.Session)
			}
		}
	}
	return nil
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
	// Accept reads brw.Reader's buffered bytes, then wc; it writes to the
	// writer: the server's own (empty after the hijack), pointed at wc, not
	// a second 4 KiB buffer per connection (the fleet simulator holds
	// 100,000 of them).
	brw.Writer.Reset(wc)
	return wc, brw, nil
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
