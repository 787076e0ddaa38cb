//go:build fleetsim

package fleetsim

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/wsfleet/wsfleet/testkit/simddb"
)

// Figures are what the judge found in the simulator's own records (the
// deliveries and faults of Record, the table's meters, the workers'
// coordination counts). Durations are in seconds of virtual time.
type Figures struct {
	Scenario string  `json:"scenario"`
	Seed     uint64  `json:"seed"`
	Workers  int     `json:"workers"` // started, thieves included
	Sessions int     `json:"sessions"`
	Rate     float64 `json:"rate"`    // messages per second per session
	Virtual  float64 `json:"virtual"` // seconds simulated

	Deliveries int64 `json:"deliveries"`
	Tenures    int   `json:"tenures"` // (session, worker, epoch) that delivered

	// DoubleOwners are the sessions with two tenures delivering at once:
	// tenure A's deliveries span [first, last] in the destination's total
	// order (Delivery.N), and another tenure of the session delivered
	// strictly inside that span (b.first < a.last, b beginning after a).
	// Pairs counts such tenure pairs; Overlapping the pairs' deliveries
	// while both were active (from the later's first to the earlier's
	// last, both included).
	DoubleOwners int   `json:"double_owners"`
	DoublePairs  int   `json:"double_pairs"`
	Overlapping  int64 `json:"overlapping_deliveries"`
	// Fenced are the deliveries whose epoch is below one the destination
	// had already received for the session: those a consumer fencing by
	// LeaseEpoch drops (sink's package doc). Counted apart from the above:
	// they are part of a double owner, not a second kind of fault.
	Fenced int64 `json:"fenced"`
	// Replays are deliveries of a seq already delivered (the documented
	// redelivery after the last checkpoint); Gaps are seqs never delivered
	// between a session's first and last delivered seq (loss).
	Replays int64 `json:"replays"`
	Gaps    int64 `json:"gaps"`
	// Silent are the sessions started that never delivered.
	Silent int `json:"silent"`
	// LongestSilence is the longest time between two deliveries of one
	// session (after its first, until the end).
	LongestSilence float64 `json:"longest_silence"`
	// SourceOverlaps are two connections of a session open at once, as
	// the source saw them.
	SourceOverlaps int `json:"source_overlaps"`
	// SourceRefused are the dials the source refused over its per-IP
	// connection-rate limit (Config.ConnLimit).
	SourceRefused int64 `json:"source_refused,omitempty"`
	// FirstDelivery is each session's time from its start write to its
	// first delivery (faults.go).
	FirstDelivery Latency `json:"first_delivery"`

	Faults []Recovery   `json:"faults"`
	ECS    []ECSOp      `json:"ecs,omitempty"` // deploys, scale-outs and -ins (ecs.go)
	Table  TableFigures `json:"table"`
	// Contended is what the seed could not fix (simddb.Meter.Contended):
	// calls on one item that met another in flight.
	Contended int64 `json:"contended"`
}

// Recovery is how the sessions a fault hit delivered again: the time from
// the fault to each one's first delivery by another worker.
type Recovery struct {
	Kind        string   `json:"kind"`
	At          float64  `json:"at"` // seconds from the fleet's start
	Workers     []string `json:"workers"`
	Sessions    int      `json:"sessions"`
	Recovered   int      `json:"recovered"`
	P50         float64  `json:"p50"`
	P99         float64  `json:"p99"`
	Max         float64  `json:"max"`
	Unrecovered []string `json:"unrecovered,omitempty"`
	// Bound is the fault's own bound on Max (Fault.Bound; 0: the judge's).
	Bound float64 `json:"bound,omitempty"`
	// Unfenced are deliveries in the fault's quiet span (Fault.Quiet): by
	// a worker that should have stopped on its own.
	Unfenced int64 `json:"unfenced,omitempty"`
}

// Peak is the busiest second of one key against its limit.
type Peak struct {
	Key   string  `json:"key"`
	Units float64 `json:"units"`
	Limit float64 `json:"limit"` // per second; 0: none modelled
}

