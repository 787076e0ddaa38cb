// The judge's outputs: the Result of a run and what it holds (checks,
// violations, per-fault and per-kind recovery, transitions, totals).

package chaos

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Stats are latency figures in milliseconds.
type Stats struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// StatsOf computes the Stats of samples in milliseconds.
func StatsOf(ms []float64) Stats {
	if len(ms) == 0 {
		return Stats{}
	}
	s := append([]float64(nil), ms...)
	sort.Float64s(s)
	q := func(p float64) float64 { return s[int(math.Ceil(p*float64(len(s))))-1] }
	return Stats{N: len(s), P50: q(0.5), P99: q(0.99), Max: s[len(s)-1]}
}

// Violation is one broken rule, with the evidence that shows it.
type Violation struct {
	Check   string  `json:"check"`
	Session string  `json:"session,omitempty"`
	T       float64 `json:"t"` // seconds since the run started
	Detail  string  `json:"detail"`
	// HostCPU is the host's CPU pressure around T (the worst second of
	// T ± 2 s: the share of time some task waited for a CPU; -1 when not
	// measured). Context for a timing violation, never an excuse.
	HostCPU float64 `json:"host_cpu_pressure"`
}

// String is v in one line: its check, session, time and detail.
func (v Violation) String() string {
	return fmt.Sprintf("[%s] %s at %.1fs: %s", v.Check, v.Session, v.T, v.Detail)
}

// CheckResult is one check's outcome.
type CheckResult struct {
	Name       string `json:"name"`
	Rule       string `json:"rule"`
	Violations int    `json:"violations"`
	Figures    string `json:"figures"`
}

// FaultResult is one fault's effect, measured from the evidence.
type FaultResult struct {
	Fault
	T        float64 `json:"t"`        // start, seconds since the run started
	TEnd     float64 `json:"t_end"`    // end (lifted)
	RefNote  string  `json:"ref"`      // what recovery is measured from
	BoundMs  int64   `json:"bound_ms"` // 0: no recovery bound applies
	Affected int     `json:"affected"`
	// Recovered / Unrecovered: affected sessions delivered again (or not) by
	// the measure of the fault kind; Excluded: stopped before they could.
	Recovered   int      `json:"recovered"`
	Unrecovered []string `json:"unrecovered,omitempty"`
	Excluded    int      `json:"excluded,omitempty"`
	OverBound   int      `json:"over_bound"`
	// Recovery is measured from the reference instant; Dark is each
	// session's own gap (last delivery before → first after).
	Recovery Stats `json:"recovery"`
	Dark     Stats `json:"dark"`
	// Repeats are the raw repeats across the ownership changes it caused.
	Repeats int64 `json:"repeats"`

	// samples are the recoveries' delays (Recovery), dark the sessions'
	// gaps (Dark), in ms.
	samples, dark []float64
}

// KindResult aggregates the faults of one kind.
type KindResult struct {
	Kind      string `json:"kind"`
	Faults    int    `json:"faults"`
	Affected  int    `json:"affected"`
	BoundMs   int64  `json:"bound_ms"`
	Recovery  Stats  `json:"recovery"`
	OverBound int    `json:"over_bound"`
	Never     int    `json:"never_recovered"`
	Repeats   int64  `json:"repeats"`
}

// Overlap is a time the source had more than one connection of a session.
type Overlap struct {
	Session string   `json:"session"`
	T       float64  `json:"t"`
	DurMs   float64  `json:"duration_ms"`
	Max     int      `json:"max"`
	Conns   []string `json:"conns"` // "#id by worker@epoch (reason)"
	// Tenure: connections of this one tenure (Result.PlannedOverlaps);
	// Violation: not a planned reconnect (see CheckOneConn).
	Tenure    string `json:"tenure,omitempty"`
	Violation bool   `json:"violation,omitempty"`
}

// PlannedResult sums up the planned reconnects (make-before-break) of a
// run: the sessions started with them, the overlaps of one tenure at the
// source (judged by the one-connection check), the largest gap in each
// session's deliveries across one, and what the workers logged.
type PlannedResult struct {
	Sessions int   `json:"sessions"` // started with planned reconnects
	Overlaps int   `json:"overlaps"` // of one tenure, at the source
	Rejected int   `json:"rejected"` // of those, not a planned reconnect (violations)
	Overlap  Stats `json:"overlap"`  // how long both connections were open
	// Dark is, per switch, the gap in the session's deliveries across it:
	// its last delivery before the older connection closed → its first
	// after, by the same tenure (the messages' own spacing, 1 / rate, when
	// the switch left no gap; an overlap a kill or a hand-off ended is left
	// out).
	Dark Stats `json:"dark"`
	// FeedPlanned is the feed's own count of planned overlaps.
	FeedPlanned int64 `json:"feed_planned"`
	// Switched / GivenUp / Dropped: the workers' log lines (switched to
	// the new connection; given up, the current one stayed; the messages
	// both carried, dropped by the dedupe); SavedMs the gap each switch
	// saved (the new connection's dial to caught up).
	Switched int            `json:"switched"`
	GivenUp  int            `json:"given_up"`
	Dropped  int64          `json:"overlap_dropped"`
	Saved    Stats          `json:"gap_saved"`
	ByCause  map[string]int `json:"by_cause,omitempty"`
}

// Transitions counts ownership changes by cause.
type Transitions struct {
	Cause   string  `json:"cause"`
	Count   int     `json:"count"`
	Repeats int64   `json:"repeats"`
	MaxOne  int64   `json:"max_in_one"` // the most repeats of one change
	Bound   int64   `json:"bound"`      // -1: no bound (none allowed)
	GapP50  float64 `json:"gap_p50_ms"`
	GapMax  float64 `json:"gap_max_ms"`
}

