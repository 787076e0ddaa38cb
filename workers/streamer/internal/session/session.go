// Package session owns one WebSocket session held under a lease: dial with
// the stored headers, read with a reused buffer, parse and dedupe sequence
// numbers, deliver in order to the sink while the lease is valid, reconnect
// with backoff and resume, and close with the right status when the session
// ends.
//
// Goroutines: a session runs in exactly one goroutine (Run): it dials, reads
// and delivers. Nothing else blocks on its behalf. Events from outside
// (lease lost, stop, shutdown, new generation, ping failure) arrive through
// Interrupt and Tick, which close the socket (at once, or with a close
// handshake bounded by CloseGrace) so that the blocked read returns. Pings
// are scheduled centrally by Tick and each runs in a short-lived goroutine
// bounded by PingTimeout. Reconnects happen only after the previous
// connection is fully closed, so one session never holds two connections.
package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/source"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/jsonseq"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// Terminal reasons a session ends with (besides the lease's own errors:
// lease.ErrLeaseLost, ErrUntrusted, ErrWorkerDead, ErrStopped, …).
var (
	// ErrShutdown: the worker is shutting down gracefully (close 1001,
	// release, hand off).
	ErrShutdown = errors.New("worker shutting down")
	// ErrStopRequested: a stop notification was confirmed in the table
	// (close 1000, release).
	ErrStopRequested = errors.New("session stopped")
	// ErrCrashed: the worker is going away without releasing (tests play a
	// crash with it; also the end of a shutdown that ran out of time).
	ErrCrashed = errors.New("worker abandoned the session")
	// ErrSourceFailed: the source can never be connected (a permanent dial
	// error, or Config.MaxDialFailures failures in a row). The worker
	// records it (the session becomes FAILED) instead of releasing.
	ErrSourceFailed = errors.New("source cannot be connected")
	// ErrSinkRefused: the sink refused a message for good (a permanent
	// refusal, or a message too large for it) and the session's
	// on_sink_refusal is fail. The worker records it (the session becomes
	// FAILED, the reason its last_error) instead of releasing; nothing
	// acknowledged past the message is checkpointed.
	ErrSinkRefused = errors.New("sink refused a message for good")
	// ErrMoved: the worker hands the session to another one to rebalance
	// the fleet (close 1001, release reserved for the receiver); a MoveTo
	// names the receiver.
	ErrMoved = errors.New("session moved to another worker")
)

// MoveTo is the reason of a directed hand-off to worker To: a rebalancing
// move, or (Shutdown) the graceful shutdown's hand-off of the session.
type MoveTo struct {
	To       string
	Shutdown bool
}

func (m MoveTo) Error() string { return "session moved to " + m.To }

// Unwrap makes errors.Is(reason, ErrMoved) true, and errors.Is(reason,
// ErrShutdown) too for a shutdown's hand-off.
func (m MoveTo) Unwrap() []error {
	if m.Shutdown {
		return []error{ErrMoved, ErrShutdown}
	}
	return []error{ErrMoved}
}

// Reasons to reconnect (not terminal).
var (
	errGeneration = errors.New("session generation changed")
	errPing       = errors.New("ping timed out")
	errSink       = errors.New("sink refused a message")
)

// Config are the settings every session of a worker shares.
type Config struct {
	WorkerID    string
	DialTimeout time.Duration
	// PingEvery is the keepalive period (0 disables pings); a ping not
	// answered within PingTimeout drops the connection (then reconnect).
	PingEvery   time.Duration
	PingTimeout time.Duration
	// CloseGrace bounds a close handshake; the socket is closed at once
	// after it.
	CloseGrace time.Duration
	Backoff    backoff.Policy
	// StableAfter: a connection that lasted this long resets the backoff.
	StableAfter time.Duration
	// ReadLimit is the largest message accepted (bytes).
	ReadLimit int64
	// SinkAttempts is how many times one message is offered to the sink
	// before the session reconnects (or, for a permanent refusal, follows
	// its on_sink_refusal).
	SinkAttempts int
	// SinkTimeout bounds one Handle call of an unbatched sink; the call's
	// context also ends at the tenure's trust deadline, whichever is first.
	SinkTimeout time.Duration
	// MaxDialFailures: after this many failed dials in a row (transient
	// errors; a permanent one ends the session at once) the session ends
	// with ErrSourceFailed. 0: retry transient errors forever.
	MaxDialFailures int
}

// Validate checks c.
func (c *Config) Validate() error {
	switch {
	case c.WorkerID == "":
		return errors.New("session config: empty worker id")
	case c.DialTimeout <= 0 || c.CloseGrace <= 0:
		return errors.New("session config: DialTimeout and CloseGrace must be positive")
	case c.PingEvery < 0 || (c.PingEvery > 0 && c.PingTimeout <= 0):
		return errors.New("session config: PingEvery must not be negative, and pings need a positive PingTimeout")
	case c.ReadLimit < 1024:
		return errors.New("session config: ReadLimit must be at least 1024 bytes")
	case c.SinkAttempts < 1:
		return errors.New("session config: SinkAttempts must be at least 1")
	case c.SinkTimeout <= 0:
		return errors.New("session config: SinkTimeout must be positive")
	case c.MaxDialFailures < 0:
		return errors.New("session config: MaxDialFailures must not be negative")
	}
	return c.Backoff.Validate()
}

