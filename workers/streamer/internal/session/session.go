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
//
// A standby (standby.go) is a second, non-delivering connection to the
// source of a session another worker owns; a session made by NewAdopting
// (adopt.go) starts from a standby's connection and window instead of a
// dial.
package session

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/draw"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/secrets"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// Config are the settings every session of a worker shares.
type Config struct {
	WorkerID string
	// DialTimeout is every dial's deadline (dialtimeout.go, the one timeout
	// authority of a dial), at most MaxDialTimeout.
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
	// TenureHeader, when set, is a handshake header every dial carries
	// with the tenure, "<worker id>/<lease epoch>" (the local feed and
	// chaos tell a planned reconnect's two connections from two owners by
	// it). "": none.
	TenureHeader string
	// MaxDialFailures: after this many failed connects in a row (transient
	// errors; a permanent one ends the session at once) the session ends
	// with ErrSourceFailed. 0: retry transient errors forever. A connect
	// fails unless its connection gets the source's first message: a
	// failed handshake, refused open messages, an unmet wait_for or a
	// close before any message all count; only a message resets the count.
	MaxDialFailures int
	// SecretHosts binds each secret to the hosts its value may be sent to
	// (shared/secretref.Bindings; the zero value: none). A dial sends a
	// reference's value only to a bound host: the headers' to the ws_url's
	// (checked before any value is asked for; a redirect to another
	// origin drops them), the open messages' to the host the handshake
	// ended on, after redirects, and never after a redirect to another
	// origin.
	SecretHosts secretref.Bindings
}

