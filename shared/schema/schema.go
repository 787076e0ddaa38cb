// Package schema owns the names of everything wsfleet stores and the settings
// every component reads: the sessions table, its attributes, its index, the
// desired states and the environment variable names. It has no dependencies so
// that the infra app can import it without pulling in runtime code.
package schema

import (
	"strconv"
	"strings"
)

// DefaultTableName is the table name used by the local stack and tests.
const DefaultTableName = "wsfleet-sessions"

// Attribute names of a session item. One item per connection.
//
// checkpoint_every is stored twice, as checkpoint_every_ms and in the spec,
// for this reason (the one place that gives it): the ownership core
// (shared/lease and its stores) schedules a tenure's checkpoints from the
// session item it acquires, and carries the spec without reading it (it
// imports no shared/source, which shared/spec embeds: shared/archtest), so
// it reads the interval as a number. Ingest writes both from one checked
// spec in the same start (functions/ingest/internal/sessions/write.go), so
// they differ only on a hand-edited item; the worker reads the spec's too
// (workers/streamer/ckptpolicy.go). Removing this attribute takes a worker
// callback that decodes the spec for the core (as lease.Config.Periodic
// does) and a rollout in which older workers, which read only this, fall
// back to their default interval.
const (
	AttrPk               = "Pk"                    // S: the connection_id
	AttrDesiredState     = "desired_state"         // S: STARTED | STOPPED (written only by ingest)
	AttrIndexShard       = "index_shard"           // S: IndexShardFor(desired_state, Pk), written with desired_state (the by_state index)
	AttrSpec             = "spec"                  // S: the session's desired configuration as JSON (shared/spec: ws_url, headers, seq path, resume, subprotocols, redirects, the source protocol) on the spec item (SpecKey); only ingest writes it, the ownership core carries it unread. On a session item only as an older ingest wrote it (inline, without spec_ref)
	AttrSpecRef          = "spec_ref"              // S: the ref of the session's spec item (SpecKey(Pk, spec_ref)): SpecRef(generation it was first stored at, its content); written by ingest with the generation, after the spec item
	AttrGeneration       = "generation"            // N: bumped when the spec (its stored form) changes, and on restart
	AttrLeaseOwner       = "lease_owner"           // S: worker id of the owner; absent = no owner (new, released, failed, disowned: stopped when its owner ended). The by_owner index key
	AttrLeaseEpoch       = "lease_epoch"           // N: per-session fencing token, +1 on every acquire, only grows
	AttrUnownedShard     = "unowned_shard"         // S: UnownedShardOf(Pk) while STARTED, not FAILED and without owner; absent otherwise (the sparse by_unowned index)
	AttrCheckpointEvery  = "checkpoint_every_ms"   // N: the session's checkpoint interval, the spec's checkpoint_every again, in ms (why: above); absent = the worker's default
	AttrHandoffTo        = "handoff_to"            // S: the worker a rebalancing move released the session to; removed by the next acquire
	AttrHandoffAtMs      = "handoff_at_ms"         // N: when (the releasing worker's wall clock)
	AttrLastSeq          = "last_seq"              // N: last checkpointed sequence number; written only by the owner (owner and epoch), only forward; no index key nor projected
	AttrReleaseSeq       = "release_seq"           // N: the final checkpoint a release or fail wrote with the session item (one write); a session resumes after the larger of it and last_seq
	AttrCreatedAtMs      = "created_at_ms"         // N
	AttrUpdatedAtMs      = "updated_at_ms"         // N: last desired-state write
	AttrFailedGeneration = "failed_generation"     // N: the generation at which a worker gave up on the source (FAILED while = generation and STARTED)
	AttrLastError        = "last_error"            // S: the last connection error a worker saw (short; never a header value or URL query)
	AttrLastErrorAtMs    = "last_error_at_ms"      // N: when last_error was seen
	AttrLastErrorGen     = "last_error_generation" // N: the generation last_error was seen at (absent on items written before it was recorded)
	AttrLastErrorEpoch   = "last_error_epoch"      // N: the lease epoch (tenure) that recorded last_error (absent likewise)
	// Hot standby (spec "standby"): a second, non-delivering connection held
	// by another worker. Only the standby's worker writes these (assign,
	// drop), conditionally on its own standby epoch; an acquire by the
	// standby's worker (its promotion) removes standby. No index key.
	AttrStandby           = "standby"             // S: worker id holding the session's standby; absent = none
	AttrStandbyEpoch      = "standby_epoch"       // N: +1 on every standby assignment, only grows (the standby's fencing token)
	AttrStandbyRefusedGen = "standby_refused_gen" // N: the generation at which the source refused a second connection (no standby is asked for until a new generation)
	AttrStandbyError      = "standby_error"       // S: why the last standby was dropped (short; no URL, header or message)

	// AttrTenureKey is written by every acquire: the hash of a secret only
	// the acquiring worker holds (lease.TenureKeyOf), which a directed
	// hand-off's receiver must name to take the tenure from its live owner
	// (lease.Given). No index key.
	AttrTenureKey = "tenure_key" // S: 32 hex characters; absent = nobody can give the tenure
)

