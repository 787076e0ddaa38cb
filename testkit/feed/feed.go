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
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// PathPrefix is where sessions live: PathPrefix + <session>.
const PathPrefix = "/feed/"

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

func (s *Server) sessionLocked(name string) *session {
	ss := s.sessions[name]
	if ss == nil {
		ss = &session{open: map[int64]*conn{}, planned: map[string]*Overlap{}}
		s.sessions[name] = ss
	}
	return ss
}