// Validate checks c.
func (c *Config) Validate() error {
	switch {
	case c.WorkerID == "":
		return errors.New("session config: empty worker id")
	case c.DialTimeout <= 0 || c.CloseGrace <= 0:
		return errors.New("session config: DialTimeout and CloseGrace must be positive")
	case c.DialTimeout > MaxDialTimeout:
		return fmt.Errorf("session config: DialTimeout %s must be at most %s (the HTTP client's ceilings)", c.DialTimeout, MaxDialTimeout)
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
	// Planned reconnects (make-before-break): switches done, attempts
	// given up, messages both connections carried (dropped as overlap),
	// and the dark time the switches saved (ms: each new connection's dial,
	// open and catch-up, which a reconnect after the close would have spent
	// dark).
	PlannedReconnects atomic.Int64
	PlannedFailed     atomic.Int64
	SwitchOverlap     atomic.Int64
	GapSavedMs        atomic.Int64
	// LargeFrameWaits counts the messages larger than
	// schema.SmallFrameAllowance whose read waited for the worker's
	// large-frame budget (FrameBudget; the socket was not read meanwhile).
	LargeFrameWaits atomic.Int64
}

// Env is what sessions share: sink, HTTP client, logger, counters and the
// hook for the first open of a session.
type Env struct {
	Config  *Config
	Handler sink.Handler
	Client  *http.Client
	// Dial opens the sessions' connections (nil: coder/websocket's
	// handshake through Client).
	Dial     Dialer
	Log      zerolog.Logger
	Counters *Counters
	// Dials admits each dial per source host (nil: no limit).
	Dials *DialGate
	// Handshakes bounds the dials running at once, over every host and to
	// one host (nil: no bound). A dial waits for it after Dials, before its
	// timeout starts.
	Handshakes *Handshakes
	// Switch bounds what planned reconnects' new connections hold before
	// their switch, over every session (nil: each at most MaxSwitchBytes).
	Switch *SwitchBudget
	// Frames bounds the large messages being read, over every session
	// (nil: each up to the read limit, unbounded together).
	Frames *FrameBudget
	// Secrets resolves the secret references of the headers and open
	// messages at every dial (nil: a reference fails its dial, for good).
	Secrets secrets.Provider
	// Opened is called after every successful dial (first = the first of this
	// tenure). It must not block.
	Opened func(s *Session, first bool)
	// NoteError records a transient dial error in the table (the Keeper's
	// NoteError); optional. The session calls it at most once per
	// NoteErrorEvery, and only with a text that differs from the last one
	// recorded, so a flapping source does not write per attempt.
	NoteError func(ctx context.Context, h *lease.Held, gen int64, reason string, at time.Time) error
	// Anchor writes the first checkpoint of a session that has none before
	// its first delivery (the Keeper's Anchor; anchor.go); nil: none is
	// written (the first checkpoint follows the first acknowledgement).
	Anchor func(ctx context.Context, h *lease.Held, seq int64) error
	// Schedule counts the sessions' pokes for the control loop (nil: a
	// loop that reads every session's Due each pass).
	Schedule *Schedule
	// Standbys bounds what the worker's standbys keep in their windows,
	// over every standby (nil: each at most its Window.MaxBytes). A
	// message that does not fit evicts its standby's oldest first.
	Standbys *SwitchBudget
	// Rand is the worker's randomness: each tenure draws its jitters (first
	// ping, planned reconnect, the dial gate's extra wait) and back-off
	// delays from a stream of its own, Rand.Stream("session/<id>/<epoch>"),
	// so that its draws do not depend on other sessions'. nil: the global
	// source (the shipped worker).
	Rand *draw.Source
}

// NoteErrorEvery is the least time between two NoteError calls of one session.
const NoteErrorEvery = time.Minute

// Session is one held session.
type Session struct {
	env *Env
	// rnd is the tenure's stream of draws (env.Rand's; nil: the global source).
	rnd *draw.Stream
	// closers are the goroutines closing a connection (the close
	// handshake, its grace timer, a hard close): Run waits for them, so
	// that nothing of the session outlives it.
	closers sync.WaitGroup
	held    *lease.Held
	claimed int64 // sent_at_ms of the notification that led to the claim; 0 if none
	since   int64 // when it was made (Unix ns, for Status: a time.Time is 16 B more)
	// finished is closed by its owner (the worker) once the session's end
	// is written (released, handed off, failed); made when first waited on
	// (Finished), since most sessions never are (a channel is 112 B of every
	// session's heap); finishedSet: MarkFinished was called (both under
	// mu).
	finished    chan struct{}
	finishedSet bool
	// skipRefused is the current connection's on_sink_refusal skip (read
	// by the sink's Refused, from another goroutine).
	skipRefused atomic.Bool
	// ended is closed once a terminal reason is set: a Submit stalled on a
	// full sink buffer gives up, and a back-off's sleep ends (the one
	// signal of that event: a second channel, a wake-up, carried it to the
	// sleep, 112 B of every session's heap).
	ended chan struct{}

	mu      sync.Mutex
	conn    Conn
	connGen int64
	end     error // terminal reason, set once
	kick    error // reason to reconnect now
	nextPin time.Time
	// pingSeen is the activity Tick saw last, activeAt when it last
	// changed: a ping is sent only after a ping interval without any
	// (under mu).
	pingSeen int64
	activeAt time.Time
	// dialCancel aborts a dial or an anchor (anchor.go) in progress when
	// the session ends: both run on Run's goroutine, one at a time.
	dialCancel context.CancelFunc
	// next is the planned reconnect under way (nil: none); planAt is when
	// the current connection starts one (max_connection_age; zero: never),
	// retryAt the earliest a new one may start after failedPlans attempts
	// in a row were given up.
	next        *successor
	planAt      time.Time
	retryAt     time.Time
	failedPlans int
	// proto is the source protocol of the current connection (written by
	// attach under mu; the read goroutine, which attached it, reads it
	// without the lock).
	proto *proto
	// sub numbers the messages without a seq delivered since the last
	// sequenced one (on_missing_seq deliver; Run's goroutine only).
	sub int64
	// nextAppPing: when the next app ping is due.
	nextAppPing time.Time

	// due is when the control loop next runs Tick (Unix ns; 0: at its
	// next pass; see Due).
	due atomic.Int64

	lastSeq    atomic.Int64 // last delivered
	messages   atomic.Int64
	dups       atomic.Int64
	reconnects atomic.Int64
	gaps       atomic.Int64
	// Planned reconnects: switched, given up, the messages both
	// connections carried (dropped), and the dark time they saved (ms).
	planned       atomic.Int64
	plannedFailed atomic.Int64
	overlapped    atomic.Int64
	gapSaved      atomic.Int64
	connected     atomic.Bool
	// The flags, beside connected so that they share its word (the
	// struct fits the 448-byte size class: TestSessionSize). pinging: a
	// ping is being sent; appPinging: an app ping is (both under mu).
	// reached: the current connection got its first message of the
	// stream (delivered, or a duplicate dropped): its connect succeeded
	// (Run's goroutine only).
	pinging    bool
	appPinging bool
	reached    bool
	// lastRead is when the last message arrived (Unix ns; for idle_timeout).
	lastRead atomic.Int64
	// missingDropped counts messages dropped for having no seq; controls
	// the control messages answered (keep-alive requests, pongs).
	missingDropped atomic.Int64
	controls       atomic.Int64

	// fails records the failed connects (under mu: a planned reconnect's
	// goroutine records its failures too); nil until the first, as most
	// sessions never fail one (the record is 88 B: TestSessionSize).
	fails *connectFailures

	// ext is what only some sessions need (nil for the others, which pay
	// one pointer): the standby a session adopts or dials for, and the
	// fingerprint of the last message delivered (standby.go, adopt.go).
	ext *sessionExt
}

// Option changes a session New (or NewAdopting) returns.
type Option func(*Session)

// Fingerprints makes the session keep the Fingerprint of the last message
// it delivered (LastFingerprint), for a standby's alignment under seq_mode
// none; the other sessions compute none.
func Fingerprints() Option {
	return func(s *Session) { s.extension().fingerprints = true }
}

// New returns a session for h. claimedAtMs is the sent_at_ms of the
// notification that triggered the claim (0 when it came from reconciliation).
func New(env *Env, h *lease.Held, claimedAtMs int64, opts ...Option) *Session {
	it := h.Item()
	s := &Session{
		env: env, held: h, claimed: claimedAtMs, since: time.Now().UnixNano(),
		rnd:   tenureStream(env.Rand, h),
		ended: make(chan struct{}),
	}
	s.lastSeq.Store(it.LastSeq)
	for _, o := range opts {
		o(s)
	}
	return s
}

// tenureStream is h's stream of draws under src (nil, with nothing
// allocated, when src is nil).
func tenureStream(src *draw.Source, h *lease.Held) *draw.Stream {
	if src == nil {
		return nil
	}
	return src.Stream("session/" + h.ID() + "/" + strconv.FormatInt(h.Epoch(), 10))
}

// Held is the session's lease.
func (s *Session) Held() *lease.Held { return s.held }

// Finished is closed once MarkFinished was called.
func (s *Session) Finished() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished == nil {
		if s.finishedSet {
			return closedChan
		}
		s.finished = make(chan struct{})
	}
	return s.finished
}

