package streamer

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/kinesissink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/sqssink"
)

// Finer worker settings, named in shared/schema.
const (
	EnvDialTimeout     = schema.EnvDialTimeout
	EnvPingEvery       = schema.EnvPingEvery
	EnvPingTimeout     = schema.EnvPingTimeout
	EnvCloseGrace      = schema.EnvCloseGrace
	EnvReconnectMin    = schema.EnvReconnectMin
	EnvReconnectMax    = schema.EnvReconnectMax
	EnvReadLimit       = schema.EnvReadLimit
	EnvMetricsEvery    = schema.EnvMetricsEvery
	EnvQueueWait       = schema.EnvQueueWait
	EnvSinkAttempts    = schema.EnvSinkAttempts
	EnvStoreRPCTimeout = schema.EnvStoreRPCTimeout
	EnvAdminPprof      = schema.EnvAdminPprof
	EnvMaxWrites       = schema.EnvMaxConcurrentWrites
	EnvMaxDialFailures = schema.EnvMaxDialFailures
)

// DefaultGCPercent is the GC target of the worker binaries when GOGC is
// not set: less GC headroom per session than Go's default 100 at a similar
// CPU cost (measured in docs/worker.md#capacity). GOGC and GOMEMLIMIT still
// apply.
const DefaultGCPercent = 50

// Sink names (WSFLEET_SINK).
const (
	SinkStdout  = "stdout"
	SinkSQS     = "sqs"
	SinkKinesis = "kinesis"
	SinkDiscard = "discard"
)

// Config is every worker setting. DefaultConfig fills the defaults,
// ConfigFromEnv reads the environment over them, Validate checks them.
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
	ReconcileEvery  time.Duration
	MaxSessions     int
	ClaimsPerSecond float64
	QueueWait       time.Duration // SQS long-poll wait (a graceful shutdown waits for the poll in flight)

	// Sessions.
	DialTimeout  time.Duration
	PingEvery    time.Duration // 0 disables keepalive pings
	PingTimeout  time.Duration
	CloseGrace   time.Duration
	ReconnectMin time.Duration
	ReconnectMax time.Duration
	ReadLimit    int64
	SinkAttempts int
	// MaxDialFailures: a session whose dials fail this many times in a row
	// (transient errors) becomes FAILED; 0 = retry forever. A permanent
	// error (address refused by policy, redirect, 401/403/404/410) fails it
	// at once.
	MaxDialFailures int
	// DialsPerHost admits this many dials per second to one source host
	// (a token bucket per host, with jitter); 0: no limit.
	DialsPerHost float64
	// AllowPrivateIPs is the address policy every dial is checked against,
	// after DNS resolution (shared/netguard): public addresses only by
	// default; "loopback" for local development, "all" for private networks.
	// Cloud-metadata addresses are refused under every policy.
	AllowPrivateIPs netguard.Policy
	// AllowedHosts are the host patterns (schema.EnvAllowedHosts, as ingest
	// reads them) a handshake redirect may lead to; none: any host.
	AllowedHosts []string

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
	AdvertiseAddr    string
	AdminPprof       bool // serve /debug/pprof/ on the admin server to loopback clients
	MetricsEvery     time.Duration
	MetricsNamespace string
	Environment      string
	LogLevel         string

	// Binary wiring (cmd/streamer); the library ignores them.
	Sink           string
	TableName      string
	QueueURL       string // "" = reconciliation only
	OutputQueueURL string
	OutputStream   string // the kinesis sink's stream (name or ARN)
	// SinkBatching sends the sqs sink's messages in SendMessageBatch
	// requests through sink/batch (kinesis is always batched); false: one
	// SendMessage per message, the session waiting for each.
	SinkBatching bool
	// Batch bounds the batches of the sqs and kinesis sinks. Its
	// RequestTimeout (WSFLEET_SINK_REQUEST_TIMEOUT; 0: half the safety
	// margin) also bounds an unbatched sink's calls, and its BufferBudget
	// (WSFLEET_SINK_BUFFER_BUDGET; 0: a quarter of MemoryLimit, or
	// DefaultBufferBudget when the limit is unknown) every session's
	// unacknowledged sink bytes together (Resolved fills both).
	Batch batch.Config
	// MemoryLimit is the worker's memory limit in bytes (the Go runtime's
	// GOMEMLIMIT, or the container's cgroup limit: DetectMemoryLimit, read
	// once by the binary); 0: unknown.
	MemoryLimit int64

	// unknownEnv are the WSFLEET_ variables ConfigFromEnv found and the
	// worker does not read; Validate reports them.
	unknownEnv []error
}

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
		ClaimsPerSecond:     50,
		QueueWait:           10 * time.Second,
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
		AllowPrivateIPs:     netguard.None,
		ShutdownDeadline:    30 * time.Second,
		ShutdownInFlight:    4,
		AdminAddr:           "127.0.0.1:8081",
		MetricsEvery:        time.Minute,
		MetricsNamespace:    schema.DefaultMetricsNamespace,
		Environment:         "local",
		LogLevel:            "info",
		Sink:                SinkStdout,
		TableName:           schema.DefaultTableName,
		SinkBatching:        true,
		Batch:               defaultBatch(),
	}
}