// Counters are the worker-wide counts every session adds to (read and reset
// by the metrics flush). Atomics, so the per-message path takes no lock.
type Counters struct {
	MessagesIn        atomic.Int64
	DuplicatesDropped atomic.Int64
	SinkErrors        atomic.Int64
	Reconnects        atomic.Int64
	// SeqMissingDropped counts the messages dropped for having no seq
	// (seq_mode field, on_missing_seq drop).
	SeqMissingDropped atomic.Int64
	// SinkStalls counts the times a pipelined sink made a session wait
	// for room in its buffer (the socket was not read meanwhile).
	SinkStalls atomic.Int64
	// SinkRefused counts the messages the sink refused for good;
	// SinkSkipped those of them passed (on_sink_refusal skip).
	SinkRefused atomic.Int64
	SinkSkipped atomic.Int64
}

// Env is what sessions share: sink, HTTP client, logger, counters and the
// hook for the first open of a session.
type Env struct {
	Config   *Config
	Handler  sink.Handler
	Client   *http.Client
	Log      zerolog.Logger
	Counters *Counters
	// Dials admits each dial per source host (nil: no limit).
	Dials *DialGate
	// Opened is called after every successful dial (first = the first of this
	// tenure). It must not block.
	Opened func(s *Session, first bool)
	// NoteError records a transient dial error in the table (the Keeper's
	// NoteError); optional. The session calls it at most once per
	// NoteErrorEvery, and only with a text that differs from the last one
	// recorded, so a flapping source does not write per attempt.
	NoteError func(ctx context.Context, h *lease.Held, reason string, at time.Time) error
}

// NoteErrorEvery is the least time between two NoteError calls of one session.
const NoteErrorEvery = time.Minute

// Session is one held session.
type Session struct {
	env     *Env
	held    *lease.Held
	log     zerolog.Logger
	claimed int64 // sent_at_ms of the notification that led to the claim; 0 if none
	since   time.Time
	// finished is closed by its owner (the worker) once the session's end
	// is written (released, handed off, failed).
	finished     chan struct{}
	finishedOnce sync.Once
	// ended is closed once a terminal reason is set (a Submit stalled on a
	// full sink buffer gives up).
	ended chan struct{}

	mu      sync.Mutex
	conn    *websocket.Conn
	raw     net.Conn
	connGen int64
	end     error // terminal reason, set once
	kick    error // reason to reconnect now
	pinging bool
	nextPin time.Time
	wake    chan struct{}
	// dialCancel aborts a dial in progress when the session ends.
	dialCancel context.CancelFunc
	// proto is the source protocol of the current connection (written by
	// attach under mu; the read goroutine, which attached it, reads it
	// without the lock).
	proto *proto
	// sub numbers the messages without a seq delivered since the last
	// sequenced one (on_missing_seq deliver; Run's goroutine only).
	sub int64
	// appPinging: an app ping is being sent; nextAppPing: when the next is due.
	appPinging  bool
	nextAppPing time.Time
	// skipRefused is the current connection's on_sink_refusal skip (read
	// by the sink's Refused, from another goroutine).
	skipRefused atomic.Bool

	lastSeq    atomic.Int64 // last delivered
	messages   atomic.Int64
	dups       atomic.Int64
	reconnects atomic.Int64
	gaps       atomic.Int64
	connected  atomic.Bool
	// lastRead is when the last message arrived (Unix ns; for idle_timeout).
	lastRead atomic.Int64
	// missingDropped counts messages dropped for having no seq; controls
	// the control messages answered (keep-alive requests, pongs).
	missingDropped atomic.Int64
	controls       atomic.Int64

	// lastErr is the last dial error (under mu); noted and notedAt the last
	// one recorded in the table (Run's goroutine only).
	lastErr DialFailure
	noted   string
	notedAt time.Time
}

// New returns a session for h. claimedAtMs is the sent_at_ms of the
// notification that triggered the claim (0 when it came from reconciliation).
func New(env *Env, h *lease.Held, claimedAtMs int64) *Session {
	it := h.Item()
	s := &Session{
		env: env, held: h, claimed: claimedAtMs, since: time.Now(),
		wake: make(chan struct{}, 1), finished: make(chan struct{}), ended: make(chan struct{}),
		log: env.Log.With().Str("connection_id", h.ID()).
			Int64("lease_epoch", h.Epoch()).Logger(),
	}
	s.lastSeq.Store(it.LastSeq)
	return s
}

// Held is the session's lease.
func (s *Session) Held() *lease.Held { return s.held }

// Finished is closed once MarkFinished was called.
func (s *Session) Finished() <-chan struct{} { return s.finished }

