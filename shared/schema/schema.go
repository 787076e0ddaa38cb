// Package schema owns the names of everything wsfleet stores and the settings
// every component reads: the sessions table, its attributes, its index, the
// desired states and the environment variable names. It has no dependencies so
// that the infra app can import it without pulling in runtime code.
package schema

// DefaultTableName is the table name used by the local stack and tests.
const DefaultTableName = "wsfleet-sessions"

// Attribute names of a session item. One item per connection.
const (
	AttrPk               = "Pk"                  // S: the connection_id
	AttrDesiredState     = "desired_state"       // S: STARTED | STOPPED (written only by ingest)
	AttrIndexShard       = "index_shard"         // S: IndexShardFor(desired_state, Pk), written with desired_state
	AttrWSURL            = "ws_url"              // S: where the worker dials
	AttrHeaders          = "headers"             // M of S: dial headers (may carry credentials)
	AttrSeqField         = "seq_field"           // S: JSON field holding a message's sequence number
	AttrResumeParam      = "resume_query_param"  // S: query parameter set to last_seq+1 on reconnect
	AttrSubprotocols     = "subprotocols"        // L of S: WebSocket subprotocols offered on the handshake, in order of preference
	AttrFollowRedirects  = "follow_redirects"    // N: how many handshake redirects the worker may follow (absent: none)
	AttrGeneration       = "generation"          // N: bumped when ws_url, headers, seq_field or resume_query_param change, and on restart
	AttrLeaseOwner       = "lease_owner"         // S: worker id of the (last) owner
	AttrLeaseExpiresAtMs = "lease_expires_at_ms" // N: wall-clock ms; 0 = released / never leased
	AttrLeaseEpoch       = "lease_epoch"         // N: fencing token, only grows
	AttrLastSeq          = "last_seq"            // N: last checkpointed sequence number
	AttrCreatedAtMs      = "created_at_ms"       // N
	AttrUpdatedAtMs      = "updated_at_ms"       // N: last desired-state write
	AttrFailedGeneration = "failed_generation"   // N: the generation at which a worker gave up on the source (FAILED while = generation and STARTED)
	AttrLastError        = "last_error"          // S: the last connection error a worker saw (short; never a header value or URL query)
	AttrLastErrorAtMs    = "last_error_at_ms"    // N: when last_error was seen
)

// FailedLeaseExpiresAtMs is the lease_expires_at_ms of a session a worker
// failed (9999-12-31T23:59:59.999Z): far enough ahead that reconciliation
// never lists it as an orphan, while it stays in the by_shard_expiry index.
const FailedLeaseExpiresAtMs int64 = 253402300799999

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

// IndexByShardExpiry is the GSI that reconciliation (and ingest's list)
// queries: partition key index_shard, sort key lease_expires_at_ms (KEYS_ONLY
// plus the table key). Every renewal moves the sort key, which writes the
// index; spreading the sessions of one desired state over IndexShards key
// values spreads those writes over as many index partitions (one key value
// takes about 1,000 write units/s). Items without lease_expires_at_ms or
// index_shard are not in it, so ingest writes both on every item.
const IndexByShardExpiry = "by_shard_expiry"

// IndexShards is how many index_shard values each desired state has. It is
// part of the stored data: changing it means rewriting index_shard on every
// item.
const IndexShards = 16

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
	EnvMetricsNS      = "WSFLEET_METRICS_NAMESPACE"
	EnvEnvironment    = "WSFLEET_ENV"
)

// DefaultMetricsNamespace is the CloudWatch namespace of the EMF metrics.
const DefaultMetricsNamespace = "wsfleet"

// Worker (streamer) environment variable names. Defaults live in the worker's
// config; infra sets them per environment.
const (
	EnvWorkerID         = "WSFLEET_WORKER_ID"         // default: hostname + random suffix
	EnvLeaseTTL         = "WSFLEET_LEASE_TTL"         // duration, default 10s
	EnvRenewEvery       = "WSFLEET_RENEW_EVERY"       // duration, default TTL/3
	EnvMaxSkew          = "WSFLEET_MAX_SKEW"          // duration, default 500ms
	EnvSafetyMargin     = "WSFLEET_SAFETY_MARGIN"     // duration, default 2s
	EnvReconcileEvery   = "WSFLEET_RECONCILE_EVERY"   // duration, default 5s
	EnvMaxSessions      = "WSFLEET_MAX_SESSIONS"      // int, default 1000
	EnvClaimsPerSecond  = "WSFLEET_CLAIMS_PER_SECOND" // float, default 50
	EnvShutdownDeadline = "WSFLEET_SHUTDOWN_DEADLINE" // duration, default 30s
	EnvAdminAddr        = "WSFLEET_ADMIN_ADDR"        // default 127.0.0.1:8081 (0.0.0.0:8081 in the container)
	EnvSink             = "WSFLEET_SINK"              // stdout | sqs
	EnvLogLevel         = "WSFLEET_LOG_LEVEL"         // debug | info | warn | error

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
	EnvAdminPprof          = "WSFLEET_ADMIN_PPROF" // true: /debug/pprof/ on the admin server (loopback clients only)
	EnvMaxConcurrentRenews = "WSFLEET_MAX_CONCURRENT_RENEWS"
	EnvMaxDialFailures     = "WSFLEET_MAX_DIAL_FAILURES" // int, default 20; 0 = never give up on a transient error
)

// Ingest environment variable names.
const (
	EnvAllowedHosts     = "WSFLEET_ALLOWED_HOSTS"      // comma-separated host patterns; empty = any public host
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
	MetricRenewLatencyMs      = "RenewLatencyMs"
	MetricClaimLatencyMs      = "ClaimLatencyMs"
	MetricReconnects          = "Reconnects"
	MetricMessagesIn          = "MessagesIn"
	MetricDuplicatesDropped   = "DuplicatesDropped"
	MetricSinkErrors          = "SinkErrors"
	MetricOrphansSeen         = "OrphansSeen"
	MetricSessionsFailed      = "SessionsFailed" // sessions a worker gave up on (FAILED: the source can never be connected)

	MetricStarts         = "Starts"
	MetricStops          = "Stops"
	MetricRejects        = "Rejects"
	MetricNotifyFailures = "NotifyFailures"
)