// DefaultBufferBudget is the sink buffer budget when the memory limit is
// unknown.
const DefaultBufferBudget = 256 << 20

// defaultBatch is batch.DefaultConfig with the two settings Resolved
// derives left at 0.
func defaultBatch() batch.Config {
	b := batch.DefaultConfig()
	b.RequestTimeout, b.BufferBudget = 0, 0
	return b
}

// Resolved fills the derived defaults: the sink request timeout (half the
// safety margin) and the sink buffer budget (a quarter of the memory limit).
func (c Config) Resolved() Config {
	if c.Batch.RequestTimeout == 0 {
		c.Batch.RequestTimeout = c.SafetyMargin / 2
	}
	if c.Batch.BufferBudget == 0 {
		c.Batch.BufferBudget = DefaultBufferBudget
		if c.MemoryLimit > 0 {
			c.Batch.BufferBudget = c.MemoryLimit / 4
		}
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

// ConfigFromEnv returns DefaultConfig overridden by environ (KEY=VALUE
// pairs, os.Environ() in the binary; the last value of a repeated key
// wins, as exec does). Empty values keep the default. The error lists every
// value that does not parse. A WSFLEET_ variable the worker does not read
// (schema.WorkerEnv, plus accept: variables of the binary's own) is a
// problem Validate reports, with the known name it is closest to.
func ConfigFromEnv(environ []string, accept ...string) (Config, error) {
	c := DefaultConfig()
	c.unknownEnv = schema.UnknownEnv(environ, append(schema.WorkerEnv(), accept...))
	lookup := schema.LookupIn(environ)
	p := envParser{lookup: lookup}
	p.str(schema.EnvWorkerID, &c.WorkerID)
	p.dur(schema.EnvLeaseTTL, &c.LeaseTTL)
	p.dur(schema.EnvHeartbeatEvery, &c.HeartbeatEvery)
	p.dur(schema.EnvSafetyMargin, &c.SafetyMargin)
	p.dur(schema.EnvCheckpointEvery, &c.CheckpointEvery)
	p.dur(EnvStoreRPCTimeout, &c.StoreTimeout)
	p.int(EnvMaxWrites, &c.MaxConcurrentWrites)
	p.dur(schema.EnvReconcileEvery, &c.ReconcileEvery)
	p.dur(schema.EnvRebalanceEvery, &c.RebalanceEvery)
	p.str(schema.EnvAdvertiseAddr, &c.AdvertiseAddr)
	p.dur(schema.EnvMinHold, &c.MinHold)
	p.int(schema.EnvRebalanceMoves, &c.RebalanceMaxMoves)
	p.int(schema.EnvMaxSessions, &c.MaxSessions)
	p.float(schema.EnvClaimsPerSecond, &c.ClaimsPerSecond)
	p.dur(EnvQueueWait, &c.QueueWait)
	p.dur(EnvDialTimeout, &c.DialTimeout)
	p.dur(EnvPingEvery, &c.PingEvery)
	p.dur(EnvPingTimeout, &c.PingTimeout)
	p.dur(EnvCloseGrace, &c.CloseGrace)
	p.dur(EnvReconnectMin, &c.ReconnectMin)
	p.dur(EnvReconnectMax, &c.ReconnectMax)
	var limit int
	if p.int(EnvReadLimit, &limit) {
		c.ReadLimit = int64(limit)
	}
	p.int(EnvSinkAttempts, &c.SinkAttempts)
	p.int(EnvMaxDialFailures, &c.MaxDialFailures)
	p.float(schema.EnvDialsPerHost, &c.DialsPerHost)
	p.dur(schema.EnvShutdownDeadline, &c.ShutdownDeadline)
	p.int(schema.EnvShutdownInFlight, &c.ShutdownInFlight)
	p.strOrEmpty(schema.EnvAdminAddr, &c.AdminAddr) // set and empty: no admin server
	p.bool(EnvAdminPprof, &c.AdminPprof)
	p.dur(EnvMetricsEvery, &c.MetricsEvery)
	p.str(schema.EnvMetricsNS, &c.MetricsNamespace)
	p.str(schema.EnvEnvironment, &c.Environment)
	p.str(schema.EnvLogLevel, &c.LogLevel)
	p.str(schema.EnvSink, &c.Sink)
	if v, ok := lookup(schema.EnvAllowedHosts); ok {
		c.AllowedHosts = netguard.SplitHosts(v)
	}
	if v, ok := lookup(schema.EnvAllowPrivateIPs); ok && v != "" {
		pol, err := netguard.ParsePolicy(v)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s: %w", schema.EnvAllowPrivateIPs, err))
		} else {
			c.AllowPrivateIPs = pol
		}
	}
	p.str(schema.EnvTableName, &c.TableName)
	p.str(schema.EnvQueueURL, &c.QueueURL)
	p.str(schema.EnvOutputQueueURL, &c.OutputQueueURL)
	p.str(schema.EnvOutputStream, &c.OutputStream)
	p.bool(schema.EnvSinkBatching, &c.SinkBatching)
	p.dur(schema.EnvSinkMaxDelay, &c.Batch.MaxDelay)
	p.int(schema.EnvSinkMaxBatch, &c.Batch.MaxCount)
	p.int(schema.EnvSinkMaxBatchBytes, &c.Batch.MaxBytes)
	p.int(schema.EnvSinkInFlight, &c.Batch.MaxInFlight)
	p.int(schema.EnvSinkBufferBytes, &c.Batch.SessionBufferBytes)
	p.dur(schema.EnvSinkRequestTimeout, &c.Batch.RequestTimeout)
	p.int(schema.EnvSinkPermanentAttempts, &c.Batch.PermanentAttempts)
	var budget int
	if p.int(schema.EnvSinkBufferBudget, &budget) {
		c.Batch.BufferBudget = int64(budget)
	}
	if len(p.errs) > 0 {
		return c, errors.Join(p.errs...)
	}
	return c, nil
}

type envParser struct {
	lookup func(string) (string, bool)
	errs   []error
}

func (p *envParser) get(name string) (string, bool) {
	v, ok := p.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (p *envParser) str(name string, dst *string) {
	if v, ok := p.get(name); ok {
		*dst = v
	}
}

// strOrEmpty is str for a variable whose empty value means something (off):
// set to "" it gives "", unset it keeps the default.
func (p *envParser) strOrEmpty(name string, dst *string) {
	if v, ok := p.lookup(name); ok {
		*dst = strings.TrimSpace(v)
	}
}

func (p *envParser) dur(name string, dst *time.Duration) {
	if v, ok := p.get(name); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s=%q: not a duration (e.g. 10s, 500ms)", name, v))
			return
		}
		*dst = d
	}
}

