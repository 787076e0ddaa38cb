package ddbrules

import (
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
// A refusal names what was exceeded, as DynamoDB's ThrottlingReasons do:
// TableWriteKeyRangeThroughputExceeded (a table key, or the table's current
// on-demand capacity: DynamoDB serves growth by splitting partitions),
// IndexWriteKeyRangeThroughputExceeded (an index key),
// TableWriteAccountLimitExceeded (the table quota), and the Read forms of
// each.

// The reasons (DynamoDB API reference, ThrottlingReason).
const (
	TableWriteKeyRange = "TableWriteKeyRangeThroughputExceeded"
	TableReadKeyRange  = "TableReadKeyRangeThroughputExceeded"
	IndexWriteKeyRange = "IndexWriteKeyRangeThroughputExceeded"
	IndexReadKeyRange  = "IndexReadKeyRangeThroughputExceeded"
	TableWriteQuota    = "TableWriteAccountLimitExceeded"
	TableReadQuota     = "TableReadAccountLimitExceeded"
)

// Reason is one ThrottlingReason: what was exceeded, on which resource (a
// table's or an index's ARN).
type Reason struct {
	Reason   string `json:"reason"`
	Resource string `json:"resource"`
}

// IndexWrite is what a write puts into or deletes from one index key value.
type IndexWrite struct {
	Index    string  // the index's name
	IndexARN string  // its ARN (the Resource of a refusal)
	Global   bool    // a global secondary index (a local one has no buckets)
	Value    string  // the index partition key value (canonical: "S:abc")
	Units    float64 // write units
}

// Demand is what one request (or batch item) takes.
type Demand struct {
	Table     string
	TableARN  string
	Write     bool
	Units     float64 // base table units
	Partition string  // the table partition key value, canonical ("" for none: a Scan)
	Index     []IndexWrite
	// ReadIndex and ReadIndexARN name the global secondary index a Query
	// reads (its key value is Partition); "" for a table read.
	ReadIndex    string
	ReadIndexARN string
}

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

// Throttler applies the rules to the demands given it, at the times given
// it: it reads no clock, draws nothing, and is safe for concurrent use.
type Throttler struct {
	cfg Throughput

	mu      sync.Mutex
	keys    map[string]*bucket // tableKeyID, indexKeyID
	tables  map[string]*tableLoad
	holdAll hot
	hot     map[string]hot // table + "\x00" + partition key value of the table or an index (without its type)
	sweep   time.Time
}

// NewThrottler is a Throttler of cfg.
func NewThrottler(cfg Throughput) *Throttler {
	return &Throttler{cfg: cfg, keys: map[string]*bucket{}, tables: map[string]*tableLoad{}, hot: map[string]hot{}}
}

// Config is the Throttler's throughput.
func (t *Throttler) Config() Throughput { return t.cfg }

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

func (t *Throttler) load(table string, now time.Time) *tableLoad {
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
func (t *Throttler) allowance(l *tableLoad, now time.Time) (capacity [2]float64, quota [2]bool) {
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

// Capacity is table's on-demand capacity at now: [write, read] units a
// second (+Inf: unlimited).
func (t *Throttler) Capacity(table string, now time.Time) [2]float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, _ := t.allowance(t.load(table, now), now)
	return c
}

func (t *Throttler) hotFraction(table, partition string, now time.Time) float64 {
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
	why   Reason
}

// Admit takes the units of every demand at now when every limit has room
// for all of them and returns nil, or returns the reasons they are
// throttled (taking nothing). The table allowance is checked on the sum of
// the demands on each table; each bucket on each demand's units.
func (t *Throttler) Admit(now time.Time, ds ...Demand) []Reason {
	if !t.cfg.Enabled() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.maybeSweep(now)
	type tableUse struct {
		l     *tableLoad
		arn   string
		units [2]float64
	}
	var uses []*tableUse
	byTable := map[string]*tableUse{}
	var checks []keyCheck
	for _, d := range ds {
		u := byTable[d.Table]
		if u == nil {
			u = &tableUse{l: t.load(d.Table, now), arn: d.TableARN}
			byTable[d.Table] = u
			uses = append(uses, u)
		}
		u.units[rw(d.Write)] += d.Units
		checks = append(checks, t.checks(d, now)...)
	}
	for _, u := range uses {
		capacity, quota := t.allowance(u.l, now)
		for i, write := range []bool{true, false} {
			// Over the second's capacity (a first request larger than
			// the whole capacity passes, unless the capacity is 0).
			if u.units[i] > 0 && u.l.cur[i]+u.units[i] > capacity[i] && (u.l.cur[i] > 0 || capacity[i] == 0) {
				r := "Table" + kind(write) + "KeyRangeThroughputExceeded"
				if quota[i] {
					r = "Table" + kind(write) + "AccountLimitExceeded"
				}
				return []Reason{{r, u.arn}}
			}
		}
	}
	depth := t.cfg.Burst.Seconds()
	if depth <= 0 {
		depth = 1
	}
	var why []Reason
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
	for _, u := range uses {
		for i := range u.units {
			u.l.cur[i] += u.units[i]
		}
	}
	return nil
}

// Charge takes d's units at now without checking (what a request turned
// out to cost beyond what Admit took).
func (t *Throttler) Charge(now time.Time, d Demand) {
	if !t.cfg.Enabled() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.load(d.Table, now)
	l.cur[rw(d.Write)] += d.Units
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

func (t *Throttler) checks(d Demand, now time.Time) []keyCheck {
	var out []keyCheck
	k := kind(d.Write)
	if d.ReadIndex != "" {
		if rate := t.cfg.IndexRCU; rate > 0 && d.Partition != "" && d.Units > 0 {
			out = append(out, keyCheck{indexKeyID("r", d.Table, d.ReadIndex, d.Partition), rate, d.Units,
				Reason{IndexReadKeyRange, d.ReadIndexARN}})
		}
		return out
	}
	rate := t.cfg.PartitionRCU
	if d.Write {
		rate = t.cfg.PartitionWCU
	}
	if rate > 0 && d.Partition != "" && d.Units > 0 {
		rate *= t.hotFraction(d.Table, d.Partition, now)
		out = append(out, keyCheck{tableKeyID(k, d.Table, d.Partition), rate, d.Units,
			Reason{"Table" + k + "KeyRangeThroughputExceeded", d.TableARN}})
	}
	if t.cfg.IndexWCU > 0 {
		for _, w := range d.Index {
			if !w.Global || w.Units <= 0 {
				continue
			}
			rate := t.cfg.IndexWCU * t.hotFraction(d.Table, w.Value, now)
			out = append(out, keyCheck{indexKeyID("w", d.Table, w.Index, w.Value), rate, w.Units,
				Reason{IndexWriteKeyRange, w.IndexARN}})
		}
	}
	return out
}

func (t *Throttler) bucket(id string, now time.Time, rate, depth float64) *bucket {
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
func (t *Throttler) maybeSweep(now time.Time) {
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

// HoldTable holds table (every table when "") at fraction of its on-demand
// allowance from now for dur: a throttling storm.
func (t *Throttler) HoldTable(now time.Time, table string, fraction float64, dur time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if table == "" {
		t.holdAll = hot{fraction, now.Add(dur)}
		return
	}
	l := t.load(table, now)
	l.hold, l.holdUntil = fraction, now.Add(dur)
}

// HotKey makes one partition key value of table (as text, without its
// type), as a table key and as an index key, take only fraction of its
// rate from now for dur.
func (t *Throttler) HotKey(now time.Time, table, value string, fraction float64, dur time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.hot[table+"\x00"+value] = hot{fraction, now.Add(dur)}
}

// DrainKey empties at now the write buckets of one partition key value of
// table (as a string or a number) and of that value as an index key (the
// index buckets that exist: one not yet written to starts full): a key that
// has been taking all its rate has no burst left. The next write waits for
// its units to refill at the key's rate (its hot fraction, if it is hot).
func (t *Throttler) DrainKey(now time.Time, table, value string) {
	t.mu.Lock()
	defer t.mu.Unlock()
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