// Spec items: the session's configuration (spec), kept out of the session
// item so that the ownership writes (acquire, release, handoff, fail,
// disown) and the checkpoints, which are billed on the session item's size,
// stay at 1 write unit however large the headers are. One immutable item per stored
// configuration, Pk SpecKey(connection_id, ref), holding only spec. Ingest
// puts it before the session write that stores its ref (spec_ref), and
// deletes the one it superseded after that write: a reader that finds no
// spec item for the ref it read re-reads the session (it names a newer
// one). '#' is in no connection id, so the keys collide with nothing.
const SpecKeyPrefix = "spec#"

// SpecKey is the Pk of connection id's spec item ref.
func SpecKey(id, ref string) string { return SpecKeyPrefix + id + "#" + ref }

// Worker records: one per worker process, Pk WorkerKey(worker_id). A worker
// heartbeats its own record (one conditional write per heartbeat, nothing
// indexed changes); another worker may declare it DEAD by a conditional
// write; a graceful exit marks it LEFT. DEAD and LEFT records carry
// expires_at (the table's TTL attribute) one day after they ended.
const (
	WorkerKeyPrefix = "worker#"

	AttrWorkerState     = "w_state"          // S: ALIVE | DEAD | LEFT
	AttrWorkerEpoch     = "w_epoch"          // N: liveness epoch; declaring the worker dead increments it
	AttrHeartbeatSeq    = "hb_seq"           // N: heartbeat counter; every heartbeat attempt carries a new, larger value
	AttrHeartbeatAtMs   = "hb_at_ms"         // N: wall-clock send time of the last heartbeat (informational)
	AttrWorkerTTLMs     = "ttl_ms"           // N: the worker's liveness TTL; observers wait at least this long
	AttrWorkerLoad      = "load"             // N: sessions held
	AttrWorkerCapacity  = "capacity"         // N: WSFLEET_MAX_SESSIONS
	AttrWorkerAdminAddr = "admin_addr"       // S: the worker's admin server
	AttrWorkerDraining  = "draining"         // BOOL: shutting down (takes nothing, counts for no fair share)
	AttrWorkerMoves     = "moves_per_min"    // N: sessions it handed off to rebalance over the last minute
	AttrMailbox         = "mailbox"          // SS: MailboxEntry elements: sessions the owner must re-read (stop, new generation)
	AttrWorkerList      = "w_list"           // S: WorkerListAlive | WorkerListGone | WorkerListDone (the by_worker_list index)
	AttrStartedAtMs     = "started_at_ms"    // N: registration time
	AttrEndedAtMs       = "ended_at_ms"      // N: when it was declared DEAD or LEFT
	AttrDeclaredBy      = "declared_dead_by" // S: the worker that declared it DEAD
	AttrBootID          = "boot_id"          // S: drawn once per worker process: a registration retried after it applied knows its own record; another process's is a reused id
	AttrWorkerHost      = "host"             // S: the worker's host name (informational)
	AttrWorkerPid       = "pid"              // N: the worker's process id (informational)
	AttrWorkerZone      = "zone"             // S: the availability zone the worker runs in (a standby is placed in another one); "" when unknown
)

