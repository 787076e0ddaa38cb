package streamer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/secrets"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// Config is every setting of the Worker, and only those: how the worker is
// wired (the table, the work queue, which sink) is its caller's
// (cmd/streamer reads all of it from the environment: package envconfig).
// DefaultConfig fills the defaults, Resolved the derived ones, Validate
// checks them. The messages name each setting's environment variable
// (docs/worker.md, Configuration).
type Config struct {
	WorkerID string // lease owner; default hostname-<random>

	// Ownership timings (see shared/lease): the liveness TTL of the worker
	// record, its heartbeat period, the safety margin of self-fencing, and
	// the default checkpoint interval of a session.
	LeaseTTL        time.Duration
	HeartbeatEvery  time.Duration
	SafetyMargin    time.Duration
	CheckpointEvery time.Duration
	StoreTimeout    time.Duration // bound of each DynamoDB call
	// MaxConcurrentWrites bounds checkpoint writes in flight.
	MaxConcurrentWrites int

	// Rebalancing: every RebalanceEvery (0: never) the worker reads the
	// alive workers' load and hands sessions held at least MinHold to
	// under-loaded workers, at most RebalanceMaxMoves per round (0: 10 % of
	// its sessions).
	RebalanceEvery    time.Duration
	MinHold           time.Duration
	RebalanceMaxMoves int

	// Claiming.
	ReconcileEvery time.Duration
	// AuditEvery spaces the audit (by_owner against what the worker holds):
	// it runs on the first reconcile pass at least AuditEvery after the
	// last one (0: every pass).
	AuditEvery      time.Duration
	MaxSessions     int
	ClaimsPerSecond float64
	// FleetClaimsPerSecond is the whole fleet's claim budget
	// (schema.EnvFleetClaimsPerSecond): each worker claims at most this
	// divided by the alive workers (fleetbudget.go). 0: none, each worker
	// claims at ClaimsPerSecond.
	FleetClaimsPerSecond float64

	// Sessions.
	DialTimeout  time.Duration
	PingEvery    time.Duration // 0 disables keepalive pings
	PingTimeout  time.Duration
	CloseGrace   time.Duration
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	ReadLimit    int64
	SinkAttempts int
	// MaxDialFailures: a session whose connects fail this many times in a
	// row (transient errors) becomes FAILED; 0 = retry forever. A connect
	// fails unless its connection gets the source's first message (a
	// refused handshake, refused open messages, an unmet wait_for, a close
	// before any message: session.Config.MaxDialFailures). A permanent
	// error (address refused by policy, redirect, 401/403/404/410) fails it
	// at once.
	MaxDialFailures int
	// TenureHeader, when set, names a handshake header every dial carries
	// with "<worker id>/<lease epoch>" (session.Config.TenureHeader): what
	// lets a source, or a harness judging from the source's side, tell a
	// planned reconnect's two connections (one tenure) from two owners.
	// "": none (the default).
	TenureHeader string
	// Zone is the availability zone the worker runs in (schema.EnvZone;
	// cmd/streamer reads the ECS task metadata when it is not set): it is
	// written into the worker record, and a session's standby is placed in
	// another zone than its owner when one is known. "": unknown.
	Zone string
	// StandbyCheckEvery is how often a standby this worker holds re-reads
	// its session item (the owner, the generation, a stop, the checkpoint
	// its window trims to): the backstop under the owner's calls. 0: never.
	StandbyCheckEvery time.Duration
	// ExtraCAFile names a PEM bundle of CA certificates the wss:// sources
	// are verified against besides the system's roots (a private CA; the
	// local harness's per-run CA). "": the system's roots only.
	// Verification cannot be turned off.
	ExtraCAFile string
	// NoTLSResumption turns TLS session resumption off: every wss://
	// handshake is a full one (by default a reconnect or a claim to a host
	// dialed before resumes from a session ticket).
	NoTLSResumption bool
	// DialsPerHost admits this many dials per second to one source host
	// (a token bucket per host, with jitter); 0: no limit.
	DialsPerHost float64
	// DialLimits are sources' connection-rate limits per client address
	// (schema.EnvDialLimits): this worker never dials hosts matching one
	// more than Max times in any window of Per (plus
	// session.DialWindowSlack). On Fargate every task dials from an address
	// of its own (awsvpc); behind a NAT gateway the fleet shares one, and
	// the limit must be divided by the tasks. None by default.
	DialLimits []DialLimit
	// HandshakesInFlight bounds the dials (TCP, TLS and WebSocket
	// handshakes) running at once over every source host; a dial waits for
	// a slot before its DialTimeout starts. 0: no bound.
	HandshakesInFlight int
	// HandshakesPerHost bounds the dials running at once to one source
	// host, out of HandshakesInFlight: a host that accepts and never
	// answers holds at most this many slots until its dials time out. A
	// dial waits for its host's slot before one of the worker's. 0: no
	// bound per host.
	HandshakesPerHost int
	// SwitchBufferBudget bounds what planned reconnects' new connections
	// hold before their switch, over every session (session.SwitchBudget):
	// a new connection that finds it full is given up, as one that runs
	// session.MaxSwitchBytes ahead is. 0: no bound beyond MaxSwitchBytes
	// per session (cmd/streamer's envconfig derives it from the memory
	// limit, and counts it in the worker's memory check).
	SwitchBufferBudget int64
	// LargeFrameBudget bounds the bytes of messages larger than
	// schema.SmallFrameAllowance being read, over every session
	// (session.FrameBudget): such a message waits for room (at most
	// session.LargeFrameWait, then its session reconnects) and gives it
	// back once it is handed on. At least ReadLimit, so that one message of
	// every size fits. 0: no bound (cmd/streamer's envconfig derives it
	// from the memory limit, and counts it in the worker's memory check in
	// place of MaxSessions × ReadLimit).
	LargeFrameBudget int64
	// SecretCacheTTL is how long a secret's value (a session's
	// {{secret:NAME}}) is reused before Secrets Manager is asked again:
	// the longest a rotated secret takes to reach the next dial. Used by
	// the Resolver cmd/streamer builds (a Deps.Secrets of the caller's own
	// owns its caching).
	SecretCacheTTL time.Duration
	// SecretHosts binds each secret to the hosts its value may be sent to
	// (schema.EnvSecretHosts, as ingest reads it; shared/secretref): every
	// dial checks each reference's secret against the ws_url's host before
	// asking for the value, and the open messages' against the host the
	// handshake ended on. The zero value binds none: a reference fails its
	// session.
	SecretHosts secretref.Bindings
	// AllowPrivateIPs is the address policy every dial is checked against,
	// after DNS resolution (shared/netguard): public addresses only by
	// default; "loopback" for local development, "all" for private networks.
	// Cloud-metadata addresses are refused under every policy.
	AllowPrivateIPs netguard.Policy
	// AllowedHosts are the host patterns (schema.EnvAllowedHosts, as ingest
	// reads them) a handshake redirect may lead to; none: any host.
	AllowedHosts []string
	// SinkRequestTimeout bounds every sink call of a session (and a
	// batched sink's requests: give its batcher the same, Resolved's, as
	// batch.Config.RequestTimeout); 0: half the safety margin (Resolved).
	// At most half the margin: a request sent just before the trust
	// deadline must end well inside it.
	SinkRequestTimeout time.Duration

	// Operations.
	ShutdownDeadline time.Duration
	// ShutdownInFlight is how many sessions the graceful shutdown hands
	// off at once at least (more when the hand-offs seen so far say the
	// rest would not be done by a third of the deadline); the others keep
	// streaming until their turn.
	ShutdownInFlight int
	AdminAddr        string // "" disables the admin server
	// AdvertiseAddr is the admin address other workers call (a
	// rebalancing move's receiver); "" = the listener's, with an
	// unspecified host replaced by this host's private address.
	AdvertiseAddr string
	AdminPprof    bool // serve /debug/pprof/ on the admin server to loopback clients
	// AdminToken is the bearer token every admin endpoint but /healthz and
	// /readyz requires (Authorization: Bearer …), the one the fleet's
	// workers send each other's POST /handoff. Required unless AdminAddr
	// is a loopback address (or ""): never logged or shown.
	AdminToken       string
	MetricsEvery     time.Duration
	MetricsNamespace string
	Environment      string
	LogLevel         string // of the default logger (Deps.Logger nil)
}

