//go:build fleetsim

package fleetsim

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
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
	// between a session's first and last delivered seq (loss; in a standby
	// run the control sessions' are StandbyFigures.ControlLost instead).
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

	// Moves are the exact dark times (dark.go) of the rebalancing moves:
	// each first delivery of a tenure on another worker than the
	// session's last delivery's, no fault's recovery.
	Moves Dark `json:"moves"`

	// Claims are the fleet's claims against its claim budget (claimrate.go).
	Claims ClaimRate    `json:"claims"`
	Faults []Recovery   `json:"faults"`
	ECS    []ECSOp      `json:"ecs,omitempty"` // deploys, scale-outs and -ins (ecs.go)
	Table  TableFigures `json:"table"`
	// Steady is the table in the steady state (steady.go).
	Steady Steady `json:"steady"`
	// PreFault is the held fleet's writes before the first fault, when
	// there was no steady window (prefault.go).
	PreFault *PreFault `json:"pre_fault,omitempty"`
	// Contended is what the seed could not fix (simddb.Meter.Contended):
	// calls on one item that met another in flight.
	Contended int64 `json:"contended"`
	// Standby are a standby run's figures (Config.StandbyShare; standby.go):
	// its Gaps are the standby sessions' only.
	Standby *StandbyFigures `json:"standby,omitempty"`
}

// Recovery is how the sessions a fault hit delivered again: the time from
// the fault to each one's first delivery by another worker.
type Recovery struct {
	Kind      string   `json:"kind"`
	At        float64  `json:"at"` // seconds from the fleet's start
	Workers   []string `json:"workers"`
	Sessions  int      `json:"sessions"`
	Recovered int      `json:"recovered"`
	P50       float64  `json:"p50"`
	P99       float64  `json:"p99"`
	Max       float64  `json:"max"`
	// Deciles are the times by which a tenth, two tenths, …, all of the
	// sessions that recovered had: the recovery's curve (a takeover at a
	// steady claim rate rises evenly; a tail stretched by a few workers'
	// backlogs bunches its last deciles apart).
	Deciles     []float64 `json:"deciles,omitempty"`
	Unrecovered []string  `json:"unrecovered,omitempty"`
	// Slowest are the sessions that took longest (at most slowestKept,
	// the slowest first): the ones to replay with -sim.watch.
	Slowest []Slow `json:"slowest,omitempty"`
	// Bound is the fault's own bound on Max (Fault.Bound; 0: the judge's).
	Bound float64 `json:"bound,omitempty"`
	// Unfenced are deliveries in the fault's quiet span (Fault.Quiet): by
	// a worker that should have stopped on its own.
	Unfenced int64 `json:"unfenced,omitempty"`
	// P50, P99 and Max include a session's deliveries after the fault
	// (a drain's streaming until its turn): an upper bound of its dark
	// time. Dark is the exact dark time of the tenure change that ended
	// each session's recovery (dark.go), of those measured (Dark.N);
	// dark are those times, sorted (ecsRecoveries pools them).
	Dark Dark `json:"dark"`
	dark []float64
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
	// HeartbeatsThrottled are the workers' heartbeats throttled.
	HeartbeatsThrottled int64 `json:"heartbeats_throttled"`
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
	// ReadUnits by what they read (readSplit): the worker records (grow
	// with the fleet) and the sessions (grow with the sessions a worker
	// holds).
	WorkerReadUnits  float64 `json:"worker_read_units"`
	SessionReadUnits float64 `json:"session_read_units"`
	// Ops is the workers' calls by lease.Store operation, per worker-hour
	// (readkinds.go).
	Ops map[string]OpRate `json:"ops,omitempty"`
	// AcquiresPerSession is the workers' acquires per session started, and
	// AcquiresHeldPerSession those refused because another worker held the
	// session (lost races).
	AcquiresPerSession     float64 `json:"acquires_per_session"`
	AcquiresHeldPerSession float64 `json:"acquires_held_per_session"`
}