// Pressure summarises the host's CPU pressure, per second.
type Pressure struct {
	Measured bool      `json:"measured"`
	Mean     float64   `json:"mean"`
	Max      float64   `json:"max"`
	Over50   int       `json:"seconds_over_50pct"`
	PerSec   []float64 `json:"per_second,omitempty"` // index = second since the run started
}

// OffsetResult shows that the skewed clock took part: the tenures its
// workers took over from a worker that had stopped heartbeating (a crash,
// a zombie, a partition or an outage) and the tenures others took over
// from it. Nothing in the protocol reads a wall clock to decide: deaths are
// judged by a heartbeat counter on the observer's monotonic clock.
type OffsetResult struct {
	OffsetMs  int64    `json:"offset_ms"`
	Workers   []string `json:"workers"`
	Tenures   int      `json:"tenures"`
	TookOver  int      `json:"took_over"`
	TakenOver int      `json:"taken_over"`
}

// Totals are the evidence's sizes.
type Totals struct {
	Sessions    int   `json:"sessions"`
	Deliveries  int   `json:"deliveries"` // raw sink records
	Distinct    int64 `json:"distinct"`   // after dedupe
	SentSeqs    int64 `json:"sent_seqs"`  // distinct seqs the feed wrote
	Connections int   `json:"connections"`
	Refused     int   `json:"refused"` // attempts the source refused (control or policy)
	Tenures     int   `json:"tenures"`
	Lost        int64 `json:"lost"`
	Gaps        int64 `json:"gaps"`
	Tail        int64 `json:"tail"`  // sent after the last delivery (in flight at a stop or the end; resumed from the checkpoint)
	Stale       int64 `json:"stale"` // deliveries under an epoch older than one the session had delivered
	Repeats     int64 `json:"repeats"`
	Truncated   int   `json:"truncated_lines"`
	// Skipped are seqs the workers logged as skipped after a permanent
	// sink refusal (excused from no-loss); Reordered deliveries at the
	// destination not above their tenure's previous one (an AWS sink:
	// a standard queue keeps no order, a retried entry lands after later
	// ones, a retry after a timeout whose request was stored repeats it).
	Skipped   int64 `json:"skipped,omitempty"`
	Reordered int64 `json:"reordered_in_tenure,omitempty"`
	// Inverted (the kinesis sink, judged): arrivals of a tenure, in the
	// stream's order, below a (seq, sub) the tenure had already written
	// and not themselves written before by it (a repeat is not an
	// inversion).
	Inverted     int64 `json:"inverted_in_tenure,omitempty"`
	Incarnations int   `json:"incarnations"`
	Actions      int   `json:"api_actions"`
}

// Result is a judged run.
type Result struct {
	Settings     Settings      `json:"settings"`
	Plan         Plan          `json:"plan"`
	Started      time.Time     `json:"started"`
	DurationMs   int64         `json:"duration_ms"`
	Totals       Totals        `json:"totals"`
	Checks       []CheckResult `json:"checks"`
	Violations   []Violation   `json:"violations"`
	Kinds        []KindResult  `json:"kinds"`
	Faults       []FaultResult `json:"faults"`
	Claims       Stats         `json:"claims"` // every start and re-start: ack → first delivery
	Stops        Stats         `json:"stops"`  // stop ack → the source's connection closed
	StopsChecked int           `json:"stops_checked"`
	Transitions  []Transitions `json:"transitions"`
	Overlaps     []Overlap     `json:"overlaps"`
	// PlannedOverlaps are the overlaps of connections of one tenure, and
	// Planned the planned reconnects' figures.
	PlannedOverlaps []Overlap     `json:"planned_overlaps,omitempty"`
	Planned         PlannedResult `json:"planned"`
	Incarnations    []Incarnation `json:"incarnations"`
	// SelfFenceMs is, per DynamoDB outage or partition, how long after it
	// began the last delivery of a tenure that could no longer heartbeat
	// arrived.
	SelfFenceMs []float64  `json:"self_fence_ms,omitempty"`
	SinkFiles   []SinkFile `json:"sink_files"`
	// HostCPU is the host's CPU pressure during the run (Linux PSI "some":
	// the share of time at least one task waited for a CPU), per second.
	HostCPU Pressure `json:"host_cpu_pressure"`
	// ClockOffset is what the workers with a lease clock offset did.
	ClockOffset OffsetResult `json:"clock_offset"`
	// TrustLateMs is, per DynamoDB-path freeze, how long after it began the
	// last record of a frozen worker's tenures reached the destination
	// before the thaw (AWS sink).
	TrustLateMs []float64 `json:"trust_late_ms,omitempty"`
	// PrefixChecked counts the checkpoints, release_seqs and released
	// last_seqs held to the destination's complete prefix.
	PrefixChecked int           `json:"prefix_checked,omitempty"`
	Sink          *SinkEvidence `json:"sink,omitempty"`
	// Poison is what the sources sent poisoned (source-poison) and what
	// reached the destination of it.
	Poison PoisonResult `json:"poison,omitzero"`
	// Standby sums up the sessions whose source cannot replay, with a hot
	// standby and without (check_standby.go).
	Standby StandbyResult `json:"standby,omitzero"`
	Missing []string      `json:"missing_kinds,omitempty"` // fault kinds the run did not inject
}

// OK reports whether the run had no violation.
func (r Result) OK() bool { return len(r.Violations) == 0 }