// defaultShutdownDeadline is Config.ShutdownDeadline's default.
const defaultShutdownDeadline = 30 * time.Second

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	lc := lease.DefaultConfig("x")
	return Config{
		WorkerID:            DefaultWorkerID(),
		LeaseTTL:            lc.TTL,
		HeartbeatEvery:      lc.HeartbeatEvery,
		SafetyMargin:        lc.SafetyMargin,
		CheckpointEvery:     lc.CheckpointEvery,
		MaxConcurrentWrites: lc.MaxConcurrentWrites,
		StoreTimeout:        lc.RPCTimeout,
		ReconcileEvery:      5 * time.Second,
		RebalanceEvery:      10 * time.Second,
		MinHold:             time.Minute,
		MaxSessions:         1000,
		ClaimsPerSecond:     schema.DefaultClaimsPerSecond,
		DialTimeout:         10 * time.Second,
		PingEvery:           15 * time.Second,
		PingTimeout:         10 * time.Second,
		CloseGrace:          time.Second,
		ReconnectMin:        100 * time.Millisecond,
		ReconnectMax:        30 * time.Second,
		ReadLimit:           schema.DefaultReadLimit,
		SinkAttempts:        3,
		MaxDialFailures:     20,
		DialsPerHost:        5,
		HandshakesInFlight:  DefaultHandshakesInFlight,
		HandshakesPerHost:   DefaultHandshakesPerHost,
		SecretCacheTTL:      secrets.DefaultTTL,
		StandbyCheckEvery:   30 * time.Second,
		AllowPrivateIPs:     netguard.None,
		ShutdownDeadline:    defaultShutdownDeadline,
		ShutdownInFlight:    4,
		AdminAddr:           "127.0.0.1:8081",
		MetricsEvery:        time.Minute,
		MetricsNamespace:    schema.DefaultMetricsNamespace,
		Environment:         "local",
		LogLevel:            "info",
	}
}