// WorkerKey is the Pk of worker id's record.
func WorkerKey(id string) string { return WorkerKeyPrefix + id }

// MailboxEntry is the element ingest adds to the owner's mailbox after a
// desired-state write of session id: the id with the generation and the
// desired state the write left ("m-42@3:STOPPED"). Every write that changes
// the desired state changes that pair (a start of a new configuration or
// after a stop bumps the generation; a stop changes the state), so a stop
// written after the owner re-read the session is a new element, which the
// ack of the element it re-read for (a heartbeat deletes exactly the acked
// elements from the set) cannot remove. '@' is not in a connection id.
func MailboxEntry(id string, generation int64, state string) string {
	return id + "@" + strconv.FormatInt(generation, 10) + ":" + state
}

// MailboxID is the connection id of a mailbox entry (an entry without '@',
// as an older ingest wrote them, is the id itself).
func MailboxID(entry string) string {
	id, _, _ := strings.Cut(entry, "@")
	return id
}

// Worker states.
const (
	WorkerAlive = "ALIVE"
	WorkerDead  = "DEAD"
	WorkerLeft  = "LEFT"
)

// Values of w_list (the by_worker_list partition key): alive workers; dead
// or left workers that may still own sessions (reconcilers take them over,
// then move the record to done); and ended workers that own none.
const (
	WorkerListAlive = "ALIVE"
	WorkerListGone  = "GONE"
	WorkerListDone  = "DONE"
)

// EndedRecordTTLSeconds is how long a DEAD or LEFT record stays (expires_at =
// end + one day).
const EndedRecordTTLSeconds = 24 * 60 * 60

// Nonce items: one per signed ingest request, so a captured request cannot
// be replayed within its signature window. Their key cannot collide with a
// connection_id ('#' is not in its grammar), they carry no index attribute,
// and DynamoDB's TTL deletes them after AttrExpiresAt (the table's TTL
// attribute).
const (
	NonceKeyPrefix = "nonce#"
	AttrExpiresAt  = "expires_at" // N: epoch seconds; the table's TTL attribute
)

// NonceKey is the Pk of the item that remembers a request nonce.
func NonceKey(nonce string) string { return NonceKeyPrefix + nonce }

// The table's global secondary indexes. None of their keys (or projected
// attributes) changes on a heartbeat or a checkpoint: they are written only
// when a desired state or an owner changes.
const (
	// IndexByState (index_shard, Pk; KEYS_ONLY) lists sessions by desired
	// state for ingest's list. Written on start and stop.
	IndexByState = "by_state"
	// IndexByOwner (lease_owner; projects lease_epoch, desired_state,
	// generation) lists the sessions a worker owns: a reconciler's way to the
	// sessions of a dead worker, and an owner's audit of its own. Written
	// when ownership moves (and on start/stop of an owned session).
	IndexByOwner = "by_owner"
	// IndexByUnowned (unowned_shard, Pk; KEYS_ONLY) is sparse: only STARTED
	// sessions without owner (new, released, restarted). Written when one is
	// created, released or acquired.
	IndexByUnowned = "by_unowned"
	// IndexByWorkerList (w_list, Pk; KEYS_ONLY) lists worker records by
	// ALIVE / GONE / DONE. Written when a worker joins, dies or leaves.
	IndexByWorkerList = "by_worker_list"
)

// IndexShards is how many index_shard (and unowned_shard) values the
// sessions are spread over, so that no index key value takes more than
// 1/IndexShards of the writes (one key value takes about 1,000 write
// units/s). It is part of the stored data: changing it means rewriting both
// attributes on every item.
const IndexShards = 16

// UnownedShardOf is the unowned_shard value of connection id: "U#07".
func UnownedShardOf(id string) string {
	k := IndexShardOf(id)
	return "U#" + string(rune('0'+k/10)) + string(rune('0'+k%10))
}

// UnownedShardKey is the unowned_shard value of shard k.
func UnownedShardKey(k int) string {
	return "U#" + string(rune('0'+k/10)) + string(rune('0'+k%10))
}