// Judge reads the fleet's records up to now: the figures the Record folded
// as the deliveries arrived (record.go), summed over the sessions started.
func (fl *Fleet) Judge(scenario string) Figures {
	now := time.Now()
	f := Figures{
		Scenario: scenario, Seed: fl.cfg.Seed, Workers: len(fl.Members()), Sessions: len(fl.Sessions()),
		Rate: fl.cfg.Rate, Virtual: now.Sub(fl.t0).Seconds(), SourceOverlaps: fl.SourceOverlaps(),
	}
	var sb *StandbyFigures
	if share := fl.cfg.StandbyShare; share > 0 {
		sb = &StandbyFigures{Share: share}
	}
	r := fl.Record
	r.mu.Lock()
	for _, id := range fl.Sessions() {
		lost := &f.Gaps
		if sb != nil {
			if fl.sb.has(id) {
				sb.Sessions++
			} else {
				sb.Control++
				lost = &sb.ControlLost
			}
		}
		s := r.by[id]
		if s == nil || s.n == 0 {
			f.Silent++
			continue
		}
		s.judge(now, &f, lost)
	}
	if sb != nil {
		sb.Lost = f.Gaps
		fl.standbyFigures(sb, r.faults)
		f.Standby = sb
	}
	f.Moves = r.moves.summary()
	f.Claims = fl.claims.figures(fl.claimBudget())
	for _, ft := range r.faults {
		if !judged(ft.Kind) {
			continue
		}
		f.Faults = append(f.Faults, ft.recovery(fl.t0))
	}
	if len(f.Faults) > 0 {
		f.Claims.From = f.Faults[0].At
	}
	f.Claims.Paths = fl.claims.pathsFrom(f.Claims.From)
	if len(f.Faults) > 0 {
		f.Claims.Windows = fl.claims.windowsFrom(f.Claims.From)
	}
	f.FirstDelivery = fl.firstDelivery(r)
	r.mu.Unlock()
	f.ECS = ecsRecoveries(fl.ECSOps(), f.Faults)
	f.SourceRefused = fl.src.RateLimited()
	f.Table = fl.tableFigures(now, f.Tenures)
	f.Steady = fl.steadyFigures()
	fl.mu.Lock()
	f.PreFault = fl.preFault
	fl.mu.Unlock()
	f.Contended = fl.Table.Meter().Contended
	fl.watch.writeSlowest(f.Faults)
	return f
}

// judgeSession adds to f the figures of one session's deliveries ds (in N
// order), folded as the Record folds them.
func judgeSession(ds []Delivery, now time.Time, f *Figures) {
	var s sessionLog
	for _, d := range ds {
		s.add(d)
	}
	s.judge(now, f, &f.Gaps)
}

// recovery is how the sessions ft hit delivered again: the time from the
// fault to each one's first delivery by another worker.
func (ft *faultLog) recovery(t0 time.Time) Recovery {
	r := Recovery{Kind: ft.Kind, At: ft.At.Sub(t0).Seconds(), Workers: ft.Workers, Sessions: len(ft.Sessions)}
	var took []float64
	for i, id := range ft.Sessions {
		if math.IsNaN(ft.took[i]) {
			r.Unrecovered = append(r.Unrecovered, id)
			continue
		}
		took = append(took, ft.took[i])
		r.Slowest = append(r.Slowest, Slow{id, ft.took[i]})
		if len(r.Slowest) > 4*slowestKept {
			r.Slowest = slowest(r.Slowest)
		}
	}
	r.Slowest = slowest(r.Slowest)
	r.Recovered = len(took)
	r.Bound = ft.Bound.Seconds()
	if ft.quiet != nil {
		r.Unfenced = ft.quiet.n
	}
	slices.Sort(took)
	r.P50, r.P99, r.Max = rank(took, 0.50), rank(took, 0.99), rank(took, 1)
	if len(took) > 0 {
		for d := 1; d <= 10; d++ {
			r.Deciles = append(r.Deciles, rank(took, float64(d)/10))
		}
	}
	for _, x := range ft.dark {
		if !math.IsNaN(x) {
			r.dark = append(r.dark, x)
		}
	}
	slices.Sort(r.dark)
	r.Dark = darkOf(r.dark)
	return r
}

// Slow is one session's time to delivering again.
type Slow struct {
	ID      string  `json:"id"`
	Seconds float64 `json:"seconds"`
}

// slowestKept bounds Recovery.Slowest.
const slowestKept = 5

// slowest is the slowestKept slowest of ss, the slowest first (ties by id).
func slowest(ss []Slow) []Slow {
	slices.SortFunc(ss, func(a, b Slow) int { return cmp.Or(cmp.Compare(b.Seconds, a.Seconds), cmp.Compare(a.ID, b.ID)) })
	return ss[:min(len(ss), slowestKept)]
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
	tf := TableFigures{Throttled: m.Throttled, HeartbeatsThrottled: heartbeatsThrottled(m)}
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
	var reads, writes, held int64
	for _, mb := range fl.Members() {
		end := mb.Ended
		if end.IsZero() {
			end = now
		}
		tf.WorkerHours += end.Sub(mb.Started).Hours()
		reads += mb.store.reads.Load()
		writes += mb.store.writes.Load()
		held += mb.store.held.Load()
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
	tf.WorkerReadUnits, tf.SessionReadUnits = readSplit(m)
	tf.Ops = opRates(m.Ops, nil, tf.WorkerHours)
	if n := len(fl.Sessions()); n > 0 {
		tf.AcquiresPerSession = float64(m.Ops[dynamostore.OpAcquire].Calls) / float64(n)
		tf.AcquiresHeldPerSession = float64(held) / float64(n)
	}
	if tenures > 0 {
		tf.WriteUnitsPerTenure = tf.WriteUnits / float64(tenures)
	}
	return tf
}
