package ddbrules

import "time"

// Throughput is the throttling model. Units are DynamoDB's: one write unit
// is a write of up to 1 KB, one read unit a consistent read of up to 4 KB
// (an eventually consistent read costs half). A zero rate is no limit.
type Throughput struct {
	// PartitionWCU and PartitionRCU bound the units per second one
	// partition key value of a table takes (its token buckets).
	PartitionWCU float64 `json:"partition_wcu"`
	PartitionRCU float64 `json:"partition_rcu"`
	// IndexWCU and IndexRCU bound the units per second one key value of a
	// global secondary index takes. A base write whose index entry would
	// exceed its index key's bucket is throttled and not applied.
	IndexWCU float64 `json:"index_wcu"`
	IndexRCU float64 `json:"index_rcu"`
	// Burst is how deep every key bucket is, in seconds of its rate (at
	// least one request's units always fit a full bucket).
	Burst time.Duration `json:"burst"`
	// WarmWCU and WarmRCU are what a new on-demand table serves at once;
	// beyond that a table serves twice its previous peak, where a peak
	// counts only once it is PeakWindow old (so capacity at most doubles
	// per PeakWindow), and never more than QuotaWCU / QuotaRCU.
	WarmWCU    float64       `json:"warm_wcu"`
	WarmRCU    float64       `json:"warm_rcu"`
	PeakWindow time.Duration `json:"peak_window"`
	QuotaWCU   float64       `json:"quota_wcu"`
	QuotaRCU   float64       `json:"quota_rcu"`
}

// Enabled reports whether t limits anything.
func (t Throughput) Enabled() bool {
	return t.PartitionWCU > 0 || t.PartitionRCU > 0 || t.IndexWCU > 0 || t.IndexRCU > 0 ||
		t.WarmWCU > 0 || t.WarmRCU > 0 || t.QuotaWCU > 0 || t.QuotaRCU > 0
}

// AWSThroughput is DynamoDB's documented throughput (the sources are in
// the package doc): 1,000 write and 3,000 read units a second per partition
// key value, for the table and for each global secondary index; a second of
// burst; a new on-demand table's warm throughput of 4,000 write and 12,000
// read units a second, twice the previous peak after 30 minutes; the
// default table quota of 40,000 each.
func AWSThroughput() Throughput {
	return Throughput{
		PartitionWCU: 1000, PartitionRCU: 3000,
		IndexWCU: 1000, IndexRCU: 3000,
		Burst:   time.Second,
		WarmWCU: 4000, WarmRCU: 12000,
		PeakWindow: 30 * time.Minute,
		QuotaWCU:   40000, QuotaRCU: 40000,
	}
}

// AWSReadLatency and AWSWriteLatency are the service latency of one read
// (GetItem, BatchGetItem, Query, Scan) and one write (PutItem, UpdateItem,
// DeleteItem, BatchWriteItem) request: "single-digit millisecond" with p99
// and maximum spikes AWS calls normal. The body's shape is an assumption
// (AWS publishes no p99); a spike is the service's internal 5,000 ms
// timeout followed by a retry on another node, once or more.
func AWSReadLatency() Dist {
	return Dist{Median: 3 * time.Millisecond, P99: 12 * time.Millisecond, SpikeShare: 1e-4, SpikeMin: 5 * time.Second, SpikeMax: 10 * time.Second}
}

// AWSWriteLatency: see AWSReadLatency.
func AWSWriteLatency() Dist {
	return Dist{Median: 5 * time.Millisecond, P99: 20 * time.Millisecond, SpikeShare: 1e-4, SpikeMin: 5 * time.Second, SpikeMax: 10 * time.Second}
}

// AWSLag is how long a write takes to reach a global secondary index: "within
// a fraction of a second" under normal conditions (AWS: writes propagate
// "within 1 second"), longer "in some unlikely failure scenarios": a
// production team waited 15 s.
func AWSLag() Dist {
	return Dist{Median: 100 * time.Millisecond, P99: 800 * time.Millisecond, SpikeShare: 1e-3, SpikeMin: 2 * time.Second, SpikeMax: 15 * time.Second}
}

// ReadOps and WriteOps are the DynamoDB operations whose latency is
// AWSReadLatency and AWSWriteLatency.
var (
	ReadOps  = []string{"GetItem", "BatchGetItem", "Query", "Scan"}
	WriteOps = []string{"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"}
)

// AWSLatency is the latency of every operation of ReadOps and WriteOps.
func AWSLatency() map[string]Dist {
	lat := map[string]Dist{}
	for _, op := range ReadOps {
		lat[op] = AWSReadLatency()
	}
	for _, op := range WriteOps {
		lat[op] = AWSWriteLatency()
	}
	return lat
}