// IndexShardOf is the shard (0..IndexShards-1) of connection id: FNV-1a.
func IndexShardOf(id string) int {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return int(h % IndexShards)
}

// IndexShardKey is the index_shard value of shard k of state: "STARTED#07".
func IndexShardKey(state string, k int) string {
	return state + "#" + string(rune('0'+k/10)) + string(rune('0'+k%10))
}

// IndexShardFor is the index_shard value of connection id in state.
func IndexShardFor(state, id string) string { return IndexShardKey(state, IndexShardOf(id)) }

// Key attribute types, as DynamoDB names them.
const (
	TypeString = "S"
	TypeNumber = "N"
)

// Desired states.
const (
	StateStarted = "STARTED"
	StateStopped = "STOPPED"
)

// Notification types sent on the work queue.
const (
	NotifyStart = "start"
	NotifyStop  = "stop"
)

// Environment variable names shared by the deployables and the infra app.
const (
	EnvTableName      = "WSFLEET_TABLE"
	EnvQueueURL       = "WSFLEET_QUEUE_URL"
	EnvOutputQueueURL = "WSFLEET_OUTPUT_QUEUE_URL"
	EnvOutputStream   = "WSFLEET_OUTPUT_STREAM" // the kinesis sink's stream (name or ARN)
	EnvMetricsNS      = "WSFLEET_METRICS_NAMESPACE"
	EnvEnvironment    = "WSFLEET_ENV"
)

// DefaultMetricsNamespace is the CloudWatch namespace of the EMF metrics.
const DefaultMetricsNamespace = "wsfleet"

// EnvFleetClaimsPerSecond (worker): the fleet's claim budget, shared by the
// alive workers (each claims at most it ÷ the alive workers); float,
// default 0 = none.
const EnvFleetClaimsPerSecond = "WSFLEET_FLEET_CLAIMS_PER_SECOND"