// Resolved fills the derived defaults: the sink request timeout (half the
// safety margin).
func (c Config) Resolved() Config {
	if c.SinkRequestTimeout == 0 {
		c.SinkRequestTimeout = c.SafetyMargin / 2
	}
	return c
}

// DefaultWorkerID is the hostname (the task's) plus a random suffix, so a
// restarted process never reuses its predecessor's owner id.
func DefaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// LeaseConfig is the shared/lease configuration these settings make.
func (c Config) LeaseConfig() lease.Config {
	lc := lease.DefaultConfig(c.WorkerID)
	lc.Host, lc.Pid = hostname, os.Getpid()
	lc.Zone = c.Zone
	lc.TTL = c.LeaseTTL
	lc.HeartbeatEvery = c.HeartbeatEvery
	lc.SafetyMargin = c.SafetyMargin
	lc.CheckpointEvery = c.CheckpointEvery
	lc.Periodic = periodicCheckpoints
	lc.RPCTimeout = c.StoreTimeout
	lc.MaxConcurrentWrites = c.MaxConcurrentWrites
	// The fleet summary that rebalancing rounds act on is written every
	// refresh: never less often than the rounds.
	if c.RebalanceEvery > 0 && c.RebalanceEvery < lc.RefreshEvery {
		lc.RefreshEvery = c.RebalanceEvery
	}
	return lc
}

func (c Config) sessionConfig() *session.Config {
	return &session.Config{
		WorkerID:     c.WorkerID,
		DialTimeout:  c.DialTimeout,
		PingEvery:    c.PingEvery,
		PingTimeout:  c.PingTimeout,
		CloseGrace:   c.CloseGrace,
		Backoff:      backoff.Policy{Base: c.ReconnectMin, Max: c.ReconnectMax},
		StableAfter:  10 * time.Second,
		ReadLimit:    c.ReadLimit,
		SinkAttempts: c.SinkAttempts,
		SinkTimeout:  c.Resolved().SinkRequestTimeout,

		MaxDialFailures: c.MaxDialFailures,
		TenureHeader:    c.TenureHeader,
		SecretHosts:     c.SecretHosts,
	}
}