// closedChan is the Finished of a session marked finished before anyone
// waited on it.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// MarkFinished records that the session's end is written (the worker calls
// it after its release, hand-off or failure; idempotent).
func (s *Session) MarkFinished() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finishedSet {
		return
	}
	s.finishedSet = true
	if s.finished != nil {
		close(s.finished)
	}
}

// ID is the connection id.
func (s *Session) ID() string {
	if s.held == nil { // a standby's own session
		return s.ext.standby.id
	}
	return s.held.ID()
}

// ClaimedAtMs is the sent_at_ms of the notification behind the claim (0: none).
func (s *Session) ClaimedAtMs() int64 { return s.claimed }

// Logger is the session's logger (connection_id, worker_id, lease_epoch),
// built for each use: a session logs only on its rare paths (open,
// reconnect, end), and a logger kept for its life would hold zerolog's
// 500-byte context buffer per session (0.4 KiB of live heap per session at
// 19,000 sessions, docs/BENCHMARKS.md).
func (s *Session) Logger() *zerolog.Logger {
	if s.held == nil { // a standby's own session
		sb := s.ext.standby
		l := s.env.Log.With().Str("connection_id", sb.id).Int64("standby_epoch", sb.epoch).Logger()
		return &l
	}
	l := s.env.Log.With().Str("connection_id", s.held.ID()).Int64("lease_epoch", s.held.Epoch()).Logger()
	return &l
}

