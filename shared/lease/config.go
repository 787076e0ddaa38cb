package lease

// The Keeper's configuration: its defaults and their checks.

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the ownership timings of one worker.
type Config struct {
	Owner string
	// Host and Pid say where the worker runs (its registration writes them
	// into its record, for people finding the process: wsfleet workers);
	// nothing in the protocol reads them.
	Host string
	Pid  int
	// Zone is the availability zone the worker runs in ("": unknown); its
	// registration writes it (WorkerRecord.Zone) for standby placement.
	Zone string
	// BootID identifies this process's registration ("": NewKeeper draws
	// one). Two processes never share one.
	BootID string
	// TTL is the liveness TTL: how long a successful heartbeat keeps the
	// worker alive in others' eyes. Observers wait at least the larger of
	// their own TTL and the one in the worker's record.
	TTL time.Duration
	// HeartbeatEvery is the heartbeat period.
	HeartbeatEvery time.Duration
	// SafetyMargin: the worker stops trusting its sessions at (monotonic
	// send time of its last successful heartbeat) + TTL - SafetyMargin.
	SafetyMargin time.Duration
	// CheckpointEvery is the default checkpoint interval of a session
	// (written only when last_seq advanced).
	CheckpointEvery time.Duration
	// Periodic reports whether a session, as its item stands, gets periodic
	// checkpoints: the worker's decision from the spec, which this package
	// carries without reading (nil: every session does). A session without
	// them still writes the final one with its release, hand-off or fail,
	// and the explicit ones (Keeper.Checkpoint); it is asked again when a
	// new generation is installed (Held.SetItem).
	Periodic func(Item) bool
	// RPCTimeout bounds each store call the Keeper makes.
	RPCTimeout time.Duration
	// RetryEvery is the wait before retrying a checkpoint that failed
	// transiently.
	RetryEvery time.Duration
	// MaxConcurrentWrites bounds checkpoints in flight.
	MaxConcurrentWrites int
	// Tick is how often the Keeper checks deadlines and due checkpoints.
	Tick time.Duration
	// Watchers is how many workers watch each worker (rendezvous hashing).
	Watchers int
	// RefreshEvery is how often the Keeper lists the alive workers (the
	// watch targets and the AliveWorkers count).
	RefreshEvery time.Duration
	// HandoffBound is how long a directed hand-off keeps a session for its
	// receiver: after it (on this worker's wall clock; a liveness matter
	// only, never safety), anyone may take it.
	HandoffBound time.Duration
	// IndexLagBound is what the Keeper assumes of the table's indexes: a
	// write is in them within this long of being sent (applied, then
	// propagated; DynamoDB's global secondary indexes are eventually
	// consistent with no upper bound). A GONE worker moves to DONE only when
	// a by_owner query sent this long after this Keeper first saw it gone
	// still finds nothing (MayMarkDone). Default 30 s: AWS says an index
	// catches up "within a fraction of a second under normal conditions"
	// and longer "in some unlikely failure scenarios" without a bound; the
	// longest lag reported in the wild we know of is 15 s (guardian/grid
	// #3641, #3642), so 30 s is twice that, and far above an acquire's
	// RPCTimeout (a write in flight when the worker stopped). A larger bound
	// costs only reads (each reconciling worker queries a GONE worker's
	// by_owner every pass until it is DONE) and never delays a takeover.
	IndexLagBound time.Duration
	// UnownedGrace is how long the reconciler leaves a session its
	// listings show unowned to the work queue's fast path (its start
	// notification, normally taken within milliseconds): it tries it only
	// on a listing at least this long after the first that showed it
	// (Candidate.Fresh). 0 (the default): on first sight. A lost
	// notification waits for the first listing past the grace; a fresh
	// start is not raced by a reconcile pass that listed it a moment
	// before the fast path's acquire (each such race a refused write).
	// The worker sets it to half a reconcile interval when it consumes a
	// work queue (claim.FastPathGrace).
	UnownedGrace time.Duration
	// GoneGrace is how long the reconciler leaves the sessions of a worker
	// that died or left to that worker's takeover (the receivers its
	// declarer or its drain told, and the start notifications sent for the
	// rest), counted from when this Keeper first knew the worker gone:
	// Orphans does not list them (nor query its by_owner) within it, unless
	// EndGoneGrace said the takeover could not place them all. 0 (the
	// default): at once. Each reconcile pass listing the same dead
	// workers' sessions as the receivers and the queue's consumers took
	// them lost most of its claims (refused conditional writes, each in
	// the claim pace): the worker sets it (claim.TakeoverGrace) when it
	// consumes a work queue, which its takeovers announce on.
	GoneGrace time.Duration
	// Flowing, when set, reports whether the work queue is bringing this
	// worker start notifications now: GoneGrace applies only while it
	// does. A gone worker nobody announces the sessions of (a death
	// declared by a watcher that died before its takeover, a worker that
	// left with a session it could not release, a restart whose
	// notification was lost) is then listed at once, as without a grace,
	// when the queue is quiet. nil: GoneGrace always applies.
	Flowing func() bool
	// GoneGraceMax extends GoneGrace up to this long while Announcing
	// reports that the work queue brings announced tenures (starts naming
	// the tenure a takeover or a leaver found them in): a mass death's
	// announcements are taken over minutes (the claim budget), and a pass
	// listing the dead workers' sessions past a fixed grace lost most of
	// its claims to their consumers (GoneGraceHolds). 0 or below
	// GoneGrace: no extension.
	GoneGraceMax time.Duration
	// Announcing, when set, reports whether the work queue brings this
	// worker announced tenures now (GoneGraceMax). nil: never.
	Announcing func() bool
}

