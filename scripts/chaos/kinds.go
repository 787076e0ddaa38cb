// The fault kinds a schedule draws from, the families that need an AWS sink
// or the DynamoDB model, and the settings of the model's faults.

package chaos

import (
	"slices"
	"time"
)

// Fault kinds (the schedule's steps).
const (
	KindKill        = "kill-9"
	KindZombie      = "zombie"
	KindRolling     = "rolling-restart"
	KindDynamoDown  = "dynamodb-down"
	KindSQSDown     = "sqs-down"
	KindSourceDrop  = "source-drop"
	KindRefuse      = "source-refuse"
	KindSchedule    = "source-schedule" // the source ends connections at a max age, a shutdown notice 1 s before
	KindChurn       = "churn"
	KindClockOffset = "clock-offset"
	KindPartition   = "dynamodb-partition" // one worker reaches its sources but not DynamoDB
	KindScaleOut    = "scale-out"          // one more worker joins: the fleet rebalances toward it
	KindScaleIn     = "scale-in"           // one worker leaves for good (SIGTERM, not restarted)
	KindPolicy      = "feed-policy"        // not a fault: the source's policy switch

	// Sink faults (the sink fault proxy, scripts/sinkfault; an AWS sink only).
	KindSinkLatency      = "sink-latency"         // latency spikes on the sink's requests (held requests, held answers)
	KindSinkRefuse       = "sink-refuse"          // a share of the sink's entries refused, transient and permanent
	KindSinkFreeze       = "sink-freeze"          // every sink request held for 2 × TTL (connections open)
	KindSinkFreezeDynamo = "sink-freeze+dynamodb" // one worker's sink and DynamoDB path frozen past the crash bound: declared dead
	KindSinkRefuseDynamo = "sink-refuse+dynamodb" // refusals while every worker's DynamoDB path is frozen past TTL − margin: trust lapses, then heartbeats succeed again
	KindSourcePoison     = "source-poison"        // some sessions' sources send invalid UTF-8 and characters SQS refuses for a while (judged at the destination)

	// DynamoDB model faults (testkit/dynamodel's controls; a stack on the
	// model only).
	KindIndexLag  = "dynamodb-index-lag" // the indexes (and eventually consistent reads) held a lag behind, and a kill -9 during it
	KindThrottle  = "dynamodb-throttle"  // the table held at a small fraction of its throughput, one session's key hot
	KindAmbiguous = "dynamodb-ambiguous" // a storm of writes answered 500 before or after applying, or their replies dropped
)

// ModelKinds are the fault kinds that need the DynamoDB model.
var ModelKinds = []string{KindIndexLag, KindThrottle, KindAmbiguous}

// isModelKind reports whether k is one of ModelKinds.
func isModelKind(k string) bool { return slices.Contains(ModelKinds, k) }

// SinkKinds are the fault kinds that need an AWS sink (its fault proxy, or
// the destination read back: source-poison's payloads).
var SinkKinds = []string{KindSinkLatency, KindSinkRefuse, KindSinkFreeze, KindSinkFreezeDynamo, KindSinkRefuseDynamo, KindSourcePoison}

// isSinkKind reports whether k is one of SinkKinds.
func isSinkKind(k string) bool { return slices.Contains(SinkKinds, k) }

// AllKinds are the fault kinds, in the order the report lists them.
var AllKinds = []string{KindKill, KindZombie, KindRolling, KindDynamoDown, KindPartition, KindSQSDown, KindSourceDrop, KindRefuse, KindSchedule, KindChurn, KindClockOffset, KindScaleOut, KindScaleIn,
	KindSinkLatency, KindSinkRefuse, KindSinkFreeze, KindSinkFreezeDynamo, KindSinkRefuseDynamo, KindSourcePoison,
	KindIndexLag, KindThrottle, KindAmbiguous}

// Model fault settings: the lag of an index-lag episode (a kill -9 of a
// worker at its start: its sessions must be found though the indexes lag),
// the share of the table's warm throughput a throttling storm leaves and
// of a partition's the hot key keeps, and the shares of writes an
// ambiguous storm answers 500 before applying, 500 after applying, and
// drops after applying.
const (
	modelLag = 3 * time.Second
	// 0.5 % of 4,000 write units/s is 20/s: below what the chaos fleet
	// writes (a heartbeat per worker per second, 4–7 workers, and a
	// checkpoint per session every 2 s, 48–80 sessions), above what its
	// heartbeats need once the checkpoints yield (lease.CheckpointHold).
	throttleFraction = 0.005
	// 0.01 % of a partition's 1,000 write units/s: one write every 10 s,
	// on one session's item (its checkpoint written every 2 s).
	hotKeyFraction                          = 0.0001
	stormBefore, stormAfter, stormDropShare = 0.2, 0.2, 0.1
)