// Validate checks every setting (with the derived defaults, Resolved); the
// error lists all problems.
func (c Config) Validate() error {
	if errs := c.Problems(); len(errs) > 0 {
		return fmt.Errorf("worker config: %w", errors.Join(errs...))
	}
	return nil
}

// Problems are every problem Validate reports, one error each (nil: none),
// for a caller that checks settings of its own with them (envconfig).
func (c Config) Problems() []error {
	c = c.Resolved()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := c.LeaseConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ReconcileEvery <= 0 {
		bad("%s must be positive", schema.EnvReconcileEvery)
	}
	if c.AuditEvery < 0 {
		bad("%s must not be negative (0: the audit on every reconcile pass)", schema.EnvAuditEvery)
	}
	if c.RebalanceEvery < 0 {
		bad("%s must not be negative (0 disables rebalancing)", schema.EnvRebalanceEvery)
	}
	if c.MinHold < 0 {
		bad("%s must not be negative", schema.EnvMinHold)
	}
	if c.TenureHeader != "" && !spec.ValidHeaderName(c.TenureHeader) {
		bad("%s must be an HTTP header name (a token), not one of the handshake's own", schema.EnvTenureHeader)
	}
	if c.RebalanceMaxMoves < 0 {
		bad("%s must not be negative (0: 10 %% of the worker's sessions)", schema.EnvRebalanceMoves)
	}
	if c.MaxSessions < 1 {
		bad("%s must be at least 1", schema.EnvMaxSessions)
	}
	if c.ClaimsPerSecond <= 0 {
		bad("%s must be positive", schema.EnvClaimsPerSecond)
	}
	if c.FleetClaimsPerSecond < 0 || math.IsNaN(c.FleetClaimsPerSecond) || math.IsInf(c.FleetClaimsPerSecond, 0) {
		bad("%s must be a number of claims per second, 0 for no fleet budget", schema.EnvFleetClaimsPerSecond)
	}
	if c.DialsPerHost < 0 || math.IsNaN(c.DialsPerHost) || math.IsInf(c.DialsPerHost, 0) {
		bad("%s must be a number of dials per second, 0 for no limit", schema.EnvDialsPerHost)
	}
	for _, p := range session.ValidateDialLimits(c.DialLimits) {
		bad("%s: %s", schema.EnvDialLimits, p)
	}
	if c.HandshakesInFlight < 0 {
		bad("%s must be a number of dials, 0 for no bound", schema.EnvHandshakesInFlight)
	}
	if c.StandbyCheckEvery < 0 {
		bad("%s must not be negative (0: never)", schema.EnvStandbyCheckEvery)
	}
	if c.SwitchBufferBudget < 0 {
		bad("%s must not be negative", schema.EnvSwitchBufferBudget)
	}
	if c.LargeFrameBudget < 0 {
		bad("%s must not be negative (0: no bound)", schema.EnvLargeFrameBudget)
	} else if c.LargeFrameBudget > 0 && c.LargeFrameBudget < c.ReadLimit {
		bad("%s (%d) must be at least %s (%d): a message of the read limit must fit", schema.EnvLargeFrameBudget,
			c.LargeFrameBudget, schema.EnvReadLimit, c.ReadLimit)
	}
	if c.HandshakesPerHost < 0 {
		bad("%s must be a number of dials, 0 for no bound per host", schema.EnvHandshakesPerHost)
	} else if c.HandshakesInFlight > 0 && c.HandshakesPerHost > c.HandshakesInFlight {
		bad("%s (%d) must be at most %s (%d): one host's dials are a share of the worker's", schema.EnvHandshakesPerHost,
			c.HandshakesPerHost, schema.EnvHandshakesInFlight, c.HandshakesInFlight)
	}
	if c.SecretCacheTTL <= 0 || c.SecretCacheTTL > MaxSecretCacheTTL {
		bad("%s must be within 0s (exclusive)..%s: past it a rotated secret takes too long to reach new dials", schema.EnvSecretCacheTTL, MaxSecretCacheTTL)
	}
	if c.ShutdownInFlight < 1 {
		bad("%s must be at least 1", schema.EnvShutdownInFlight)
	}
	if c.ShutdownDeadline <= 0 {
		bad("%s must be positive", schema.EnvShutdownDeadline)
	} else if c.ShutdownDeadline <= c.CloseGrace+c.StoreTimeout {
		bad("%s (%s) must exceed %s + %s (%s + %s): one close handshake and one release must fit", schema.EnvShutdownDeadline,
			c.ShutdownDeadline, schema.EnvCloseGrace, schema.EnvStoreRPCTimeout, c.CloseGrace, c.StoreTimeout)
	}
	if c.MetricsEvery <= 0 {
		bad("%s must be positive", schema.EnvMetricsEvery)
	}
	switch {
	case c.AdminToken != "" && len(c.AdminToken) < MinAdminTokenLen:
		bad("%s must be at least %d characters", schema.EnvAdminToken, MinAdminTokenLen)
	case c.AdminToken == "" && c.AdminAddr != "" && !loopbackAddr(c.AdminAddr):
		bad("%s is required when %s (%s) is not a loopback address: the admin server takes hand-offs", schema.EnvAdminToken, schema.EnvAdminAddr, c.AdminAddr)
	}
	if c.PingEvery > 0 && c.PingTimeout >= c.PingEvery {
		bad("%s (%s) must be shorter than %s (%s)", schema.EnvPingTimeout, c.PingTimeout, schema.EnvPingEvery, c.PingEvery)
	}
	if err := c.sessionConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		bad("%s=%q: want debug, info, warn or error", schema.EnvLogLevel, c.LogLevel)
	}
	// The sink request timeout fits in half the safety margin. A request
	// is sent only when its timeout ends by the trust deadline, and the
	// margin beyond that deadline absorbs the clock drift of both workers
	// (shared/lease/safety_test.go); half of it for one request leaves the
	// other half as room to spare.
	if rt := c.SinkRequestTimeout; rt <= 0 {
		bad("%s %s must be positive", schema.EnvSinkRequestTimeout, rt)
	} else if rt > c.SafetyMargin/2 {
		bad("%s %s must be at most half of %s (%s): a request sent just before the trust deadline must end well inside the margin",
			schema.EnvSinkRequestTimeout, rt, schema.EnvSafetyMargin, c.SafetyMargin)
	}
	return errs
}

