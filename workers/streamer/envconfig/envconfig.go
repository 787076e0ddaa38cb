// Package envconfig is the streamer binary's configuration from the
// environment (docs/worker.md, Configuration): the worker's settings
// (streamer.Config, the library's) and the binary's own wiring (the lease
// table, the work queue, the sink, the memory limit), every WSFLEET_
// variable, the defaults, and one Validate that reports every problem at
// once, an unknown WSFLEET_ variable with the known name it is closest to
// among them.
//
// cmd/streamer reads its settings with it, and so does the benchmark's
// memory worker (scripts/bench/cmd/memstreamer), which takes the shipped
// worker's settings the same way: it is not internal for that reason.
package envconfig

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/secretref"
	"github.com/wsfleet/wsfleet/shared/suggest"
	streamer "github.com/wsfleet/wsfleet/workers/streamer"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/registry"
)

// DefaultGCPercent is the GC target of the worker binaries when GOGC is
// not set: less GC headroom per session than Go's default 100 at a similar
// CPU cost (measured in docs/worker.md#capacity). GOGC and GOMEMLIMIT still
// apply.
const DefaultGCPercent = 50

// DefaultBufferBudget is the sink buffer budget when the memory limit is
// unknown.
const DefaultBufferBudget = 256 << 20

// DefaultSwitchBufferBudget is the planned reconnects' switch budget
// (Worker.SwitchBufferBudget) when the memory limit is unknown; with a
// known limit it is a sixteenth of it.
const DefaultSwitchBufferBudget = 16 << 20

// DefaultLargeFrameBudget is the large-frame budget
// (Worker.LargeFrameBudget) when the memory limit is unknown; with a known
// limit it is an eighth of it (schema.LargeFrameShare), and at least the
// read limit.
const DefaultLargeFrameBudget = schema.DefaultLargeFrameBudget

// Config is the binary's configuration. Default fills the defaults,
// FromEnv reads the environment over them, Validate checks them.
type Config struct {
	// Worker are the library's settings (streamer.New).
	Worker streamer.Config

	TableName string        // the lease table (sessions, checkpoints, worker records)
	QueueURL  string        // the work queue; "" = reconciliation only
	QueueWait time.Duration // its SQS long-poll wait (a graceful shutdown waits for the poll in flight)

	// Sink is the sink's settings (sink/registry: the kind, its
	// destination, its batches). Its Batch.RequestTimeout is the worker's
	// (Worker.SinkRequestTimeout, WSFLEET_SINK_REQUEST_TIMEOUT: Resolved
	// sets it), and its Batch.BufferBudget (WSFLEET_SINK_BUFFER_BUDGET; 0: a
	// quarter of MemoryLimit, or DefaultBufferBudget when the limit is
	// unknown) bounds every session's unacknowledged sink bytes together
	// (Resolved fills it).
	Sink registry.Config
	// MemoryLimit is the worker's memory limit in bytes (the Go runtime's
	// GOMEMLIMIT, or the container's cgroup limit: DetectMemoryLimit, read
	// once by the binary); 0: unknown.
	MemoryLimit int64

	// unknownEnv are the WSFLEET_ variables FromEnv found and the worker
	// does not read; Validate reports them.
	unknownEnv []error
}

// Default returns the defaults.
func Default() Config {
	return Config{
		Worker:    streamer.DefaultConfig(),
		TableName: schema.DefaultTableName,
		QueueWait: 10 * time.Second,
		Sink:      registry.DefaultConfig(),
	}
}