// MarkFinished records that the session's end is written (the worker calls
// it after its release, hand-off or failure; idempotent).
func (s *Session) MarkFinished() { s.finishedOnce.Do(func() { close(s.finished) }) }

// ID is the connection id.
func (s *Session) ID() string { return s.held.ID() }

// ClaimedAtMs is the sent_at_ms of the notification behind the claim (0: none).
func (s *Session) ClaimedAtMs() int64 { return s.claimed }

// Logger is the session's logger (connection_id, worker_id, lease_epoch).
func (s *Session) Logger() *zerolog.Logger { return &s.log }

// Status is a snapshot for /status.
type Status struct {
	ConnectionID string    `json:"connection_id"`
	Epoch        int64     `json:"lease_epoch"`
	Generation   int64     `json:"generation"`
	Since        time.Time `json:"since"`
	LastSeq      int64     `json:"last_seq"`
	Messages     int64     `json:"messages"`
	Duplicates   int64     `json:"duplicates_dropped"`
	Gaps         int64     `json:"gaps"`
	Reconnects   int64     `json:"reconnects"`
	// SeqMissingDropped: messages dropped for having no seq; Controls:
	// control messages answered and not delivered (keep-alive requests,
	// pongs).
	SeqMissingDropped int64  `json:"seq_missing_dropped"`
	Controls          int64  `json:"control_messages"`
	Connected         bool   `json:"connected"`
	URL               string `json:"ws_url"` // redacted
	// LastError is the last dial error (no URL, no header value).
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// Status returns a snapshot.
func (s *Session) Status() Status {
	it := s.held.Item()
	st := Status{
		ConnectionID: s.ID(), Epoch: s.held.Epoch(), Generation: it.Generation, Since: s.since,
		LastSeq: s.lastSeq.Load(), Messages: s.messages.Load(), Duplicates: s.dups.Load(), Gaps: s.gaps.Load(),
		Reconnects: s.reconnects.Load(), SeqMissingDropped: s.missingDropped.Load(), Controls: s.controls.Load(),
		Connected: s.connected.Load(), URL: Redact(it.WSURL),
	}
	if f := s.LastError(); f.Text != "" {
		st.LastError, st.LastErrorAt = f.Text, &f.At
	}
	return st
}

// DialFailure is a failed dial: the error's text (ErrorText), when, and the
// generation of the configuration dialed.
type DialFailure struct {
	Text       string
	At         time.Time
	Generation int64
}

// LastError is the last dial failure of this tenure (Text "" when every
// dial succeeded).
func (s *Session) LastError() DialFailure {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// LastSeq is the last delivered sequence number (lease.NoSeq: none).
func (s *Session) LastSeq() int64 { return s.lastSeq.Load() }

// graceful reports whether reason ends the connection with a close
// handshake (and which status), or at once.
func closeCodeFor(reason error) (websocket.StatusCode, bool) {
	switch {
	case errors.Is(reason, ErrShutdown), errors.Is(reason, ErrMoved):
		return websocket.StatusGoingAway, true
	case errors.Is(reason, ErrStopRequested), errors.Is(reason, lease.ErrStopped), errors.Is(reason, errGeneration):
		return websocket.StatusNormalClosure, true
	}
	return 0, false
}

// Interrupt ends the session with a terminal reason. A lease that is no
// longer ours (lost, untrusted, expired) or a crash closes the socket at
// once; shutdown (1001) and stop (1000) close it with a handshake bounded by
// CloseGrace. It never blocks; the first reason wins, but a later reason
// that must close at once still cuts a handshake short.
func (s *Session) Interrupt(reason error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, graceful := closeCodeFor(reason)
	if s.end != nil {
		if !graceful && s.raw != nil {
			_ = s.raw.Close()
		}
		return
	}
	s.end = reason
	close(s.ended)
	s.signalLocked()
	if s.dialCancel != nil {
		s.dialCancel()
	}
	if s.conn != nil {
		s.closeLocked(reason)
	}
}

// reconnect asks the session to drop its connection and dial again.
func (s *Session) reconnect(reason error, conn *websocket.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end != nil || s.conn != conn || s.conn == nil {
		return
	}
	s.kick = reason
	s.closeLocked(reason)
}

func (s *Session) signalLocked() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// closeLocked starts closing the current connection for reason.
func (s *Session) closeLocked(reason error) {
	conn, raw := s.conn, s.raw
	code, graceful := closeCodeFor(reason)
	if !graceful {
		hardClose(conn, raw)
		return
	}
	grace := s.env.Config.CloseGrace
	force := time.AfterFunc(grace, func() { hardClose(conn, raw) })
	go func() {
		_ = conn.Close(code, closeText(code))
		force.Stop()
	}()
}

func closeText(code websocket.StatusCode) string {
	if code == websocket.StatusGoingAway {
		return "worker shutting down"
	}
	return "session closed"
}

// hardClose closes the TCP connection under conn at once; the blocked read
// returns and the Conn tears itself down.
func hardClose(conn *websocket.Conn, raw net.Conn) {
	if raw != nil {
		_ = raw.Close()
		return
	}
	go conn.CloseNow()
}

func (s *Session) terminal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end
}

// Tick runs the session's periodic duties from the worker's control loop:
// it reconnects when the lease brought a new generation, ends the session
// when its lease ended, and starts a ping when one is due. It never blocks.
func (s *Session) Tick(now time.Time) {
	select {
	case <-s.held.Done():
		err := s.held.Err()
		if err == nil {
			err = lease.ErrReleased
		}
		s.Interrupt(err)
		return
	default:
	}
	s.mu.Lock()
	conn := s.conn
	if conn == nil || s.end != nil || s.kick != nil {
		s.mu.Unlock()
		return
	}
	// A mailbox re-read that brings a new generation signals Changed (buffered): a
	// lock-free length check, then the comparison. A signal that arrives
	// while no connection is attached stays pending until one is.
	if len(s.held.Changed()) > 0 {
		select {
		case <-s.held.Changed():
		default:
		}
		if s.held.Item().Generation != s.connGen {
			s.kick = errGeneration
			s.closeLocked(errGeneration)
			s.mu.Unlock()
			return
		}
	}
	p := s.proto
	if p.idle > 0 && now.UnixNano()-s.lastRead.Load() > int64(p.idle) {
		s.kick = errIdle
		s.closeLocked(errIdle)
		s.mu.Unlock()
		return
	}
	cfg := s.env.Config
	ping := cfg.PingEvery > 0 && !s.pinging && !now.Before(s.nextPin)
	if ping {
		s.pinging = true
		s.nextPin = now.Add(cfg.PingEvery)
	}
	appPing := p.pingEvery > 0 && !s.appPinging && !now.Before(s.nextAppPing)
	if appPing {
		s.appPinging = true
		s.nextAppPing = now.Add(p.pingEvery)
	}
	s.mu.Unlock()
	if ping {
		go s.ping(conn)
	}
	if appPing {
		msg := source.Render(p.pingMsg, s.vars(s.held.Item(), p))
		go s.appPing(conn, msg)
	}
}

func (s *Session) ping(conn *websocket.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), s.env.Config.PingTimeout)
	err := conn.Ping(ctx)
	cancel()
	s.mu.Lock()
	s.pinging = false
	s.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		s.log.Warn().Dur("timeout", s.env.Config.PingTimeout).Msg("no pong: reconnecting")
		s.reconnect(errPing, conn)
	}
}

