package simddb

import (
	"time"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/testkit/ddbrules"
)

// Config is the simulated table's behaviour. AWS() and Off() are the two
// starting points; a simulation copies one and changes what it needs.
type Config struct {
	// Clock is the store's time: when it applies a write, when index
	// images are due, which second a unit is metered in, and the timers
	// its latency sleeps on. Nil: clock.Real, whose timers are virtual
	// inside a testing/synctest bubble (the fleet simulator's way). A
	// clock.Fake works too: a call with latency then waits for the driver's
	// Advance.
	Clock clock.Clock
	// Seed fixes every draw (latency, lag): 0 is 1. Each draw comes from a
	// stream of its own (per operation and key, per index and item), so
	// the draws of one key do not depend on how calls on other keys
	// interleave.
	Seed uint64
	// Table names the table (the ARNs of its throttling reasons).
	Table string
	// Latency is the service latency of one DynamoDB request, by its
	// operation (GetItem, BatchGetItem, Query, PutItem, UpdateItem); a
	// call sleeps the sum of its requests' (half of its first before it
	// is applied, the rest after). Operations not listed: none.
	Latency map[string]ddbrules.Dist
	// Lag is how long a write takes to reach each global secondary index,
	// by index name, drawn per write and index; DefaultLag for an index
	// not listed.
	Lag        map[string]ddbrules.Dist
	DefaultLag ddbrules.Dist
	// ThrottledLag is added to an index's lag while a write was throttled
	// on that index within the last ThrottledFor: an index that cannot
	// take its writes falls behind (DynamoDB documents the back-pressure,
	// not the lag; the numbers are the model's assumption).
	ThrottledLag time.Duration
	ThrottledFor time.Duration
	// Retry is the SDK's retrying of a throttled request, as the worker's
	// clients retry it.
	Retry Retry
	// Throughput is the throttling model (ddbrules.AWSThroughput: the
	// documented limits); the zero Throughput throttles nothing.
	Throughput ddbrules.Throughput
}

// Retry is how many attempts a call makes when its attempts are throttled
// (at least 1) and the longest wait between two: the liveness path's
// (dynamostore.Liveness: register, heartbeat, declare dead, leave, the
// worker reads) and the rest's (the bulk client's). The waits are the
// SDK's jittered exponential backoff; the SDK's client-side retry budget
// is not modelled. The zero Retry: one attempt, a throttled call fails at
// once.
type Retry struct {
	MaxAttempts         int
	MaxBackoff          time.Duration
	LivenessMaxAttempts int
	LivenessMaxBackoff  time.Duration
}

// WorkerRetry is the worker's retrying (shared/awsconfig): the bulk client's
// BulkRetryer(3) with waits of at most BulkMaxBackoff, and the liveness
// client's LivenessRetryer at the default RPC timeout.
func WorkerRetry() Retry {
	return Retry{
		MaxAttempts: 3, MaxBackoff: awsconfig.BulkMaxBackoff,
		LivenessMaxAttempts: awsconfig.LivenessMaxAttempts,
		LivenessMaxBackoff:  awsconfig.LivenessMaxBackoff(lease.DefaultConfig("").RPCTimeout),
	}
}

// AWS is DynamoDB as documented (testkit/ddbrules): AWS latency, lag on
// each index, per-key and per-index-key buckets, the on-demand table's
// warm throughput, ramp and quota; an index throttled lags 5 s more for
// 10 s (the model's assumption); the worker's SDK retries (WorkerRetry).
func AWS() Config {
	return Config{
		Table:        "sessions",
		Latency:      ddbrules.AWSLatency(),
		DefaultLag:   ddbrules.AWSLag(),
		ThrottledLag: 5 * time.Second,
		ThrottledFor: 10 * time.Second,
		Throughput:   ddbrules.AWSThroughput(),
		Retry:        WorkerRetry(),
	}
}

// Off adds nothing to the memory store's behaviour but the meters: no
// latency, no lag, no throttling.
func Off() Config { return Config{Table: "sessions"} }

func (c Config) lagOf(index string) ddbrules.Dist {
	if d, ok := c.Lag[index]; ok {
		return d
	}
	return c.DefaultLag
}