// Resolved fills the derived defaults: the worker's (the sink request
// timeout, half the safety margin), the batches' request timeout (the
// worker's) and the sink buffer budget (a quarter of the memory limit).
func (c Config) Resolved() Config {
	c.Worker = c.Worker.Resolved()
	c.Sink.Batch.RequestTimeout = c.Worker.SinkRequestTimeout
	if c.Sink.Batch.BufferBudget == 0 {
		c.Sink.Batch.BufferBudget = DefaultBufferBudget
		if c.MemoryLimit > 0 {
			c.Sink.Batch.BufferBudget = c.MemoryLimit / schema.SinkBudgetShare
		}
	}
	if c.Worker.SwitchBufferBudget == 0 {
		c.Worker.SwitchBufferBudget = DefaultSwitchBufferBudget
		if c.MemoryLimit > 0 {
			c.Worker.SwitchBufferBudget = c.MemoryLimit / schema.SwitchBudgetShare
		}
	}
	if c.Worker.LargeFrameBudget == 0 {
		c.Worker.LargeFrameBudget = DefaultLargeFrameBudget
		if c.MemoryLimit > 0 {
			c.Worker.LargeFrameBudget = c.MemoryLimit / schema.LargeFrameShare
		}
		c.Worker.LargeFrameBudget = max(c.Worker.LargeFrameBudget, c.Worker.ReadLimit)
	}
	return c
}

