package dynamodel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Dist is a distribution of durations: a lognormal body given by its median
// and its 99th percentile (P99 <= Median: every draw is Median), plus a
// share of spikes, each adding a duration drawn uniformly from [SpikeMin,
// SpikeMax] to the body. The zero Dist always draws 0.
type Dist struct {
	Median     time.Duration `json:"median"`
	P99        time.Duration `json:"p99"`
	SpikeShare float64       `json:"spike_share"`
	SpikeMin   time.Duration `json:"spike_min"`
	SpikeMax   time.Duration `json:"spike_max"`
}

// z99 is the standard normal's 99th percentile.
const z99 = 2.3263478740408408

// IsZero reports whether d always draws 0.
func (d Dist) IsZero() bool { return d.Median <= 0 && (d.SpikeShare <= 0 || d.SpikeMax <= 0) }

func (d Dist) draw(r *rand.Rand) time.Duration {
	var v time.Duration
	if d.Median > 0 {
		v = d.Median
		if d.P99 > d.Median {
			sigma := math.Log(float64(d.P99)/float64(d.Median)) / z99
			v = time.Duration(float64(d.Median) * math.Exp(sigma*r.NormFloat64()))
		}
	}
	if d.SpikeShare > 0 && r.Float64() < d.SpikeShare {
		spike := d.SpikeMin
		if d.SpikeMax > d.SpikeMin {
			spike += time.Duration(r.Int64N(int64(d.SpikeMax - d.SpikeMin)))
		}
		v += spike
	}
	return v
}

func (d Dist) check(what string) error {
	if d.Median < 0 || d.P99 < 0 || d.SpikeMin < 0 || d.SpikeMax < d.SpikeMin || d.SpikeShare < 0 || d.SpikeShare > 1 {
		return fmt.Errorf("dynamodel: %s: invalid distribution %+v", what, d)
	}
	return nil
}

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

func (t Throughput) enabled() bool {
	return t.PartitionWCU > 0 || t.PartitionRCU > 0 || t.IndexWCU > 0 || t.IndexRCU > 0 ||
		t.WarmWCU > 0 || t.WarmRCU > 0 || t.QuotaWCU > 0 || t.QuotaRCU > 0
}

// Faults are the shares of writes (PutItem, UpdateItem, DeleteItem,
// BatchWriteItem) answered ambiguously: Before, 500 InternalServerError
// without applying the write; After, 500 after applying it; Drop, the
// connection closed without a reply after applying it.
type Faults struct {
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	Drop   float64 `json:"drop"`
}

// Profile is every behaviour the model adds to dynalite, each with its
// setting. AWS and Dynalite are the two defaults; a test copies one and
// changes what it needs.
type Profile struct {
	Name string `json:"name"`
	// Latency is the service latency per operation (the X-Amz-Target
	// operation name, e.g. "GetItem"); operations not listed get none.
	Latency map[string]Dist `json:"latency"`
	// Lag is how long after a write its item image reaches the state that
	// index queries and eventually consistent reads answer from, drawn per
	// write. The zero Dist: no lagging state (every read is answered by
	// the primary, as dynalite does).
	Lag        Dist       `json:"lag"`
	Throughput Throughput `json:"throughput"`
	Faults     Faults     `json:"faults"`
	// Meter turns on billing (Model.Meter). It costs one consistent read of
	// the item before every write (the lagging state and throttling read
	// it too).
	Meter bool `json:"meter"`
}

func (p Profile) check() error {
	for op, d := range p.Latency {
		if err := d.check("latency of " + op); err != nil {
			return err
		}
	}
	if err := p.Lag.check("lag"); err != nil {
		return err
	}
	for _, s := range []float64{p.Faults.Before, p.Faults.After, p.Faults.Drop} {
		if s < 0 || s > 1 {
			return fmt.Errorf("dynamodel: fault shares must be in [0, 1]: %+v", p.Faults)
		}
	}
	return nil
}

// The operations the model answers itself (the others are forwarded to the
// primary unchanged).
var (
	readOps  = []string{"GetItem", "BatchGetItem", "Query", "Scan"}
	writeOps = []string{"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"}
)

// AWS is the default profile: DynamoDB as AWS documents it (each number's
// source is in docs/references.md, section "DynamoDB as the model
// (testkit/dynamodel) behaves"). Where AWS publishes no number (the shape of
// the latency distribution, the rate of ambiguous errors) the value is the
// model's assumption and says so there.
func AWS() Profile {
	// "Single-digit millisecond" latency, with p99 and maximum spikes AWS
	// calls normal; a spike is the service's internal 5,000 ms timeout
	// followed by a retry on another node, once or more.
	read := Dist{Median: 3 * time.Millisecond, P99: 12 * time.Millisecond, SpikeShare: 1e-4, SpikeMin: 5 * time.Second, SpikeMax: 10 * time.Second}
	write := Dist{Median: 5 * time.Millisecond, P99: 20 * time.Millisecond, SpikeShare: 1e-4, SpikeMin: 5 * time.Second, SpikeMax: 10 * time.Second}
	lat := map[string]Dist{}
	for _, op := range readOps {
		lat[op] = read
	}
	for _, op := range writeOps {
		lat[op] = write
	}
	return Profile{
		Name:    "aws",
		Latency: lat,
		// A GSI is updated "within a fraction of a second" under normal
		// conditions (AWS: writes propagate "within 1 second"), longer "in
		// some unlikely failure scenarios": a production team waited 15 s.
		Lag: Dist{Median: 100 * time.Millisecond, P99: 800 * time.Millisecond, SpikeShare: 1e-3, SpikeMin: 2 * time.Second, SpikeMax: 15 * time.Second},
		Throughput: Throughput{
			PartitionWCU: 1000, PartitionRCU: 3000,
			IndexWCU: 1000, IndexRCU: 3000,
			Burst:   time.Second,
			WarmWCU: 4000, WarmRCU: 12000,
			PeakWindow: 30 * time.Minute,
			QuotaWCU:   40000, QuotaRCU: 40000,
		},
		Faults: Faults{Before: 0.001, After: 0.001, Drop: 0.001},
		Meter:  true,
	}
}

// Dynalite is the profile that adds nothing: every request is forwarded to
// dynalite and its reply returned unchanged (no latency, no lag, no
// throttling, no faults, no metering).
func Dynalite() Profile { return Profile{Name: "dynalite"} }

// ProfileByName is AWS() for "aws" and Dynalite() for "dynalite".
func ProfileByName(name string) (Profile, error) {
	switch name {
	case "aws":
		return AWS(), nil
	case "dynalite":
		return Dynalite(), nil
	}
	return Profile{}, fmt.Errorf("dynamodel: unknown profile %q (aws or dynalite)", name)
}