// Run holds the session until a terminal reason, which it returns:
// ErrShutdown, ErrStopRequested, ErrCrashed, ErrSourceFailed (a permanent
// dial error, or MaxDialFailures in a row) or the lease's own error. ctx
// bounds sink calls and waits; cancelling it is a crash (the caller also
// interrupts). The caller releases the lease afterwards (or, after
// ErrSourceFailed, records the failure).
func (s *Session) Run(ctx context.Context) error {
	// Run's goroutine lives as long as the session and spends its life in
	// read: the frames under read stay small (the item, the dial and the
	// logging live in connect's and reconnectWait's frames, gone by then),
	// so that the per-message path fits the goroutine's 4 KiB stack.
	st := runState{first: true}
	for {
		conn, raw, openErr, stop, ret := s.connect(ctx, &st)
		if stop {
			return ret
		}
		if conn == nil {
			continue // the dial failed: backed off, dial again
		}
		readErr := openErr
		if readErr == nil {
			readErr = s.read(ctx, conn)
		}
		kick := s.detach(conn, raw)
		if term := s.reconnectWait(ctx, &st, readErr, kick); term != nil {
			return term
		}
	}
}

// runState is Run's bookkeeping across connections.
type runState struct {
	attempt  int
	failures int // dials of failGen failed in a row
	failGen  int64
	first    bool      // no connection opened yet in this tenure
	opened   time.Time // when the current connection was attached
}

// connect dials the item's source, attaches the connection and sends the
// open messages (openErr: they failed; the connection is attached all the
// same, for Run to detach). stop: Run returns ret. A nil conn without stop:
// the dial failed and the session has backed off; dial again.
func (s *Session) connect(ctx context.Context, st *runState) (conn *websocket.Conn, raw net.Conn, openErr error, stop bool, ret error) {
	if err := s.check(ctx); err != nil {
		return nil, nil, nil, true, err
	}
	it := s.held.Item()
	p, perr := compile(it)
	if perr != nil {
		s.Interrupt(fmt.Errorf("%w: %v", ErrSourceFailed, perr))
		return nil, nil, nil, true, s.terminal()
	}
	conn, raw, err := s.dial(ctx, it, p)
	if err != nil {
		if term := s.check(ctx); term != nil {
			return nil, nil, nil, true, term
		}
		if it.Generation != st.failGen {
			st.failures, st.failGen = 0, it.Generation // a new configuration gets all its tries
		}
		st.failures++
		if term := s.dialFailed(ctx, err, it.Generation, st.failures); term != nil {
			return nil, nil, nil, true, term
		}
		d := s.env.Config.Backoff.Next(st.attempt)
		ev := s.log.Warn()
		if st.attempt > 0 {
			ev = s.log.Debug()
		}
		ev.Err(err).Int("attempt", st.attempt+1).Dur("retry_in", d).Msg("dial")
		st.attempt++
		s.sleep(ctx, d)
		return nil, nil, nil, false, nil
	}
	st.failures = 0
	if !s.attach(conn, raw, it, p) {
		return nil, nil, nil, true, s.check(ctx)
	}
	if s.env.Opened != nil {
		s.env.Opened(s, st.first)
	}
	if st.first {
		s.log.Info().Str("ws_url", Redact(it.WSURL)).Int64("resume_after", s.lastSeq.Load()).Msg("session open")
	} else {
		s.log.Debug().Str("ws_url", Redact(it.WSURL)).Int64("resume_after", s.lastSeq.Load()).Msg("reconnected")
	}
	st.first = false
	st.opened = time.Now()
	return conn, raw, s.open(conn, it, p), false, nil
}