// busier is the busier of p and key at units; of two as busy, the smaller
// key, so that a peak does not depend on the order a map is read in.
func (p Peak) busier(key string, units float64) Peak {
	if units > p.Units || units == p.Units && units > 0 && (p.Key == "" || key < p.Key) {
		return Peak{Key: key, Units: units}
	}
	return p
}

// TableFigures summarize the simulated table's meters.
type TableFigures struct {
	WritePartition Peak `json:"write_partition"` // busiest partition key value
	ReadPartition  Peak `json:"read_partition"`
	WriteIndexKey  Peak `json:"write_index_key"` // busiest index key value ("index/value")
	ReadIndexKey   Peak `json:"read_index_key"`
	WriteTable     Peak `json:"write_table"`
	ReadTable      Peak `json:"read_table"`
	// Throttled are the calls throttled, by reason.
	Throttled map[string]int64 `json:"throttled"`
	// The workers' coordination calls (every lease.Store call) per worker
	// hour of their lives.
	WorkerHours        float64 `json:"worker_hours"`
	ReadsPerWorkerHour float64 `json:"reads_per_worker_hour"`
	WritesPerWorkerHr  float64 `json:"writes_per_worker_hour"`
	// WriteUnitsPerTenure are the workers' write units (table and indexes,
	// the harness's seeds excluded) per tenure.
	WriteUnitsPerTenure float64 `json:"write_units_per_tenure"`
	WriteUnits          float64 `json:"write_units"`
	ReadUnits           float64 `json:"read_units"`
}

// Judge reads the fleet's records up to now.
func (fl *Fleet) Judge(scenario string) Figures {
	by, faults := fl.Record.snapshot()
	now := time.Now()
	f := Figures{
		Scenario: scenario, Seed: fl.cfg.Seed, Workers: len(fl.Members()), Sessions: len(fl.Sessions()),
		Rate: fl.cfg.Rate, Virtual: now.Sub(fl.t0).Seconds(), SourceOverlaps: fl.SourceOverlaps(),
	}
	for _, id := range fl.Sessions() {
		ds := by[id]
		if len(ds) == 0 {
			f.Silent++
			continue
		}
		f.Deliveries += int64(len(ds))
		judgeSession(ds, now, &f)
	}
	for _, ft := range faults {
		if !judged(ft.Kind) {
			continue
		}
		f.Faults = append(f.Faults, quiet(ft, by, recovery(ft, by, fl.t0)))
	}
	f.ECS = ecsRecoveries(fl.ECSOps(), f.Faults)
	f.FirstDelivery = fl.firstDelivery(by)
	f.SourceRefused = fl.feed.Stats().RateLimited
	f.Table = fl.tableFigures(now, f.Tenures)
	f.Contended = fl.Table.Meter().Contended
	return f
}

type tenure struct {
	worker      string
	epoch       int64
	first, last int64 // N
}

func (t *tenure) has(d Delivery) bool { return d.Worker == t.worker && d.Epoch == t.epoch }

func judgeSession(ds []Delivery, now time.Time, f *Figures) {
	// ds is in N order (appended under the record's lock).
	var ts []*tenure
	idx := map[[2]any]*tenure{}
	seen := map[int64]bool{}
	var maxEpoch int64
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i, d := range ds {
		k := [2]any{d.Worker, d.Epoch}
		t := idx[k]
		if t == nil {
			t = &tenure{worker: d.Worker, epoch: d.Epoch, first: d.N}
			idx[k] = t
			ts = append(ts, t)
		}
		t.last = d.N
		if d.Epoch < maxEpoch {
			f.Fenced++
		}
		maxEpoch = max(maxEpoch, d.Epoch)
		if seen[d.Seq] {
			f.Replays++
		}
		seen[d.Seq] = true
		lo, hi = min(lo, d.Seq), max(hi, d.Seq)
		if i > 0 {
			f.LongestSilence = max(f.LongestSilence, d.At.Sub(ds[i-1].At).Seconds())
		}
	}
	f.LongestSilence = max(f.LongestSilence, now.Sub(ds[len(ds)-1].At).Seconds())
	f.Gaps += (hi - lo + 1) - int64(len(seen))
	f.Tenures += len(ts)
	double := false
	for i, a := range ts {
		for _, b := range ts[i+1:] { // b began after a (first in N order)
			if b.first >= a.last {
				continue
			}
			double = true
			f.DoublePairs++
			for _, d := range ds {
				in := d.N >= b.first && d.N <= a.last
				if in && (a.has(d) || b.has(d)) {
					f.Overlapping++
				}
			}
		}
	}
	if double {
		f.DoubleOwners++
	}
}