// FromEnv returns Default overridden by environ (KEY=VALUE pairs,
// os.Environ() in the binary; the last value of a repeated key wins, as
// exec does). Empty values keep the default. The error lists every value
// that does not parse. A WSFLEET_ variable the worker does not read
// (schema.WorkerEnv, plus accept: variables of the binary's own) is a
// problem Validate reports, with the known name it is closest to.
func FromEnv(environ []string, accept ...string) (Config, error) {
	c := Default()
	c.unknownEnv = suggest.UnknownEnv(environ, append(schema.WorkerEnv(), accept...))
	lookup := schema.LookupIn(environ)
	p := parser{lookup: lookup}
	w := &c.Worker
	p.str(schema.EnvWorkerID, &w.WorkerID)
	p.dur(schema.EnvLeaseTTL, &w.LeaseTTL)
	p.dur(schema.EnvHeartbeatEvery, &w.HeartbeatEvery)
	p.dur(schema.EnvSafetyMargin, &w.SafetyMargin)
	p.dur(schema.EnvCheckpointEvery, &w.CheckpointEvery)
	p.dur(schema.EnvStoreRPCTimeout, &w.StoreTimeout)
	p.int(schema.EnvMaxConcurrentWrites, &w.MaxConcurrentWrites)
	p.dur(schema.EnvReconcileEvery, &w.ReconcileEvery)
	p.dur(schema.EnvAuditEvery, &w.AuditEvery)
	p.dur(schema.EnvRebalanceEvery, &w.RebalanceEvery)
	p.str(schema.EnvAdvertiseAddr, &w.AdvertiseAddr)
	p.dur(schema.EnvMinHold, &w.MinHold)
	p.int(schema.EnvRebalanceMoves, &w.RebalanceMaxMoves)
	p.int(schema.EnvMaxSessions, &w.MaxSessions)
	p.float(schema.EnvClaimsPerSecond, &w.ClaimsPerSecond)
	p.float(schema.EnvFleetClaimsPerSecond, &w.FleetClaimsPerSecond)
	p.dur(schema.EnvQueueWait, &c.QueueWait)
	p.dur(schema.EnvDialTimeout, &w.DialTimeout)
	p.dur(schema.EnvPingEvery, &w.PingEvery)
	p.dur(schema.EnvPingTimeout, &w.PingTimeout)
	p.dur(schema.EnvCloseGrace, &w.CloseGrace)
	p.dur(schema.EnvReconnectMin, &w.ReconnectMin)
	p.dur(schema.EnvReconnectMax, &w.ReconnectMax)
	var limit int
	if p.int(schema.EnvReadLimit, &limit) {
		w.ReadLimit = int64(limit)
	}
	p.int(schema.EnvSinkAttempts, &w.SinkAttempts)
	p.int(schema.EnvMaxDialFailures, &w.MaxDialFailures)
	p.str(schema.EnvTenureHeader, &w.TenureHeader)
	p.str(schema.EnvZone, &w.Zone)
	p.dur(schema.EnvStandbyCheckEvery, &w.StandbyCheckEvery)
	p.str(schema.EnvExtraCAFile, &w.ExtraCAFile)
	resume := !w.NoTLSResumption
	p.bool(schema.EnvTLSResumption, &resume)
	w.NoTLSResumption = !resume
	p.float(schema.EnvDialsPerHost, &w.DialsPerHost)
	p.int(schema.EnvHandshakesInFlight, &w.HandshakesInFlight)
	p.int(schema.EnvHandshakesPerHost, &w.HandshakesPerHost)
	var switchBudget int
	if p.int(schema.EnvSwitchBufferBudget, &switchBudget) {
		w.SwitchBufferBudget = int64(switchBudget)
	}
	var frameBudget int
	if p.int(schema.EnvLargeFrameBudget, &frameBudget) {
		w.LargeFrameBudget = int64(frameBudget)
	}
	p.dur(schema.EnvSecretCacheTTL, &w.SecretCacheTTL)
	p.dur(schema.EnvShutdownDeadline, &w.ShutdownDeadline)
	p.int(schema.EnvShutdownInFlight, &w.ShutdownInFlight)
	p.strOrEmpty(schema.EnvAdminAddr, &w.AdminAddr) // set and empty: no admin server
	p.bool(schema.EnvAdminPprof, &w.AdminPprof)
	p.str(schema.EnvAdminToken, &w.AdminToken)
	p.dur(schema.EnvMetricsEvery, &w.MetricsEvery)
	p.str(schema.EnvMetricsNS, &w.MetricsNamespace)
	p.str(schema.EnvEnvironment, &w.Environment)
	p.str(schema.EnvLogLevel, &w.LogLevel)
	p.str(schema.EnvSink, &c.Sink.Kind)
	if v, ok := lookup(schema.EnvAllowedHosts); ok {
		w.AllowedHosts = netguard.SplitHosts(v)
	}
	if v, ok := lookup(schema.EnvDialLimits); ok {
		ls, err := session.ParseDialLimits(v)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s: %w", schema.EnvDialLimits, err))
		}
		w.DialLimits = ls
	}
	if v, ok := lookup(schema.EnvSecretHosts); ok {
		b, err := secretref.ParseBindings(v)
		if err != nil {
			p.errs = append(p.errs, err)
		}
		w.SecretHosts = b
	}
	if v, ok := lookup(schema.EnvAllowPrivateIPs); ok && v != "" {
		pol, err := netguard.ParsePolicy(v)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s: %w", schema.EnvAllowPrivateIPs, err))
		} else {
			w.AllowPrivateIPs = pol
		}
	}
	p.str(schema.EnvTableName, &c.TableName)
	p.str(schema.EnvQueueURL, &c.QueueURL)
	sk := &c.Sink
	p.str(schema.EnvOutputQueueURL, &sk.OutputQueueURL)
	p.str(schema.EnvOutputStream, &sk.OutputStream)
	p.bool(schema.EnvSinkBatching, &sk.Batching)
	p.dur(schema.EnvSinkMaxDelay, &sk.Batch.MaxDelay)
	p.dur(schema.EnvSinkPackWait, &sk.Batch.PackWait)
	p.int(schema.EnvSinkMaxBatch, &sk.Batch.MaxCount)
	p.int(schema.EnvSinkMaxBatchBytes, &sk.Batch.MaxBytes)
	p.int(schema.EnvSinkInFlight, &sk.Batch.MaxInFlight)
	p.int(schema.EnvSinkBufferBytes, &sk.Batch.SessionBufferBytes)
	p.dur(schema.EnvSinkRequestTimeout, &w.SinkRequestTimeout)
	p.int(schema.EnvSinkPermanentAttempts, &sk.Batch.PermanentAttempts)
	p.int(schema.EnvSinkRepeatFailures, &sk.Batch.RepeatFailures)
	p.int(schema.EnvSinkKinesisAggregateBytes, &sk.Kinesis.AggregateBytes)
	p.int(schema.EnvSinkKinesisHashBuckets, &sk.Kinesis.HashBuckets)
	p.int(schema.EnvSinkSQSPackBytes, &sk.SQS.PackBytes)
	var budget int
	if p.int(schema.EnvSinkBufferBudget, &budget) {
		sk.Batch.BufferBudget = int64(budget)
	}
	if len(p.errs) > 0 {
		return c, errors.Join(p.errs...)
	}
	return c, nil
}

type parser struct {
	lookup func(string) (string, bool)
	errs   []error
}