// reconnectWait follows a connection that ended (readErr, and kick: the
// reconnect reason set, if any): the terminal reason if the session must
// end, otherwise nil once the backoff before the next dial has passed (none
// for a new generation).
func (s *Session) reconnectWait(ctx context.Context, st *runState, readErr, kick error) error {
	if term := s.check(ctx); term != nil {
		return term
	}
	s.reconnects.Add(1)
	s.env.Counters.Reconnects.Add(1)
	if time.Since(st.opened) >= s.env.Config.StableAfter {
		st.attempt = 0
	}
	if errors.Is(kick, errGeneration) {
		s.log.Info().Msg("new generation: reconnecting")
		st.attempt = 0
		return nil
	}
	d := s.env.Config.Backoff.Next(st.attempt)
	st.attempt++
	s.log.Info().Str("cause", describe(readErr, kick)).Dur("retry_in", d).Msg("connection ended: reconnecting")
	s.sleep(ctx, d)
	return nil
}

// dialFailed keeps err as the session's last error and decides: a
// terminal ErrSourceFailed after a permanent error or too many failures in a
// row; otherwise nil, after recording the error in the table when it is new
// and the last record is old enough.
func (s *Session) dialFailed(ctx context.Context, err error, gen int64, failures int) error {
	text, now := ErrorText(err), time.Now()
	s.mu.Lock()
	s.lastErr = DialFailure{Text: text, At: now, Generation: gen}
	s.mu.Unlock()
	limit := s.env.Config.MaxDialFailures
	switch {
	case Permanent(err):
		s.Interrupt(fmt.Errorf("%w: %s", ErrSourceFailed, text))
		return s.terminal()
	case limit > 0 && failures >= limit:
		s.Interrupt(fmt.Errorf("%w: %d dials failed in a row, the last: %s", ErrSourceFailed, failures, text))
		return s.terminal()
	}
	if s.env.NoteError != nil && ShouldNote(text, s.noted, s.notedAt, now) {
		s.noted, s.notedAt = text, now
		if nerr := s.env.NoteError(ctx, s.held, text, now); nerr != nil {
			s.log.Debug().Err(nerr).Msg("record last error")
		}
	}
	return nil
}

// ShouldNote reports whether a transient error text seen at now is recorded
// in the table, given the last recorded one (noted at notedAt; zero: none):
// only a different text, and at most once per NoteErrorEvery.
func ShouldNote(text, noted string, notedAt, now time.Time) bool {
	return text != noted && (notedAt.IsZero() || now.Sub(notedAt) >= NoteErrorEvery)
}

// HandshakeStatusError is a handshake the source answered with an HTTP
// status other than 101 (redirects are ErrRedirected).
type HandshakeStatusError struct{ Code int }

func (e *HandshakeStatusError) Error() string {
	return "handshake refused: HTTP " + strconv.Itoa(e.Code)
}

// Permanent reports whether a dial error can never go away by retrying the
// same configuration: an address refused by policy, a redirect that is not
// followed (the session does not opt in, or the hop is beyond its
// follow_redirects or outside the allowlist), or a handshake answered 401,
// 403, 404 or 410. Everything else (timeouts, TLS, 5xx, a refused
// connection, …) is transient.
func Permanent(err error) bool {
	if errors.Is(err, netguard.ErrRefused) || errors.Is(err, ErrRedirected) || errors.Is(err, ErrRedirectRefused) {
		return true
	}
	var hs *HandshakeStatusError
	if errors.As(err, &hs) {
		switch hs.Code {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone:
			return true
		}
	}
	return false
}

// MaxErrorText bounds the error text a session keeps and records.
const MaxErrorText = 256

// ErrorText is the text of a dial error as the session records it: without
// the URL the dial error names, at most MaxErrorText bytes.
func ErrorText(err error) string {
	var de *dialError
	if errors.As(err, &de) {
		err = de.cause
	}
	text := err.Error()
	if len(text) > MaxErrorText {
		text = strings.ToValidUTF8(text[:MaxErrorText], "")
	}
	return text
}

