package dynamodel

import (
	"encoding/json"
	"time"

	"github.com/wsfleet/wsfleet/testkit/ddbrules"
)

// Throttling (the rules are testkit/ddbrules', shared with
// testkit/simddb). Every partition key value of a table has a write and a read
// token bucket (Throughput.PartitionWCU / PartitionRCU per second, Burst
// deep), every partition key value of a global secondary index too
// (IndexWCU / IndexRCU): a write is admitted only when its table key's
// bucket and the bucket of every index key value it writes (the entry it
// puts and the one it deletes) hold its units. Above that, each table has
// an on-demand allowance: WarmWCU / WarmRCU for a new table, twice the
// previous peak second once that peak is PeakWindow old, never more than
// the quota. Admission checks all of them before it takes from any.
//
// A throttled request is not applied and answers as DynamoDB does: HTTP 400
// with, on an on-demand (PAY_PER_REQUEST) table, ThrottlingException and
// its throttlingReasons, on a provisioned table
// ProvisionedThroughputExceededException and its ThrottlingReasons; the
// reason names what was exceeded: TableWriteKeyRangeThroughputExceeded (a
// table key, or the table's current on-demand capacity: DynamoDB serves
// growth by splitting partitions), IndexWriteKeyRangeThroughputExceeded
// (an index key), TableWriteAccountLimitExceeded (the table quota), and the
// Read forms of each.
//
// A BatchWriteItem or BatchGetItem throttles per item: the throttled ones
// come back in UnprocessedItems / UnprocessedKeys, and only when all of
// them are throttled does the request fail.

const (
	errNS = "com.amazonaws.dynamodb.v20120810#"
	// The messages DynamoDB sends (as clients have quoted them).
	onDemandThrottleMsg    = "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"
	provisionedThrottleMsg = "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."
)

// throttler applies testkit/ddbrules' Throttler (the one definition of the
// rules, shared with testkit/simddb) at the model's clock.
type throttler struct {
	cfg Throughput
	now func() time.Time
	r   *ddbrules.Throttler
}

func newThrottler(cfg Throughput, now func() time.Time) *throttler {
	return &throttler{cfg: cfg, now: now, r: ddbrules.NewThrottler(cfg)}
}

// demand is what one request (or batch item) takes.
type demand struct {
	table     *tableInfo
	write     bool
	units     float64 // base table units
	partition string  // the table partition key value ("" for none: a Scan)
	index     []indexWrite
	readIndex *indexInfo // a Query on an index: its key value is partition
}

// reason is one ThrottlingReason.
type reason = ddbrules.Reason

func (d demand) rules() ddbrules.Demand {
	out := ddbrules.Demand{Table: d.table.name, TableARN: d.table.arn, Write: d.write, Units: d.units, Partition: d.partition}
	if d.readIndex != nil {
		out.ReadIndex, out.ReadIndexARN = d.readIndex.name, d.readIndex.arn
	}
	for _, w := range d.index {
		out.Index = append(out.Index, ddbrules.IndexWrite{Index: w.index.name, IndexARN: w.index.arn, Global: w.index.global, Value: w.value, Units: w.units})
	}
	return out
}

// admit takes d's units when every limit has room and returns nil, or
// returns the reasons it is throttled (taking nothing).
func (t *throttler) admit(d demand) []reason {
	if !t.cfg.Enabled() {
		return nil
	}
	return t.r.Admit(t.now(), d.rules())
}

// charge takes units without checking (what a request turned out to cost
// beyond what admit took).
func (t *throttler) charge(d demand) {
	if !t.cfg.Enabled() {
		return
	}
	t.r.Charge(t.now(), d.rules())
}

func (t *throttler) holdTable(table string, fraction float64, dur time.Duration) {
	t.r.HoldTable(t.now(), table, fraction, dur)
}

func (t *throttler) hotKey(table, value string, fraction float64, dur time.Duration) {
	t.r.HotKey(t.now(), table, value, fraction, dur)
}

// drainKey empties the write buckets of one partition key value of table
// (ddbrules.Throttler.DrainKey).
func (t *throttler) drainKey(table, value string) {
	t.r.DrainKey(t.now(), table, value)
}

// throttled is the answer to a request of op the throttle refused (why),
// metered as one throttled request on t.
func (m *Model) throttled(t *tableInfo, op string, why []reason) *reply {
	m.meter.add(t.name, op, Usage{Requests: 1, Throttled: 1}, nil, nil)
	return throttleReply(t, why)
}

// throttleReply is DynamoDB's answer to a throttled request on table.
func throttleReply(table *tableInfo, why []reason) *reply {
	body := map[string]any{}
	if table.onDemand {
		body["__type"] = errNS + "ThrottlingException"
		body["message"] = onDemandThrottleMsg
		body["throttlingReasons"] = why
	} else {
		body["__type"] = errNS + "ProvisionedThroughputExceededException"
		body["message"] = provisionedThrottleMsg
		body["ThrottlingReasons"] = why
	}
	b, _ := json.Marshal(body)
	return &reply{status: 400, body: b}
}