func (p *envParser) int(name string, dst *int) bool {
	if v, ok := p.get(name); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s=%q: not an integer", name, v))
			return false
		}
		*dst = n
		return true
	}
	return false
}

func (p *envParser) bool(name string, dst *bool) {
	if v, ok := p.get(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s=%q: not a boolean (true or false)", name, v))
			return
		}
		*dst = b
	}
}

func (p *envParser) float(name string, dst *float64) {
	if v, ok := p.get(name); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s=%q: not a number", name, v))
			return
		}
		*dst = f
	}
}

// LeaseConfig is the shared/lease configuration these settings make.
func (c Config) LeaseConfig() lease.Config {
	lc := lease.DefaultConfig(c.WorkerID)
	lc.TTL = c.LeaseTTL
	lc.HeartbeatEvery = c.HeartbeatEvery
	lc.SafetyMargin = c.SafetyMargin
	lc.CheckpointEvery = c.CheckpointEvery
	lc.RPCTimeout = c.StoreTimeout
	lc.MaxConcurrentWrites = c.MaxConcurrentWrites
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
		SinkTimeout:  c.Resolved().Batch.RequestTimeout,

		MaxDialFailures: c.MaxDialFailures,
	}
}

// batchLimits are the request limits of the configured sink when it is
// batched.
func (c Config) batchLimits() (batch.Limits, bool) {
	switch {
	case c.Sink == SinkKinesis:
		return kinesissink.New(nil, "").Limits(), true
	case c.Sink == SinkSQS && c.SinkBatching:
		return sqssink.New(nil, "").Limits(), true
	}
	return batch.Limits{}, false
}