func (p *parser) get(name string) (string, bool) {
	v, ok := p.lookup(name)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

func (p *parser) str(name string, dst *string) {
	if v, ok := p.get(name); ok {
		*dst = v
	}
}

// strOrEmpty is str for a variable whose empty value means something (off):
// set to "" it gives "", unset it keeps the default.
func (p *parser) strOrEmpty(name string, dst *string) {
	if v, ok := p.lookup(name); ok {
		*dst = strings.TrimSpace(v)
	}
}

func (p *parser) dur(name string, dst *time.Duration) {
	if v, ok := p.get(name); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s=%q: not a duration (e.g. 10s, 500ms)", name, v))
			return
		}
		*dst = d
	}
}

func (p *parser) int(name string, dst *int) bool {
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

func (p *parser) bool(name string, dst *bool) {
	if v, ok := p.get(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s=%q: not a boolean (true or false)", name, v))
			return
		}
		*dst = b
	}
}

func (p *parser) float(name string, dst *float64) {
	if v, ok := p.get(name); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			p.errs = append(p.errs, fmt.Errorf("%s=%q: not a number", name, v))
			return
		}
		*dst = f
	}
}

// Validate checks every setting (with the derived defaults, Resolved): the
// worker's (streamer.Config.Problems), the sink's (registry's
// Config.Problems), the binary's own, and the environment's variable
// names; the error lists all problems.
func (c Config) Validate() error {
	c = c.Resolved()
	errs := slices.Clone(c.unknownEnv)
	errs = append(errs, c.Worker.Problems()...)
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.QueueWait < 0 || c.QueueWait > 20*time.Second {
		bad("%s must be within 0s..20s", schema.EnvQueueWait)
	}
	errs = append(errs, c.Sink.Problems()...)
	errs = append(errs, c.memoryProblems()...)
	if c.TableName == "" {
		bad("%s is empty", schema.EnvTableName)
	}
	if len(errs) > 0 {
		return fmt.Errorf("worker config: %w", errors.Join(errs...))
	}
	return nil
}

// memoryProblems checks that the worker stays within its memory (c is
// Resolved): a worker whose memory limit is known has room for every
// session's measured memory and small-frame allowance
// (schema.SessionMemory), plus the large-frame budget, the sink buffer
// budget and the switch budget. Each budget bounds what it covers whatever
// MaxSessions is: a message larger than the allowance waits for the
// large-frame budget (so the read limit is one message's bound, not every
// session's reservation), a full sink budget stalls reads, a full switch
// budget gives a planned reconnect's new connection up. The budgets, not
// MaxSessions × ReadLimit, SessionBufferBytes or session.MaxSwitchBytes,
// are what counts.
func (c Config) memoryProblems() []error {
	var errs []error
	budget := c.Sink.Batch.BufferBudget
	if budget < 0 {
		errs = append(errs, fmt.Errorf("%s %d must not be negative (0: a quarter of the memory limit)", schema.EnvSinkBufferBudget, budget))
	}
	w := c.Worker
	if c.MemoryLimit > 0 && w.MaxSessions > 0 && w.SwitchBufferBudget >= 0 && w.LargeFrameBudget >= 0 {
		need := MemoryNeed(w.MaxSessions, w.LargeFrameBudget, budget, w.SwitchBufferBudget)
		if need > c.MemoryLimit {
			errs = append(errs, fmt.Errorf("%s %d × %d bytes (a session's measured memory and small-frame allowance) + %s %d + %s %d + %s %d = %d bytes exceeds the memory limit %d (%s or the container's): lower one of them",
				schema.EnvMaxSessions, w.MaxSessions, schema.SessionMemory, schema.EnvLargeFrameBudget, w.LargeFrameBudget,
				schema.EnvSinkBufferBudget, budget, schema.EnvSwitchBufferBudget, w.SwitchBufferBudget, need, c.MemoryLimit, schema.EnvGoMemLimit))
		}
	}
	return errs
}

// MemoryNeed is the memory a worker of maxSessions sessions and these
// budgets needs at most (bytes): the check memoryProblems makes against the
// memory limit (infra/stacks sizes its tasks with the same arithmetic).
func MemoryNeed(maxSessions int, largeFrames, sink, switchBuf int64) int64 {
	return int64(maxSessions)*schema.SessionMemory + largeFrames + sink + switchBuf
}