// Worker (streamer) environment variable names. Defaults live in the worker's
// config; infra sets them per environment.
const (
	EnvWorkerID         = "WSFLEET_WORKER_ID"           // default: hostname + random suffix
	EnvLeaseTTL         = "WSFLEET_LEASE_TTL"           // duration, default 10s: the liveness TTL
	EnvHeartbeatEvery   = "WSFLEET_HEARTBEAT_EVERY"     // duration, default 1s
	EnvCheckpointEvery  = "WSFLEET_CHECKPOINT_EVERY"    // duration, default 60s (a start may override it per session)
	EnvSafetyMargin     = "WSFLEET_SAFETY_MARGIN"       // duration, default 2s
	EnvReconcileEvery   = "WSFLEET_RECONCILE_EVERY"     // duration, default 5s
	EnvAuditEvery       = "WSFLEET_AUDIT_EVERY"         // duration, default 0: the audit on every reconcile pass
	EnvMaxSessions      = "WSFLEET_MAX_SESSIONS"        // int, default 1000
	EnvClaimsPerSecond  = "WSFLEET_CLAIMS_PER_SECOND"   // float, default 50
	EnvShutdownDeadline = "WSFLEET_SHUTDOWN_DEADLINE"   // duration, default 30s
	EnvShutdownInFlight = "WSFLEET_SHUTDOWN_IN_FLIGHT"  // int, default 4: sessions a graceful shutdown hands off at once, at least
	EnvRebalanceEvery   = "WSFLEET_REBALANCE_EVERY"     // duration, default 10s; 0 disables rebalancing
	EnvMinHold          = "WSFLEET_MIN_HOLD"            // duration, default 60s: only sessions held this long move
	EnvAdvertiseAddr    = "WSFLEET_ADVERTISE_ADDR"      // host:port other workers reach the admin server at; default: the listener's, 0.0.0.0 replaced by the host's private address
	EnvRebalanceMoves   = "WSFLEET_REBALANCE_MAX_MOVES" // int, default 0 = 10 % of the worker's sessions per round
	EnvAdminAddr        = "WSFLEET_ADMIN_ADDR"          // default 127.0.0.1:8081 (0.0.0.0:8081 in the container)
	EnvSink             = "WSFLEET_SINK"                // stdout | sqs | kinesis | discard
	EnvLogLevel         = "WSFLEET_LOG_LEVEL"           // debug | info | warn | error

	// Finer worker settings (defaults in the worker's config; infra leaves them).
	EnvDialTimeout         = "WSFLEET_DIAL_TIMEOUT"
	EnvPingEvery           = "WSFLEET_PING_EVERY"
	EnvPingTimeout         = "WSFLEET_PING_TIMEOUT"
	EnvCloseGrace          = "WSFLEET_CLOSE_GRACE"
	EnvReconnectMin        = "WSFLEET_RECONNECT_MIN"
	EnvReconnectMax        = "WSFLEET_RECONNECT_MAX"
	EnvReadLimit           = "WSFLEET_READ_LIMIT"
	EnvMetricsEvery        = "WSFLEET_METRICS_EVERY"
	EnvQueueWait           = "WSFLEET_QUEUE_WAIT"
	EnvSinkAttempts        = "WSFLEET_SINK_ATTEMPTS"
	EnvStoreRPCTimeout     = "WSFLEET_STORE_TIMEOUT"
	EnvAdminPprof          = "WSFLEET_ADMIN_PPROF"           // true: /debug/pprof/ on the admin server (loopback clients only)
	EnvAdminToken          = "WSFLEET_ADMIN_TOKEN"           // the admin server's bearer token (every endpoint but /healthz and /readyz; the fleet's workers share it); required unless the admin server listens on loopback only
	EnvMaxConcurrentWrites = "WSFLEET_MAX_CONCURRENT_WRITES" // checkpoints in flight, default 64
	EnvMaxDialFailures     = "WSFLEET_MAX_DIAL_FAILURES"     // int, default 20; 0 = never give up on a transient error
	EnvTLSResumption       = "WSFLEET_TLS_RESUMPTION"        // bool, default true: wss:// reconnects and claims resume TLS sessions from tickets
	EnvExtraCAFile         = "WSFLEET_EXTRA_CA_FILE"         // PEM bundle of CA certificates wss:// sources are verified against besides the system's roots; "" (default) = none
	EnvTenureHeader        = "WSFLEET_TENURE_HEADER"         // handshake header carrying "<worker id>/<lease epoch>"; "" (default) = none
	EnvZone                = "WSFLEET_ZONE"                  // the availability zone the worker runs in; "" (default) = the ECS task metadata's AvailabilityZone when ECS_CONTAINER_METADATA_URI_V4 is set, else unknown. A standby is placed in another zone than its owner when one is known
	EnvStandbyCheckEvery   = "WSFLEET_STANDBY_CHECK_EVERY"   // duration, default 30s: how often a standby re-reads its session item (owner, generation, stop, checkpoint); 0 = never (the owner's calls only)
	EnvDialsPerHost        = "WSFLEET_DIALS_PER_HOST"        // float, default 5 dials/s per source host; 0 = no limit
	EnvDialLimits          = "WSFLEET_DIAL_LIMITS"           // comma-separated host=max/window: a source's per-address connection-rate limit (stream.binance.com=300/5m); none by default
	EnvHandshakesInFlight  = "WSFLEET_HANDSHAKES_IN_FLIGHT"  // int, default 32: dials (TCP, TLS, WebSocket handshakes) at once over every host; 0 = no bound
	EnvHandshakesPerHost   = "WSFLEET_HANDSHAKES_PER_HOST"   // int, default 8, at most WSFLEET_HANDSHAKES_IN_FLIGHT: dials at once to one source host; 0 = no bound per host
	EnvSwitchBufferBudget  = "WSFLEET_SWITCH_BUFFER_BUDGET"  // int bytes, default 0 = a sixteenth of the memory limit (16 MiB when unknown): what planned reconnects' new connections hold before their switch and what standbys' windows hold, over every session
	// EnvLargeFrameBudget: int bytes, default 0 = an eighth of the memory
	// limit (DefaultLargeFrameBudget when unknown): what the messages
	// larger than SmallFrameAllowance being read hold, over every session.
	EnvLargeFrameBudget = "WSFLEET_LARGE_FRAME_BUDGET"
	// EnvSecretCacheTTL: duration, default 5m, at most 1h: how long the
	// worker reuses a secret's value (a session's {{secret:NAME}}) before
	// asking Secrets Manager again, so the longest a rotation takes to
	// reach the next reconnect.
	EnvSecretCacheTTL = "WSFLEET_SECRET_CACHE_TTL"

	// Sink batching (sqs and kinesis; defaults in the worker's config).
	EnvSinkBatching      = "WSFLEET_SINK_BATCHING"        // bool, default true; false: the sqs sink sends one SendMessage per message
	EnvSinkMaxDelay      = "WSFLEET_SINK_MAX_DELAY"       // duration, default 10ms: the longest a message waits for its batch to fill
	EnvSinkPackWait      = "WSFLEET_SINK_PACK_WAIT"       // duration, default 40ms: the longest a slow session's message waits to share a pack with other sessions'
	EnvSinkMaxBatch      = "WSFLEET_SINK_MAX_BATCH"       // int, default 0 = the sink's limit (sqs 10, kinesis 500)
	EnvSinkMaxBatchBytes = "WSFLEET_SINK_MAX_BATCH_BYTES" // int, default 0 = the sink's limit (sqs 1 MiB, kinesis 5 MiB)
	EnvSinkInFlight      = "WSFLEET_SINK_IN_FLIGHT"       // int, default 32: sink requests in flight per worker
	EnvSinkBufferBytes   = "WSFLEET_SINK_BUFFER_BYTES"    // int, default 4 MiB: a session's unacknowledged bytes before its reads stall
	// EnvSinkBufferBudget: int bytes, default 0 = a quarter of the worker's
	// memory limit: every session's unacknowledged sink bytes together.
	EnvSinkBufferBudget = "WSFLEET_SINK_BUFFER_BUDGET"
	// EnvSinkRequestTimeout: duration, default 0 = half the safety margin:
	// the bound of one sink request (and of one unbatched sink call).
	EnvSinkRequestTimeout = "WSFLEET_SINK_REQUEST_TIMEOUT"
	// EnvSinkPermanentAttempts: int, default 3: sends of a message the sink
	// refuses permanently before its session's on_sink_refusal applies.
	EnvSinkPermanentAttempts = "WSFLEET_SINK_PERMANENT_ATTEMPTS"
	// EnvSinkRepeatFailures: int, default 8: failures of one kind of a
	// message, while the sink takes other messages, before it counts as
	// refused for good (then its session's on_sink_refusal applies).
	EnvSinkRepeatFailures = "WSFLEET_SINK_REPEAT_FAILURES"
	// EnvSinkKinesisAggregateBytes: int bytes, default 51200 (the KPL's
	// AggregationMaxSize), 0 = off, at most 1 MiB: the bound of a kinesis
	// record aggregating a session's messages (KPL aggregated format).
	EnvSinkKinesisAggregateBytes = "WSFLEET_SINK_KINESIS_AGGREGATE_BYTES"
	// EnvSinkKinesisHashBuckets: int, default 16, 0 up to 1024: the hash
	// buckets whose sessions share the kinesis sink's aggregated records
	// (every record of a bucket carries its explicit hash key); 0 =
	// per-session aggregation, no explicit hash keys.
	EnvSinkKinesisHashBuckets = "WSFLEET_SINK_KINESIS_HASH_BUCKETS"
	// EnvSinkSQSPackBytes: int, default 64000: the largest pack of the
	// batched sqs sink (several envelopes of one session per SQS message,
	// its content-type attribute counted), under SQS's 64 KB billing
	// chunk; 0 turns packing off; at most SQS's 1 MiB message limit.
	EnvSinkSQSPackBytes = "WSFLEET_SINK_SQS_PACK_BYTES"
	// EnvGoMemLimit is the Go runtime's soft memory limit (infra sets it from
	// the task's memory; the worker derives its sink budget from it).
	EnvGoMemLimit = "GOMEMLIMIT"
)