// DefaultConfig returns the default timings: TTL 10 s, heartbeat every 1 s,
// safety margin 2 s, checkpoints every 60 s.
func DefaultConfig(owner string) Config {
	return Config{
		Owner:               owner,
		TTL:                 10 * time.Second,
		HeartbeatEvery:      time.Second,
		SafetyMargin:        2 * time.Second,
		CheckpointEvery:     time.Minute,
		RPCTimeout:          2 * time.Second,
		RetryEvery:          500 * time.Millisecond,
		MaxConcurrentWrites: 64,
		Tick:                50 * time.Millisecond,
		Watchers:            2,
		RefreshEvery:        5 * time.Second,
		HandoffBound:        5 * time.Second,
		IndexLagBound:       30 * time.Second,
	}
}

// DoneSweepEvery is how often a Keeper looks again for the sessions of the
// DONE workers rendezvous hashing gives it (ten index-lag bounds, 5 min at
// the default): the fallback for an index lagging beyond IndexLagBound,
// until the DONE record expires (schema.EndedRecordTTLSeconds).
func (c Config) DoneSweepEvery() time.Duration { return 10 * c.IndexLagBound }

// WatchEvery is how often a watcher reads the records it watches: half a
// heartbeat, so it first sees a heartbeat at most that long after it was
// applied (crash failover ≤ TTL + WatchEvery + the takeover).
func (c Config) WatchEvery() time.Duration { return c.HeartbeatEvery / 2 }

// listTimeout bounds one listing of the reconcile pass or a takeover (the
// by_unowned shards, the GONE and DONE workers, a worker's by_owner): 4 ×
// RPCTimeout (8 s at the defaults), room for the SDK's retries of a
// throttled page (see rpc in discovery.go).
func (c Config) listTimeout() time.Duration { return 4 * c.RPCTimeout }

// Validate checks that the timings can keep the protocol safe.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if c.Owner == "" {
		bad("owner is empty")
	}
	if c.TTL <= 0 || c.HeartbeatEvery <= 0 || c.CheckpointEvery <= 0 || c.RPCTimeout <= 0 || c.Tick <= 0 || c.RetryEvery <= 0 || c.RefreshEvery <= 0 || c.HandoffBound <= 0 {
		bad("TTL, HeartbeatEvery, CheckpointEvery, RPCTimeout, RetryEvery, Tick, RefreshEvery and HandoffBound must be positive")
	}
	if c.SafetyMargin <= c.Tick {
		bad("SafetyMargin %s must exceed Tick %s", c.SafetyMargin, c.Tick)
	}
	if c.TTL-c.SafetyMargin < c.HeartbeatEvery+c.RPCTimeout {
		bad("TTL %s - SafetyMargin %s leaves no room for a heartbeat every %s that may take %s", c.TTL, c.SafetyMargin, c.HeartbeatEvery, c.RPCTimeout)
	}
	if c.IndexLagBound <= c.RPCTimeout {
		bad("IndexLagBound %s must exceed RPCTimeout %s (an acquire in flight is applied within it)", c.IndexLagBound, c.RPCTimeout)
	}
	if c.MaxConcurrentWrites < 1 {
		bad("MaxConcurrentWrites must be at least 1")
	}
	if c.Watchers < 1 {
		bad("Watchers must be at least 1")
	}
	if c.GoneGrace < 0 {
		bad("GoneGrace %s must not be negative", c.GoneGrace)
	}
	if c.GoneGraceMax < 0 {
		bad("GoneGraceMax %s must not be negative", c.GoneGraceMax)
	}
	if c.UnownedGrace < 0 {
		bad("UnownedGrace %s must not be negative", c.UnownedGrace)
	}
	if len(errs) > 0 {
		return fmt.Errorf("lease config: %w", errors.Join(errs...))
	}
	return nil
}