// dialError is a failed dial: the (redacted) target and why.
type dialError struct {
	target string
	cause  error
}

func (e *dialError) Error() string { return "dial " + e.target + ": " + e.cause.Error() }
func (e *dialError) Unwrap() error { return e.cause }

func describe(readErr, kick error) string {
	if kick != nil {
		return kick.Error()
	}
	if code := websocket.CloseStatus(readErr); code != -1 {
		return "source closed with status " + strconv.Itoa(int(code))
	}
	if readErr == nil {
		return "unknown"
	}
	return readErr.Error()
}

// check returns the terminal reason, if any.
func (s *Session) check(ctx context.Context) error {
	if err := s.terminal(); err != nil {
		return err
	}
	select {
	case <-s.held.Done():
		err := s.held.Err()
		if err == nil {
			err = lease.ErrReleased
		}
		s.Interrupt(err)
		return s.terminal()
	default:
	}
	if ctx.Err() != nil {
		s.Interrupt(ErrCrashed)
		return s.terminal()
	}
	return nil
}

// sleep waits d, or less when the session must act (terminal reason, new
// generation).
func (s *Session) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.wake:
	case <-s.held.Done():
	case <-s.held.Changed():
	case <-ctx.Done():
	}
}

// attach makes conn the session's connection unless the session already
// ended, in which case it closes conn (per the reason) and waits for it.
func (s *Session) attach(conn *websocket.Conn, raw net.Conn, it lease.Item, p *proto) bool {
	s.touch()
	s.mu.Lock()
	s.conn, s.raw, s.connGen, s.kick, s.proto = conn, raw, it.Generation, nil, p
	cfg := s.env.Config
	now := time.Now()
	s.nextPin = now.Add(time.Duration(float64(cfg.PingEvery) * (0.5 + rand.Float64()/2)))
	s.nextAppPing = now.Add(p.pingEvery)
	s.skipRefused.Store(p.skipRefused)
	if s.end != nil {
		s.closeLocked(s.end)
		s.mu.Unlock()
		s.detach(conn, raw)
		return false
	}
	s.mu.Unlock()
	s.connected.Store(true)
	return true
}

