package dynamodel

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Throttling. Every partition key value of a table has a write and a read
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

// bucket is a token bucket: rate tokens a second, at most depth.
type bucket struct {
	tokens float64
	at     time.Time
}

func (b *bucket) fill(now time.Time, rate, depth float64) {
	if b.at.IsZero() {
		b.tokens, b.at = depth, now
		return
	}
	b.tokens = min(depth, b.tokens+rate*now.Sub(b.at).Seconds())
	b.at = now
}

// tableLoad is a table's on-demand allowance: the units of the current
// second and the peak seconds.
type tableLoad struct {
	sec       int64      // the current second (Unix)
	cur       [2]float64 // units this second: [write, read]
	recent    []peakSec  // seconds with load, younger than PeakWindow
	peak      [2]float64 // the highest second older than PeakWindow
	holdUntil time.Time
	hold      float64 // fraction of the allowance while held
}

type peakSec struct {
	sec   int64
	units [2]float64
}

type hot struct {
	fraction float64
	until    time.Time
}

type throttler struct {
	cfg Throughput
	now func() time.Time

	mu      sync.Mutex
	keys    map[string]*bucket // tableKeyID, indexKeyID
	tables  map[string]*tableLoad
	holdAll hot
	hot     map[string]hot // table + "\x00" + partition key value of the table or an index (without its type)
	sweep   time.Time
}