func recovery(ft Fault, by map[string][]Delivery, t0 time.Time) Recovery {
	r := Recovery{Kind: ft.Kind, At: ft.At.Sub(t0).Seconds(), Workers: ft.Workers, Sessions: len(ft.Sessions)}
	gone := map[string]bool{}
	for _, w := range ft.Workers {
		gone[w] = true
	}
	var took []float64
	for _, id := range ft.Sessions {
		ds := by[id]
		i, _ := slices.BinarySearchFunc(ds, ft.N+1, func(d Delivery, n int64) int { return cmp.Compare(d.N, n) })
		j := slices.IndexFunc(ds[i:], func(d Delivery) bool { return !gone[d.Worker] })
		if j < 0 {
			r.Unrecovered = append(r.Unrecovered, id)
			continue
		}
		took = append(took, ds[i+j].At.Sub(ft.At).Seconds())
	}
	r.Recovered = len(took)
	slices.Sort(took)
	r.P50, r.P99, r.Max = rank(took, 0.50), rank(took, 0.99), rank(took, 1)
	return r
}

// rank is the nearest-rank percentile p of sorted xs (0 when empty).
func rank(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}

func (fl *Fleet) tableFigures(now time.Time, tenures int) TableFigures {
	m := fl.Table.Meter()
	th := fl.Table.Config().Throughput
	tf := TableFigures{Throttled: m.Throttled}
	for k, rw := range m.Partitions {
		tf.WritePartition = tf.WritePartition.busier(k, rw.Write.Peak)
		tf.ReadPartition = tf.ReadPartition.busier(k, rw.Read.Peak)
	}
	for ix, keys := range m.IndexKeys {
		for k, rw := range keys {
			tf.WriteIndexKey = tf.WriteIndexKey.busier(ix+"/"+k, rw.Write.Peak)
			tf.ReadIndexKey = tf.ReadIndexKey.busier(ix+"/"+k, rw.Read.Peak)
		}
	}
	tf.WritePartition.Limit, tf.ReadPartition.Limit = th.PartitionWCU, th.PartitionRCU
	tf.WriteIndexKey.Limit, tf.ReadIndexKey.Limit = th.IndexWCU, th.IndexRCU
	tf.WriteTable = Peak{Key: fl.Table.Config().Table, Units: m.Table.Write.Peak, Limit: th.WarmWCU}
	tf.ReadTable = Peak{Key: fl.Table.Config().Table, Units: m.Table.Read.Peak, Limit: th.WarmRCU}
	var reads, writes int64
	for _, mb := range fl.Members() {
		end := mb.Ended
		if end.IsZero() {
			end = now
		}
		tf.WorkerHours += end.Sub(mb.Started).Hours()
		reads += mb.store.reads.Load()
		writes += mb.store.writes.Load()
	}
	if tf.WorkerHours > 0 {
		tf.ReadsPerWorkerHour = float64(reads) / tf.WorkerHours
		tf.WritesPerWorkerHr = float64(writes) / tf.WorkerHours
	}
	for op, u := range m.Ops {
		if op == simddb.OpSeed || op == simddb.OpIngest {
			continue
		}
		tf.WriteUnits += u.WriteUnits + u.IndexWriteUnits
		tf.ReadUnits += u.ReadUnits
	}
	if tenures > 0 {
		tf.WriteUnitsPerTenure = tf.WriteUnits / float64(tenures)
	}
	return tf
}