// Validate checks every setting (with the derived defaults, Resolved) and
// the environment's variable names; the error lists all problems.
func (c Config) Validate() error {
	c = c.Resolved()
	errs := slices.Clone(c.unknownEnv)
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := c.LeaseConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ReconcileEvery <= 0 {
		bad("%s must be positive", schema.EnvReconcileEvery)
	}
	if c.RebalanceEvery < 0 {
		bad("%s must not be negative (0 disables rebalancing)", schema.EnvRebalanceEvery)
	}
	if c.MinHold < 0 {
		bad("%s must not be negative", schema.EnvMinHold)
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
	if c.DialsPerHost < 0 || math.IsNaN(c.DialsPerHost) || math.IsInf(c.DialsPerHost, 0) {
		bad("%s must be a number of dials per second, 0 for no limit", schema.EnvDialsPerHost)
	}
	if c.QueueWait < 0 || c.QueueWait > 20*time.Second {
		bad("%s must be within 0s..20s", EnvQueueWait)
	}
	if c.ShutdownInFlight < 1 {
		bad("%s must be at least 1", schema.EnvShutdownInFlight)
	}
	if c.ShutdownDeadline <= 0 {
		bad("%s must be positive", schema.EnvShutdownDeadline)
	} else if c.ShutdownDeadline <= c.CloseGrace+c.StoreTimeout {
		bad("%s (%s) must exceed %s + %s (%s + %s): one close handshake and one release must fit", schema.EnvShutdownDeadline,
			c.ShutdownDeadline, EnvCloseGrace, EnvStoreRPCTimeout, c.CloseGrace, c.StoreTimeout)
	}
	if c.MetricsEvery <= 0 {
		bad("%s must be positive", EnvMetricsEvery)
	}
	if c.PingEvery > 0 && c.PingTimeout >= c.PingEvery {
		bad("%s (%s) must be shorter than %s (%s)", EnvPingTimeout, c.PingTimeout, EnvPingEvery, c.PingEvery)
	}
	if err := c.sessionConfig().Validate(); err != nil {
		errs = append(errs, err)
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		bad("%s=%q: want debug, info, warn or error", schema.EnvLogLevel, c.LogLevel)
	}
	switch c.Sink {
	case SinkStdout, SinkDiscard:
	case SinkSQS:
		if c.OutputQueueURL == "" {
			bad("%s=sqs needs %s", schema.EnvSink, schema.EnvOutputQueueURL)
		}
	case SinkKinesis:
		if c.OutputStream == "" {
			bad("%s=kinesis needs %s", schema.EnvSink, schema.EnvOutputStream)
		}
	default:
		bad("%s=%q: want stdout, sqs, kinesis or discard", schema.EnvSink, c.Sink)
	}
	errs = append(errs, c.validateSinkBounds()...)
	if l, ok := c.batchLimits(); ok {
		if err := c.Batch.Validate(l); err != nil {
			errs = append(errs, fmt.Errorf("%s=%s (%s, %s, %s, %s, %s): %w", schema.EnvSink, c.Sink, schema.EnvSinkMaxBatch,
				schema.EnvSinkMaxBatchBytes, schema.EnvSinkMaxDelay, schema.EnvSinkInFlight, schema.EnvSinkBufferBytes, err))
		}
	}
	if c.TableName == "" {
		bad("%s is empty", schema.EnvTableName)
	}
	if len(errs) > 0 {
		return fmt.Errorf("worker config: %w", errors.Join(errs...))
	}
	return nil
}

// validateSinkBounds checks the settings that keep sink writes safe and the
// worker within its memory (c is Resolved):
//   - the sink request timeout fits in half the safety margin. A request is
//     sent only when its timeout ends by the trust deadline, and the margin
//     beyond that deadline absorbs the clock drift of both workers
//     (shared/lease/safety_test.go); half of it for one request leaves the
//     other half as room to spare.
//   - a worker whose memory limit is known has room for every session to
//     hold one message of ReadLimit being read, plus the sink buffer budget.
//     The sink's buffers are bounded by the budget whatever MaxSessions ×
//     SessionBufferBytes is (a full budget stalls reads): the budget, not
//     that product, is what counts.
func (c Config) validateSinkBounds() []error {
	var errs []error
	rt := c.Batch.RequestTimeout
	if rt <= 0 {
		errs = append(errs, fmt.Errorf("%s %s must be positive", schema.EnvSinkRequestTimeout, rt))
	} else if rt > c.SafetyMargin/2 {
		errs = append(errs, fmt.Errorf("%s %s must be at most half of %s (%s): a request sent just before the trust deadline must end well inside the margin",
			schema.EnvSinkRequestTimeout, rt, schema.EnvSafetyMargin, c.SafetyMargin))
	}
	if c.Batch.BufferBudget < 0 {
		errs = append(errs, fmt.Errorf("%s %d must not be negative (0: a quarter of the memory limit)", schema.EnvSinkBufferBudget, c.Batch.BufferBudget))
	}
	if c.MemoryLimit > 0 && c.MaxSessions > 0 && c.ReadLimit > 0 {
		need := int64(c.MaxSessions)*c.ReadLimit + c.Batch.BufferBudget
		if need > c.MemoryLimit {
			errs = append(errs, fmt.Errorf("%s %d × %s %d + %s %d = %d bytes exceeds the memory limit %d (%s or the container's): lower one of them",
				schema.EnvMaxSessions, c.MaxSessions, EnvReadLimit, c.ReadLimit, schema.EnvSinkBufferBudget, c.Batch.BufferBudget, need, c.MemoryLimit, schema.EnvGoMemLimit))
		}
	}
	return errs
}