// DefaultReadLimit is the worker's default largest message (WSFLEET_READ_LIMIT).
const DefaultReadLimit = 1 << 20

// The worker's memory arithmetic (workers/streamer/envconfig checks it;
// infra sizes its tasks with it): MaxSessions × SessionMemory + the large
// frame budget + the sink buffer budget + the switch budget ≤ GOMEMLIMIT.
const (
	// SmallFrameAllowance is what one session reads of a message without
	// asking the worker's large-frame budget: 16 KiB, 32 times the 512 B
	// its read buffer starts at, and 25 times the ~640 B messages of the
	// capacity bench's busiest run. The rest of a message larger than
	// this (up to the read limit) waits for the budget.
	SmallFrameAllowance = 16 << 10
	// MeasuredSessionMemory is the memory one session holds, measured:
	// the RSS per session above the idle worker in docs/BENCHMARKS.md,
	// section 5 (One worker's capacity), on wss at the default GOGC 50:
	// 40.8 KiB at 19,000 sessions × 1 msg/s and 48.0 KiB at 1,000 × 50
	// msg/s of ~640 B (`make bench`); the larger, rounded up.
	MeasuredSessionMemory = 48 << 10
	// SessionMemory is what the memory check counts per session: the
	// measured figure plus the allowance a session may read of a message
	// outside the large-frame budget.
	SessionMemory = MeasuredSessionMemory + SmallFrameAllowance
	// DefaultLargeFrameBudget is the large-frame budget when the memory
	// limit is unknown (with a known limit: LargeFrameShare of it).
	DefaultLargeFrameBudget = 64 << 20
	// SinkBudgetShare, SwitchBudgetShare and LargeFrameShare are the
	// shares of the memory limit the worker's budgets default to (1/4,
	// 1/16, 1/8): what is left, 9/16, holds the sessions.
	SinkBudgetShare   = 4  // WSFLEET_SINK_BUFFER_BUDGET: limit / 4
	SwitchBudgetShare = 16 // WSFLEET_SWITCH_BUFFER_BUDGET: limit / 16
	LargeFrameShare   = 8  // WSFLEET_LARGE_FRAME_BUDGET: limit / 8
	// GoMemLimitPercent is the share of a task's memory the infra gives
	// the Go runtime's soft limit (GOMEMLIMIT); the rest is for what the
	// runtime does not count.
	GoMemLimitPercent = 90
)