// debug is a debug event of the session's logger, nil (zerolog's no-op)
// when debug is off: the per-gap line must not build a logger it drops.
func (s *Session) debug() *zerolog.Event {
	if s.env.Log.GetLevel() > zerolog.DebugLevel || zerolog.GlobalLevel() > zerolog.DebugLevel {
		return nil
	}
	return s.Logger().Debug()
}

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
	SeqMissingDropped int64 `json:"seq_missing_dropped"`
	Controls          int64 `json:"control_messages"`
	Connected         bool  `json:"connected"`
	// Planned reconnects (make-before-break): switches, attempts given up,
	// the messages both connections carried (dropped), the dark time saved
	// in all, and whether one is under way.
	PlannedReconnects int64  `json:"planned_reconnects,omitempty"`
	PlannedFailed     int64  `json:"planned_reconnects_failed,omitempty"`
	SwitchOverlap     int64  `json:"switch_overlap,omitempty"`
	GapSavedMs        int64  `json:"gap_saved_ms,omitempty"`
	Switching         bool   `json:"switching,omitempty"`
	URL               string `json:"ws_url"` // redacted
	// LastError is the last failed connect's error (no URL, no header
	// value, no open message).
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// StandbyWorker is the worker holding the session's hot standby, as
	// the owner placed or found it ("": none; the worker fills it in).
	StandbyWorker string `json:"standby_worker,omitempty"`
}

// redactedURL is the URL of the current connection (before the first: the
// item's), redacted.
func (s *Session) redactedURL(it lease.Item) string {
	s.mu.Lock()
	p := s.proto
	s.mu.Unlock()
	if p != nil {
		return spec.RedactURL(p.url)
	}
	if sp, err := spec.Decode(it.Spec); err == nil {
		return spec.RedactURL(sp.WSURL)
	}
	return ""
}

// Status returns a snapshot.
func (s *Session) Status() Status {
	it := s.held.Item()
	st := Status{
		ConnectionID: s.ID(), Epoch: s.held.Epoch(), Generation: it.Generation, Since: time.Unix(0, s.since),
		LastSeq: s.lastSeq.Load(), Messages: s.messages.Load(), Duplicates: s.dups.Load(), Gaps: s.gaps.Load(),
		Reconnects: s.reconnects.Load(), SeqMissingDropped: s.missingDropped.Load(), Controls: s.controls.Load(),
		Connected: s.connected.Load(), URL: s.redactedURL(it),
		PlannedReconnects: s.planned.Load(), PlannedFailed: s.plannedFailed.Load(),
		SwitchOverlap: s.overlapped.Load(), GapSavedMs: s.gapSaved.Load(),
	}
	s.mu.Lock()
	st.Switching = s.next != nil
	s.mu.Unlock()
	if f := s.LastError(); f.Text != "" {
		st.LastError, st.LastErrorAt = f.Text, &f.At
	}
	return st
}

// DialFailure is a failed connect (a dial, or a connection that ended
// before its first message): the error's text (ErrorText), when, and the
// generation of the configuration dialed.
type DialFailure struct {
	Text       string
	At         time.Time
	Generation int64
}

// LastError is the last failed connect of this tenure (Text "" when every
// connect succeeded).
func (s *Session) LastError() DialFailure {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails == nil {
		return DialFailure{}
	}
	return s.fails.last
}

// LastSeq is the last delivered sequence number (lease.NoSeq: none).
func (s *Session) LastSeq() int64 { return s.lastSeq.Load() }