// detach waits until conn is fully closed and forgets it; it returns the
// reconnect reason that was set, if any.
func (s *Session) detach(conn *websocket.Conn, raw net.Conn) error {
	// CloseNow waits for a close handshake in progress (bounded by
	// CloseGrace, after which the socket is closed under it).
	_ = conn.CloseNow()
	if raw != nil {
		_ = raw.Close()
	}
	s.connected.Store(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	kick := s.kick
	s.conn, s.raw, s.kick = nil, nil, nil
	return kick
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const maxPooledBuf = 64 << 10

// read reads and delivers messages until the connection ends or the session
// must stop delivering.
func (s *Session) read(ctx context.Context, conn *websocket.Conn) error {
	// The read is bounded by closing the socket, never by a context: a
	// context with a deadline would arm a timer on every read.
	rctx := context.Background()
	for {
		typ, r, err := conn.Reader(rctx)
		if err != nil {
			return err
		}
		bp := bufPool.Get().(*[]byte)
		buf, err := readAll(r, (*bp)[:0])
		if err == nil {
			err = s.handle(ctx, conn, typ, buf)
		}
		if cap(buf) <= maxPooledBuf {
			*bp = buf[:0]
			bufPool.Put(bp)
		}
		if err != nil {
			return err
		}
	}
}

func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// errInvalid stops the read loop when the lease is no longer valid.
var errInvalid = errors.New("lease no longer valid")

// handle answers control messages, then finds (or assigns) the message's
// seq, dedupes and delivers it. It runs under read for every message: the
// rare paths (control messages, logging, sink refusals) are calls of their
// own, so that this frame and offer's stay small (see Run).
func (s *Session) handle(ctx context.Context, conn *websocket.Conn, typ websocket.MessageType, data []byte) error {
	p := s.proto // written by attach, in this same goroutine
	if p.idle > 0 {
		s.touch()
	}
	if p.pong != nil || p.keep != nil {
		if consumed, err := s.handleControl(conn, p, typ, data); err != nil || consumed {
			return err
		}
	}
	last := s.lastSeq.Load()
	if p.none {
		// The worker's own numbering: above every seq of earlier tenures
		// (whose epochs are lower), even those delivered after the last
		// checkpoint before a crash.
		return s.offer(ctx, conn, typ, data, max(last+1, (s.held.Epoch()-1)<<32+1), true)
	}
	seq, err := jsonseq.FindPath(data, p.seqPath)
	if err != nil {
		if p.deliverMissing {
			return s.offer(ctx, conn, typ, data, last, false)
		}
		s.dropMissing(p, err)
		return nil
	}
	if seq <= last {
		s.dups.Add(1)
		s.env.Counters.DuplicatesDropped.Add(1)
		return nil
	}
	if last != lease.NoSeq && seq > last+1 {
		s.noteGap(last, seq)
	}
	return s.offer(ctx, conn, typ, data, seq, true)
}

// handleControl answers a control message (control) and reconnects when
// the answer could not be sent.
func (s *Session) handleControl(conn *websocket.Conn, p *proto, typ websocket.MessageType, data []byte) (consumed bool, err error) {
	consumed, err = s.control(conn, s.held.Item(), p, typ, data)
	if err != nil {
		s.reconnect(err, conn)
	}
	return consumed, err
}

// dropMissing counts (and now and then logs) a message dropped for having
// no seq.
func (s *Session) dropMissing(p *proto, err error) {
	s.missingDropped.Add(1)
	if s.env.Counters.SeqMissingDropped.Add(1)%1000 == 1 {
		s.log.Warn().Err(err).Strs("seq_path", p.seqPath).Msg("message without a sequence number dropped")
	}
}

// noteGap counts a seq the source skipped to.
func (s *Session) noteGap(last, seq int64) {
	s.gaps.Add(1)
	s.log.Debug().Int64("after", last).Int64("seq", seq).Msg("source skipped sequence numbers")
}

// offer hands one message to the sink while the lease is valid, retrying a
// refusal; advance: seq is the session's new last delivered seq (false for
// a message without one, delivered with the last seq and the next sub). A
// Pipeline sink queues it (the session checkpoints it once Acked), any
// other Handler accepts it synchronously.
func (s *Session) offer(ctx context.Context, conn *websocket.Conn, typ websocket.MessageType, data []byte, seq int64, advance bool) error {
	msg := sink.Message{
		ConnectionID: s.ID(), Seq: seq, LeaseEpoch: s.held.Epoch(), WorkerID: s.env.Config.WorkerID,
		ReceivedAtMs: time.Now().UnixMilli(), Data: data, Binary: typ == websocket.MessageBinary,
	}
	if !advance {
		s.sub++
		msg.Sub = s.sub
	}
	pl, pipelined := s.env.Handler.(sink.Pipeline)
	for attempt := 1; ; attempt++ {
		// The lease's monotonic deadline, checked right before every
		// delivery (start first: start + rem is then never after it).
		start := time.Now()
		rem := s.held.Remaining()
		if rem <= 0 {
			return s.invalid()
		}
		var err error
		if pipelined {
			err = pl.Submit(ctx, msg, s, s.ended)
		} else {
			err = s.handleWithin(ctx, msg, start.Add(min(rem, s.env.Config.SinkTimeout)))
		}
		if err == nil {
			break
		}
		if sink.IsPermanent(err) && (pipelined || attempt >= s.env.Config.SinkAttempts) {
			// Sending it again cannot help: the session's policy decides.
			if !s.Refused(seq, msg.Sub, err) {
				return ErrSinkRefused
			}
			// Skipped: a pipeline acknowledges the later messages past it;
			// a synchronous sink took everything before it.
			break
		}
		if err := s.refused(ctx, conn, err, seq, attempt); err != nil {
			return err
		}
	}
	if advance {
		if !pipelined {
			s.held.Observe(seq) // a pipeline acknowledges later (Acked)
		}
		s.lastSeq.Store(seq)
		s.sub = 0
	}
	s.messages.Add(1)
	s.env.Counters.MessagesIn.Add(1)
	return nil
}

// handleWithin calls the unbatched sink with a context that ends at
// deadline: by the tenure's trust deadline and within SinkTimeout, so that
// no call of this tenure is in flight once another worker may own the
// session.
func (s *Session) handleWithin(ctx context.Context, msg sink.Message, deadline time.Time) error {
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return s.env.Handler.Handle(hctx, msg)
}

// invalid ends the session whose lease is no longer valid (errInvalid
// stops the read loop).
func (s *Session) invalid() error {
	err := s.held.Err()
	if err == nil {
		err = lease.ErrUntrusted
	}
	s.Interrupt(err)
	return errInvalid
}

// refused follows a sink's refusal of attempt: nil after a pause before
// the next attempt; errInvalid when the pipeline ended the tenure; errSink
// (the connection is closed, to resume after the last accepted seq) when
// the attempts are spent or the session is ending.
func (s *Session) refused(ctx context.Context, conn *websocket.Conn, err error, seq int64, attempt int) error {
	if errors.Is(err, sink.ErrTenureEnded) {
		s.Interrupt(lease.ErrUntrusted)
		return errInvalid
	}
	s.env.Counters.SinkErrors.Add(1)
	if attempt >= s.env.Config.SinkAttempts || ctx.Err() != nil || s.terminal() != nil {
		s.log.Error().Err(err).Int64("seq", seq).Int("attempts", attempt).Msg("sink refused the message: reconnecting to resume after the last accepted one")
		s.reconnect(errSink, conn)
		return errSink
	}
	t := time.NewTimer(time.Duration(attempt) * 50 * time.Millisecond)
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	return nil
}

// Remaining is how long the session may still deliver (sink.Tenure).
func (s *Session) Remaining() time.Duration { return s.held.Remaining() }

// Refused follows the sink's permanent refusal of the message at (seq, sub)
// (sink.Tenure, and the unbatched path): under on_sink_refusal skip it
// counts and logs the message and returns true; otherwise it ends the
// session with ErrSinkRefused (the worker records it as FAILED) and returns
// false.
func (s *Session) Refused(seq, sub int64, err error) bool {
	s.env.Counters.SinkRefused.Add(1)
	if s.skipRefused.Load() {
		s.env.Counters.SinkSkipped.Add(1)
		ev := s.log.Warn().Err(err).Int64("seq", seq)
		if sub > 0 {
			ev = ev.Int64("sub", sub)
		}
		ev.Msg("sink refused the message permanently: skipped")
		return true
	}
	s.Interrupt(fmt.Errorf("%w: seq %d: %s", ErrSinkRefused, seq, ErrorText(err)))
	return false
}

// Acked records that the sink acknowledged every message up to seq
// (sink.Tenure): the next checkpoint may pass it.
func (s *Session) Acked(seq int64) { s.held.Observe(seq) }

// Stalled counts a wait for room in the sink's buffer (sink.Tenure).
func (s *Session) Stalled() { s.env.Counters.SinkStalls.Add(1) }

// dial connects to the item's URL (with the resume parameter) and headers.
func (s *Session) dial(ctx context.Context, it lease.Item, p *proto) (*websocket.Conn, net.Conn, error) {
	param := it.ResumeParam
	if p.none {
		param = "" // the worker's numbering means nothing to the source
	}
	target, err := ResumeURL(it.WSURL, param, s.lastSeq.Load(), p.resumeLast)
	if err != nil {
		return nil, nil, err
	}
	hdr := make(http.Header, len(it.Headers))
	for k, v := range it.Headers {
		hdr.Set(k, v)
	}
	// pctx ends the admission wait and the dial when the session ends.
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	s.mu.Lock()
	if s.end != nil {
		s.mu.Unlock()
		return nil, nil, s.end
	}
	s.dialCancel = pcancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.dialCancel = nil
		s.mu.Unlock()
	}()
	if u, err := url.Parse(target); err == nil {
		if err := s.env.Dials.Wait(pctx, u.Hostname()); err != nil {
			return nil, nil, fmt.Errorf("dial admission for %s: %w", u.Hostname(), err)
		}
	}
	slot := &rawSlot{}
	dctx, cancel := context.WithTimeout(withRedirectLimit(context.WithValue(pctx, rawSlotKey{}, slot), it.FollowRedirects), s.env.Config.DialTimeout)
	defer cancel()
	// The handshake runs in a short-lived goroutine (bounded by dctx): its
	// deep net/http call chain then never grows the stack of the session's
	// long-lived goroutine, which only reads (about 4 KiB per session saved).
	type result struct {
		conn *websocket.Conn
		resp *http.Response
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		conn, resp, err := websocket.Dial(dctx, target, &websocket.DialOptions{
			HTTPClient:      s.env.Client,
			HTTPHeader:      hdr,
			Subprotocols:    it.Subprotocols,
			CompressionMode: websocket.CompressionDisabled,
		})
		ch <- result{conn, resp, err}
	}()
	r := <-ch
	conn, resp, err := r.conn, r.resp, r.err
	if err != nil {
		slot.close()
		return nil, nil, &dialError{target: Redact(target), cause: dialCause(err, resp)}
	}
	conn.SetReadLimit(s.env.Config.ReadLimit)
	return conn, slot.get(), nil
}

// dialCause strips the URL (which may carry credentials in its query) from
// a dial error.
func dialCause(err error, resp *http.Response) error {
	if errors.Is(err, ErrRedirectRefused) {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err
		}
		return err
	}
	if resp != nil && resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return fmt.Errorf("%w (HTTP %d)", ErrRedirected, resp.StatusCode)
	}
	if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
		return &HandshakeStatusError{Code: resp.StatusCode}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// ResumeURL adds (or replaces) param=last+1 (param=last when inclusive) in
// raw's query when param is set and a sequence number was delivered; other
// parameters keep their order.
func ResumeURL(raw, param string, last int64, inclusive bool) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("parse ws_url %s: %w", Redact(raw), errors.Unwrap(err))
	}
	if param == "" || last == lease.NoSeq {
		return raw, nil
	}
	var kept []string
	if u.RawQuery != "" {
		for _, kv := range strings.Split(u.RawQuery, "&") {
			k, _, _ := strings.Cut(kv, "=")
			if uk, err := url.QueryUnescape(k); err == nil && uk == param {
				continue
			}
			kept = append(kept, kv)
		}
	}
	from := last + 1
	if inclusive {
		from = last
	}
	kept = append(kept, url.QueryEscape(param)+"="+strconv.FormatInt(from, 10))
	u.RawQuery = strings.Join(kept, "&")
	return u.String(), nil
}

// Redact returns raw without credentials: no userinfo, and the query (which
// often carries tokens) replaced by "?REDACTED".
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable url)"
	}
	u.User = nil
	q := u.RawQuery != "" || u.ForceQuery
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	out := u.String()
	if q {
		out += "?REDACTED"
	}
	return out
}