// ScalingTargetPercent is the share of its sessions (WSFLEET_MAX_SESSIONS)
// a task holds at the infra's autoscaling target; the fleet simulator
// sizes its fleets and the bench prices a task by it. At 65, the tasks
// outside one of three AZs hold every session (2/3 ÷ 65 % = 1.03) from
// 38 tasks up: the loss of an AZ needs no new task (AWS's static
// stability; infra's EnvConfig.AZLossShortfall). At 70 (before issue 37)
// a lost AZ's last 5 % waited for ECS to launch replacements.
const ScalingTargetPercent = 65

// SessionRoom is what a memory limit leaves the sessions once the worker's
// large-frame, sink and switch budgets take their default shares of it
// (9/16 of it), in the limit's unit.
func SessionRoom(limit float64) float64 {
	return limit - limit/LargeFrameShare - limit/SinkBudgetShare - limit/SwitchBudgetShare
}

// DefaultClaimsPerSecond is the worker's default claim rate
// (WSFLEET_CLAIMS_PER_SECOND: its admission pacer's steady rate): what
// each survivor of a crash claims the dead worker's sessions at (infra
// bounds a crashed task's spread with it).
const DefaultClaimsPerSecond = 50

// Ingest environment variable names.
const (
	EnvAllowedHosts = "WSFLEET_ALLOWED_HOSTS" // comma-separated host patterns; empty = any public host
	EnvSecretPrefix = "WSFLEET_SECRET_PREFIX" // ingest: the Secrets Manager name prefix (a folder, ending in '/') a start's {{secret:NAME}} references must be under; empty = no references
	// EnvSecretHosts (ingest and worker): the hosts each secret may be sent
	// to, "KEY=HOST,HOST;KEY=HOST" (KEY a folder ending in '/' or a whole
	// secret name; HOST exact, optionally :PORT; shared/secretref.Bindings);
	// empty = a secret may be sent nowhere, so no reference is usable.
	EnvSecretHosts      = "WSFLEET_SECRET_HOSTS"
	EnvAllowPrivateIPs  = "WSFLEET_ALLOW_PRIVATE_IPS"  // "loopback" (local dev) or "all"; default none
	EnvSigningSecretARN = "WSFLEET_SIGNING_SECRET_ARN" // optional HMAC secret (Secrets Manager)
	EnvSigningSecret    = "WSFLEET_SIGNING_SECRET"     // optional HMAC secret (local dev)
)