// MaxSecretCacheTTL bounds SecretCacheTTL: a value cached longer would keep
// a rotated (or revoked) credential in use for longer than an operator
// rotating it expects.
const MaxSecretCacheTTL = time.Hour

// DefaultHandshakesInFlight is HandshakesInFlight's default: 32 dials at
// once. At 100 ms of round trip to a source (a TCP, a TLS 1.3 and an HTTP
// round trip each) that is about 100 handshakes a second, twice the claim
// pacer's default 50/s, while a burst (a claim wave, a source dropping
// every connection) holds at most 32 handshakes' key-exchange state.
const DefaultHandshakesInFlight = 32

// DefaultHandshakesPerHost is HandshakesPerHost's default: 8 dials at once
// to one host, a quarter of DefaultHandshakesInFlight, so that a host whose
// handshakes hang (a tarpit, an overloaded source) leaves three quarters of
// the slots to every other host's reconnects and claims. One host's
// reconnect wave still dials 8 at once: at 100 ms of round trip, 80 a
// second, beyond the default DialsPerHost of 5 a second.
const DefaultHandshakesPerHost = 8

// DialLimit is a source's connection-rate limit per client address
// (Config.DialLimits).
type DialLimit = session.DialLimit

// MinAdminTokenLen is the shortest admin token accepted.
const MinAdminTokenLen = 16

// loopbackAddr reports whether host:port addr listens on loopback only
// (127.0.0.0/8, ::1, localhost).
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