func newThrottler(cfg Throughput, now func() time.Time) *throttler {
	return &throttler{cfg: cfg, now: now, keys: map[string]*bucket{}, tables: map[string]*tableLoad{}, hot: map[string]hot{}}
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
type reason struct {
	Reason   string `json:"reason"`
	Resource string `json:"resource"`
}

func kind(write bool) string {
	if write {
		return "Write"
	}
	return "Read"
}

const (
	wi = 0
	ri = 1
)

func rw(write bool) int {
	if write {
		return wi
	}
	return ri
}

func (t *throttler) load(table string, now time.Time) *tableLoad {
	l := t.tables[table]
	if l == nil {
		l = &tableLoad{sec: now.Unix()}
		t.tables[table] = l
	}
	if s := now.Unix(); s != l.sec {
		if l.cur != [2]float64{} {
			l.recent = append(l.recent, peakSec{l.sec, l.cur})
		}
		l.sec, l.cur = s, [2]float64{}
	}
	for len(l.recent) > 0 && now.Sub(time.Unix(l.recent[0].sec, 0)) >= t.cfg.PeakWindow {
		for i := range l.peak {
			l.peak[i] = max(l.peak[i], l.recent[0].units[i])
		}
		l.recent = l.recent[1:]
	}
	return l
}

// allowance is the table's on-demand capacity now ([write, read] units per
// second; +Inf: unlimited) and whether the quota is what binds.
func (t *throttler) allowance(l *tableLoad, now time.Time) (capacity [2]float64, quota [2]bool) {
	warm := [2]float64{t.cfg.WarmWCU, t.cfg.WarmRCU}
	lim := [2]float64{t.cfg.QuotaWCU, t.cfg.QuotaRCU}
	for i := range capacity {
		c := math.Inf(1)
		if warm[i] > 0 {
			c = max(warm[i], 2*l.peak[i])
		}
		if lim[i] > 0 && c >= lim[i] {
			c, quota[i] = lim[i], true
		}
		capacity[i] = c
	}
	f := 1.0
	if now.Before(l.holdUntil) {
		f = l.hold
	}
	if now.Before(t.holdAll.until) {
		f = min(f, t.holdAll.fraction)
	}
	if f < 1 {
		for i := range capacity {
			if !math.IsInf(capacity[i], 1) {
				capacity[i] *= f
				quota[i] = false
			}
		}
	}
	return capacity, quota
}

func (t *throttler) hotFraction(table, partition string, now time.Time) float64 {
	_, v, _ := strings.Cut(partition, ":")
	if h, ok := t.hot[table+"\x00"+v]; ok && now.Before(h.until) {
		return h.fraction
	}
	return 1
}

// keyCheck is one bucket a demand takes from.
type keyCheck struct {
	id    string
	rate  float64
	units float64
	why   reason
}

// admit takes d's units when every limit has room and returns nil, or
// returns the reasons it is throttled (taking nothing).
func (t *throttler) admit(d demand) []reason {
	if !t.cfg.enabled() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.maybeSweep(now)
	i := rw(d.write)
	l := t.load(d.table.name, now)
	capacity, quota := t.allowance(l, now)
	// Over the second's capacity (a first request larger than the whole
	// capacity passes, unless the capacity is 0).
	if d.units > 0 && l.cur[i]+d.units > capacity[i] && (l.cur[i] > 0 || capacity[i] == 0) {
		r := "Table" + kind(d.write) + "KeyRangeThroughputExceeded"
		if quota[i] {
			r = "Table" + kind(d.write) + "AccountLimitExceeded"
		}
		return []reason{{r, d.table.arn}}
	}
	checks := t.checks(d, now)
	depth := t.cfg.Burst.Seconds()
	if depth <= 0 {
		depth = 1
	}
	var why []reason
	for _, c := range checks {
		b := t.bucket(c.id, now, c.rate, c.rate*depth)
		if c.rate <= 0 || b.tokens < min(c.units, c.rate*depth) {
			why = append(why, c.why)
		}
	}
	if len(why) > 0 {
		return why
	}
	for _, c := range checks {
		t.keys[c.id].tokens -= c.units
	}
	l.cur[i] += d.units
	return nil
}

// charge takes units without checking (what a request turned out to cost
// beyond what admit took).
func (t *throttler) charge(d demand) {
	if !t.cfg.enabled() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	l := t.load(d.table.name, now)
	l.cur[rw(d.write)] += d.units
	for _, c := range t.checks(d, now) {
		t.bucket(c.id, now, c.rate, c.rate*max(t.cfg.Burst.Seconds(), 1)).tokens -= c.units
	}
}

// tableKeyID and indexKeyID name the buckets of a table's partition key
// value ("W"/"R": write or read) and of a global secondary index's
// ("w"/"r"); partition and value are canonical ("S:abc").
func tableKeyID(k, table, partition string) string { return k[:1] + table + "\x00" + partition }

func indexKeyID(rw, table, index, value string) string {
	return indexKeysOf(rw, table) + index + "\x00" + value
}

// indexKeysOf is the prefix every index bucket id of table starts with.
func indexKeysOf(rw, table string) string { return rw + table + "/" }

func (t *throttler) checks(d demand, now time.Time) []keyCheck {
	var out []keyCheck
	k := kind(d.write)
	if d.readIndex != nil {
		if rate := t.cfg.IndexRCU; rate > 0 && d.partition != "" && d.units > 0 {
			out = append(out, keyCheck{indexKeyID("r", d.table.name, d.readIndex.name, d.partition), rate, d.units,
				reason{"IndexReadKeyRangeThroughputExceeded", d.readIndex.arn}})
		}
		return out
	}
	rate := t.cfg.PartitionRCU
	if d.write {
		rate = t.cfg.PartitionWCU
	}
	if rate > 0 && d.partition != "" && d.units > 0 {
		rate *= t.hotFraction(d.table.name, d.partition, now)
		out = append(out, keyCheck{tableKeyID(k, d.table.name, d.partition), rate, d.units,
			reason{"Table" + k + "KeyRangeThroughputExceeded", d.table.arn}})
	}
	if t.cfg.IndexWCU > 0 {
		for _, w := range d.index {
			if !w.index.global || w.units <= 0 {
				continue
			}
			rate := t.cfg.IndexWCU * t.hotFraction(d.table.name, w.value, now)
			out = append(out, keyCheck{indexKeyID("w", d.table.name, w.index.name, w.value), rate, w.units,
				reason{"IndexWriteKeyRangeThroughputExceeded", w.index.arn}})
		}
	}
	return out
}

func (t *throttler) bucket(id string, now time.Time, rate, depth float64) *bucket {
	b := t.keys[id]
	if b == nil {
		b = &bucket{}
		t.keys[id] = b
	}
	b.fill(now, rate, depth)
	return b
}

// maybeSweep drops buckets idle long enough to be full again (at most once
// a minute), so that many keys do not grow the map without bound.
func (t *throttler) maybeSweep(now time.Time) {
	if now.Sub(t.sweep) < time.Minute {
		return
	}
	t.sweep = now
	idle := max(t.cfg.Burst, time.Second) + time.Minute
	for id, b := range t.keys {
		if now.Sub(b.at) > idle {
			delete(t.keys, id)
		}
	}
	for id, h := range t.hot {
		if now.After(h.until) {
			delete(t.hot, id)
		}
	}
}

func (t *throttler) holdTable(table string, fraction float64, dur time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if table == "" {
		t.holdAll = hot{fraction, now.Add(dur)}
		return
	}
	l := t.load(table, now)
	l.hold, l.holdUntil = fraction, now.Add(dur)
}

func (t *throttler) hotKey(table, value string, fraction float64, dur time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hot[table+"\x00"+value] = hot{fraction, t.now().Add(dur)}
}

// drainKey empties the write buckets of one partition key value of table
// (as a string or a number) and of that value as an index key (the index
// buckets that exist: one not yet written to starts full): a key that has
// been taking all its rate has no burst left. The next write waits for its
// units to refill at the key's rate (its hot fraction, if it is hot).
func (t *throttler) drainKey(table, value string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	values := []string{"S:" + value, "N:" + value}
	for _, v := range values {
		t.keys[tableKeyID("Write", table, v)] = &bucket{at: now}
	}
	for id, b := range t.keys {
		rest, ok := strings.CutPrefix(id, indexKeysOf("w", table))
		if !ok {
			continue
		}
		if _, v, _ := strings.Cut(rest, "\x00"); slices.Contains(values, v) {
			b.tokens, b.at = 0, now
		}
	}
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