// Metric names emitted in EMF under DefaultMetricsNamespace with the
// dimensions [Environment, Service]. Infra builds alarms, the dashboard and
// autoscaling from these names.
const (
	DimEnvironment = "Environment"
	DimService     = "Service"
	DimCode        = "Code" // ingest Rejects, per error code

	ServiceStreamer = "streamer"
	ServiceIngest   = "ingest"

	MetricOwnedSessions       = "OwnedSessions"
	MetricFreeCapacity        = "FreeCapacity"
	MetricCapacityUtilization = "CapacityUtilization" // percent of max sessions owned; the autoscaling target
	MetricAcquired            = "Acquired"
	MetricLeaseLost           = "LeaseLost"
	MetricReleased            = "Released"
	MetricHeartbeatLatencyMs  = "HeartbeatLatencyMs"
	MetricAliveWorkers        = "AliveWorkers" // alive workers, as the worker last listed them
	MetricWorkersDeclaredDead = "WorkersDeclaredDead"
	MetricRebalanceMoves      = "RebalanceMoves" // sessions this worker handed off to rebalance the fleet
	MetricImbalance           = "Imbalance"      // max load ÷ fair share over the alive workers, at the last round
	MetricClaimLatencyMs      = "ClaimLatencyMs"
	MetricReconnects          = "Reconnects"
	MetricMessagesIn          = "MessagesIn"
	MetricDuplicatesDropped   = "DuplicatesDropped"
	MetricSinkErrors          = "SinkErrors"
	MetricSeqMissingDropped   = "SeqMissingDropped" // messages dropped for having no seq (seq_mode field, on_missing_seq drop)
	MetricSinkStalls          = "SinkStalls"        // times a session waited for room in its sink buffer (its socket was not read meanwhile)
	MetricSinkRefused         = "SinkRefused"       // messages the sink refused for good (then skipped or failing their session)
	MetricSinkSkipped         = "SinkSkipped"       // of those, messages skipped (on_sink_refusal skip)
	MetricSinkTextBase64      = "SinkTextBase64"    // text messages the envelope carried in data_b64 (invalid UTF-8, or a character the sink refuses)
	// Planned reconnects (make-before-break: max_connection_age, reconnect_on).
	MetricPlannedReconnects = "PlannedReconnects"       // switches to a new connection opened before the old one ended
	MetricPlannedFailed     = "PlannedReconnectsFailed" // new connections given up (the old one stayed)
	MetricSwitchOverlap     = "SwitchOverlap"           // messages both connections carried, dropped at the switch
	MetricGapSavedMs        = "GapSavedMs"              // dark time the switches saved: each new connection's dial, open and catch-up
	MetricLargeFrameWaits   = "LargeFrameWaits"         // messages larger than SmallFrameAllowance that waited for the worker's large-frame budget
	MetricOrphansSeen       = "OrphansSeen"
	MetricSessionsFailed    = "SessionsFailed"     // sessions a worker gave up on (FAILED: the source can never be connected)
	MetricStandbys          = "Standbys"           // standbys this worker holds for other owners' sessions
	MetricStandbyBytes      = "StandbyWindowBytes" // what their windows hold
	MetricStandbyPromotions = "StandbyPromotions"  // claims that adopted a standby's connection (no dial): the takeovers whose source was a standby
	MetricStandbyRefused    = "StandbyRefused"     // standbys the source refused (a second connection): those sessions go on without one

	MetricStarts         = "Starts"
	MetricStops          = "Stops"
	MetricRejects        = "Rejects"
	MetricNotifyFailures = "NotifyFailures"
)
