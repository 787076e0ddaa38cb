package chaos

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// Check names (every Violation names one).
const (
	CheckOneConn   = "one-connection"
	CheckNoLoss    = "no-loss"
	CheckOrder     = "order"
	CheckRepeats   = "repeats"
	CheckFencing   = "fencing"
	CheckCrash     = "recovery-crash"
	CheckHandoff   = "recovery-handoff"
	CheckOutage    = "recovery-outage"
	CheckSource    = "recovery-source"
	CheckClaim     = "claim"
	CheckStop      = "stop"
	CheckEndOwners = "end-ownership"
	CheckRelease   = "release"
	CheckSink      = "sink-integrity"
	CheckRebalance = "rebalance"
	// With an AWS sink (the judge reads the destination):
	CheckTrust        = "trust-deadline"    // nothing of a tenure reaches the destination after its trust deadline + the request timeout
	CheckPrefix       = "checkpoint-prefix" // no checkpoint or release_seq past a seq missing at the destination
	CheckSinkRecovery = "recovery-sink"     // a sink fault lifted: every session it hit delivers new seqs within the bound
)

// checkRules are the checks in report order, with what each one holds.
var checkRules = []struct{ name, rule string }{
	{CheckOneConn, "at every instant at most one open connection per session (the feed's records); no attempt refused because another was open"},
	{CheckNoLoss, "every seq the feed sent is delivered (after dedupe by connection_id + seq); no gap inside the delivered range; nothing delivered that was never sent; checkpoints never ahead of the sink; a seq the worker logged as skipped (permanent sink refusal, on_sink_refusal skip) is excused only if the sink fault proxy refused that message permanently"},
	{CheckOrder, "per session, first deliveries in seq order; within a tenure (worker, epoch) strictly increasing, no repeat"},
	{CheckRepeats, "raw repeats only across a crash, a zombie, a partition or a DynamoDB outage, within the checkpoint bound; none across a graceful handoff, a rebalancing move, a stop/re-start or an unexplained owner change"},
	{CheckFencing, "no delivery under a stale epoch once a newer epoch delivered; no delivery by a worker that cannot heartbeat after its trust deadline (last heartbeat + TTL − safety margin: zombie, partition, DynamoDB down)"},
	{CheckCrash, "after kill -9, SIGSTOP or a partition from DynamoDB every session of the worker is delivered again by a newer tenure within TTL + watch interval + margin; a zombie or partitioned worker learns it is DEAD at its next heartbeat and exits non-zero"},
	{CheckHandoff, "after SIGTERM (rolling restart, clock-offset restart) every session of the worker is delivered again by another worker within 1 s"},
	{CheckRebalance, "after a worker joins (scale-out) every running worker is within ±10 % (or 2 sessions) of its fair share within the balance bound (minimum hold + 6 rounds + 2 s); every rebalancing move (a graceful hand-off) is delivered by its receiver within 1 s of its previous owner's last delivery, with no repeat; after a scale-in (SIGTERM, not restarted) every session of the worker is delivered again by another worker within 1 s"},
	{CheckOutage, "after DynamoDB is back every session is delivered again by a new tenure within the claim bound"},
	{CheckSource, "after the source drops a connection, or stops refusing, the session delivers again within the reconnect bound"},
	{CheckClaim, "every start and re-start (SQS up or down) is delivered within the claim bound"},
	{CheckStop, "a STOPPED session's connection closes within one heartbeat interval (+ margin; whichever worker the SQS stop reaches), nothing is delivered after, it never reopens and no newer tenure is acquired while it is STOPPED"},
	{CheckEndOwners, "after the last fault: no session owned by a DEAD or LEFT worker (or one whose process ended); every STARTED session owned by an ALIVE worker that is running; every ended process's record DEAD or LEFT, every running one's ALIVE"},
	{CheckRelease, "after SIGTERM of every worker: no session has an owner (lease_owner absent), every worker record LEFT (DEAD for those killed or declared dead), every worker exited 0, every final checkpoint (ckpt# item) equal to the highest seq delivered"},
	{CheckSink, "stdout sink: every stdout line is a sink record; each worker slot's sink file names only its own incarnations; the files hold what the harness received. AWS sink: every destination message is a sink envelope naming a worker incarnation of the run; the workers' stdout holds no sink line"},
	{CheckTrust, "AWS sink: while the harness has a worker's DynamoDB path frozen from F (DynamoDB down, a partition, a zombie's SIGSTOP, the sink+DynamoDB faults), nothing of its tenures reaches the destination after F + TTL − margin + the sink request timeout + a tolerance (until the thaw; for good after a partition or a SIGSTOP: it was declared dead)"},
	{CheckPrefix, "every session's checkpoint and release_seq (the table, read after the last fault and after the shutdown) and every last_seq a worker logged releasing or handing it off is at most the highest seq S such that every seq from the session's first up to S is at the destination (seqs the worker logged as skipped after a permanent sink refusal excused)"},
	{CheckSinkRecovery, "after a sink fault (latency, refusals, freeze; refusals with every DynamoDB path frozen) is lifted, every session it hit delivers a new seq within the bound"},
}

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

	samples []float64
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

// pressure turns the samples into per-second fractions.
func (j *judge) pressure() {
	ps := j.ev.CPUPressure
	if len(ps) < 2 {
		return
	}
	n := int(j.ev.End.Sub(j.ev.Start).Seconds()) + 1
	per := make([]float64, n)
	wall := make([]float64, n)
	for i := 1; i < len(ps); i++ {
		a, b := ps[i-1], ps[i]
		dt := float64(b.AtNs - a.AtNs)
		if dt <= 0 {
			continue
		}
		sec := int(j.sec(a.AtNs))
		if sec < 0 || sec >= n {
			continue
		}
		per[sec] += float64(b.TotalUs-a.TotalUs) * 1e3
		wall[sec] += dt
	}
	p := Pressure{Measured: true, PerSec: make([]float64, n)}
	var sum float64
	var cnt int
	for i := range per {
		if wall[i] == 0 {
			continue
		}
		f := min(per[i]/wall[i], 1)
		p.PerSec[i] = math.Round(f*1000) / 1000
		sum += f
		cnt++
		p.Max = max(p.Max, f)
		if f > 0.5 {
			p.Over50++
		}
	}
	if cnt > 0 {
		p.Mean = sum / float64(cnt)
	}
	j.res.HostCPU = p
}

// hostCPUAround is the worst second of the host's CPU pressure in t ± 2 s
// (-1: not measured).
func (j *judge) hostCPUAround(t float64) float64 {
	p := j.res.HostCPU
	if !p.Measured {
		return -1
	}
	worst := 0.0
	for s := int(t) - 2; s <= int(t)+2; s++ {
		if s >= 0 && s < len(p.PerSec) {
			worst = max(worst, p.PerSec[s])
		}
	}
	return worst
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
	Skipped      int64 `json:"skipped,omitempty"`
	Reordered    int64 `json:"reordered_in_tenure,omitempty"`
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
	Incarnations []Incarnation `json:"incarnations"`
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
	Missing       []string      `json:"missing_kinds,omitempty"` // fault kinds the run did not inject
}

// OK reports whether the run had no violation.
func (r Result) OK() bool { return len(r.Violations) == 0 }

// tenure is one (worker, epoch) of one session: its deliveries' span.
type tenure struct {
	worker           string
	epoch            int64
	firstAt, lastAt  int64
	firstSeq, maxSeq int64
	n                int
	repeats          int64 // its deliveries of seqs an earlier tenure delivered
	badOrder         int   // deliveries not above its previous one
	stale            int   // deliveries after a newer epoch delivered
	staleFirst       int64
}

func (t *tenure) key() string { return fmt.Sprintf("%s@%d", t.worker, t.epoch) }

// sessionView is one session's evidence, indexed.
type sessionView struct {
	id       string
	dels     []Delivery // by arrival
	tenures  []*tenure  // by first delivery
	byKey    map[string]*tenure
	seen     map[int64]*tenure // seq → the tenure that delivered it first
	conns    []feed.ConnRecord // accepted connections
	refused  []feed.ConnRecord
	actions  []Action // by time
	maxD     int64
	minD     int64
	inverted int // first deliveries below an earlier first delivery
	// skipped are the seqs a worker logged as skipped (a permanent sink
	// refusal, on_sink_refusal skip); maxSkip the highest.
	skipped map[int64]bool
	maxSkip int64
}

// maxHandled is the highest seq delivered or skipped.
func (v *sessionView) maxHandled() int64 { return max(v.maxD, v.maxSkip) }

type judge struct {
	ev   Evidence
	set  Settings
	t0   int64
	res  Result
	sess map[string]*sessionView
	ids  []string
	inc  map[string]*Incarnation
	// faultRepeats are the raw repeats per fault number.
	faultRepeats map[int]int64
	// moves are the rebalancing hand-offs by session.
	moves map[string][]Move
}

func (j *judge) sec(ns int64) float64 { return float64(ns-j.t0) / 1e9 }

func (j *judge) violate(check, session string, atNs int64, format string, args ...any) {
	j.res.Violations = append(j.res.Violations, Violation{Check: check, Session: session, T: j.sec(atNs), Detail: fmt.Sprintf(format, args...)})
}

// Analyze judges a run's evidence against its settings.
func Analyze(ev Evidence, set Settings, plan Plan) Result {
	if set.destSink() && ev.Sink == nil {
		// Evidence without a destination (the benchmarks' stdout lines,
		// judged with chaos's default settings) is judged as stdout lines.
		set = set.asStdout()
	}
	j := &judge{ev: ev, set: set, t0: ev.Start.UnixNano(), sess: map[string]*sessionView{}, inc: map[string]*Incarnation{}}
	j.res = Result{Settings: set, Plan: plan, Started: ev.Start, DurationMs: ev.End.Sub(ev.Start).Milliseconds(), Incarnations: ev.Incarnations, SinkFiles: ev.SinkFiles}
	for i := range ev.Incarnations {
		j.inc[ev.Incarnations[i].ID] = &ev.Incarnations[i]
	}
	j.moves = map[string][]Move{}
	for _, m := range ev.Moves {
		j.moves[m.Session] = append(j.moves[m.Session], m)
	}
	j.res.Sink = ev.Sink
	j.index()
	for _, sk := range ev.Skips {
		v := j.view(sk.Session)
		if v.skipped == nil {
			v.skipped = map[int64]bool{}
		}
		if sk.Sub == 0 && !v.skipped[sk.Seq] {
			v.skipped[sk.Seq] = true
			v.maxSkip = max(v.maxSkip, sk.Seq)
			j.res.Totals.Skipped++
		}
	}
	j.pressure()
	j.checkConnections()
	j.checkDeliveries()
	j.checkTransitions()
	j.checkFaults()
	j.checkStarts()
	j.checkStops()
	j.checkTable()
	j.checkSinks()
	j.checkTrust()
	j.checkPrefix()
	j.summarize()
	return j.res
}

func (j *judge) view(id string) *sessionView {
	v := j.sess[id]
	if v == nil {
		v = &sessionView{id: id, byKey: map[string]*tenure{}, seen: map[int64]*tenure{}}
		j.sess[id] = v
	}
	return v
}

func (j *judge) index() {
	dels := append([]Delivery(nil), j.ev.Deliveries...)
	sort.SliceStable(dels, func(a, b int) bool { return dels[a].AtNs < dels[b].AtNs })
	for _, d := range dels {
		v := j.view(d.Session)
		v.dels = append(v.dels, d)
	}
	for _, c := range j.ev.Conns {
		v := j.view(c.Session)
		switch c.Reason {
		case feed.ReasonRefused:
			v.refused = append(v.refused, c)
			j.res.Totals.Refused++
		case feed.ReasonBadReq:
		default:
			v.conns = append(v.conns, c)
			j.res.Totals.Connections++
		}
	}
	for _, a := range j.ev.Actions {
		v := j.view(a.Session)
		v.actions = append(v.actions, a)
	}
	for _, v := range j.sess {
		sort.SliceStable(v.actions, func(a, b int) bool { return v.actions[a].At.Before(v.actions[b].At) })
		sort.SliceStable(v.conns, func(a, b int) bool { return v.conns[a].OpenedAt.Before(v.conns[b].OpenedAt) })
	}
	j.ids = sortedKeys(j.sess)
	j.res.Totals.Sessions = len(j.ids)
	j.res.Totals.Deliveries = len(dels)
	j.res.Totals.Incarnations = len(j.ev.Incarnations)
	j.res.Totals.Actions = len(j.ev.Actions)
	for _, sf := range j.ev.SinkFiles {
		j.res.Totals.Truncated += sf.Truncated
	}
}

// startedAt reports whether the harness had the session STARTED at t (its
// last acknowledged start/restart/stop before t).
func (v *sessionView) startedAt(t time.Time) bool {
	on := false
	for _, a := range v.actions {
		if a.Acked.IsZero() || a.Acked.After(t) {
			continue
		}
		on = a.Op != "stop"
	}
	return on
}

// nextStart is the first start/restart request of the session after t
// (ok false when none).
func (v *sessionView) nextStart(t time.Time) (time.Time, bool) {
	for _, a := range v.actions {
		if a.Op != "stop" && a.At.After(t) {
			return a.At, true
		}
	}
	return time.Time{}, false
}

// stoppedWithin reports whether a stop of the session was requested in [a, b].
func (v *sessionView) stoppedWithin(a, b time.Time) bool {
	for _, x := range v.actions {
		if x.Op == "stop" && !x.At.Before(a) && !x.At.After(b) {
			return true
		}
	}
	return false
}

func endOf(c feed.ConnRecord, fallback time.Time) time.Time {
	if c.ClosedAt.IsZero() {
		return fallback
	}
	return c.ClosedAt
}

// connOwner names the tenure that delivered what conn c carried.
func (v *sessionView) connOwner(c feed.ConnRecord) string {
	if c.Sent == 0 {
		return "?"
	}
	lo, hi := c.OpenedAt.UnixNano(), c.ClosedAt.Add(2*time.Second).UnixNano()
	if c.ClosedAt.IsZero() {
		hi = 1<<63 - 1
	}
	n := map[string]int{}
	best := "?"
	for _, d := range v.dels {
		if d.Seq >= c.FirstSeq && d.Seq <= c.LastSeq && d.AtNs >= lo && d.AtNs <= hi {
			k := fmt.Sprintf("%s@%d", d.Worker, d.Epoch)
			n[k]++
			if n[k] > n[best] {
				best = k
			}
		}
	}
	return best
}

func (j *judge) checkConnections() {
	for _, id := range j.ids {
		v := j.sess[id]
		type ev struct {
			t     int64
			delta int
			c     int
		}
		var evs []ev
		for i, c := range v.conns {
			evs = append(evs, ev{c.OpenedAt.UnixNano(), +1, i}, ev{endOf(c, j.ev.End).UnixNano(), -1, i})
		}
		sort.Slice(evs, func(a, b int) bool {
			if evs[a].t == evs[b].t {
				return evs[a].delta < evs[b].delta
			}
			return evs[a].t < evs[b].t
		})
		open := map[int]bool{}
		var cur *Overlap
		var curStart int64
		involved := map[int]bool{}
		for _, e := range evs {
			if e.delta > 0 {
				open[e.c] = true
			} else {
				delete(open, e.c)
			}
			if len(open) > 1 {
				if cur == nil {
					cur, curStart = &Overlap{Session: id, T: j.sec(e.t)}, e.t
					clear(involved)
				}
				cur.Max = max(cur.Max, len(open))
				for c := range open {
					involved[c] = true
				}
			} else if cur != nil {
				cur.DurMs = float64(e.t-curStart) / 1e6
				for _, c := range sortedInts(involved) {
					cr := v.conns[c]
					cur.Conns = append(cur.Conns, fmt.Sprintf("#%d by %s (%s)", cr.ID, v.connOwner(cr), orOpen(cr.Reason)))
				}
				j.res.Overlaps = append(j.res.Overlaps, *cur)
				j.violate(CheckOneConn, id, curStart, "%d connections open at once for %.1f ms: %s", cur.Max, cur.DurMs, strings.Join(cur.Conns, ", "))
				cur = nil
			}
		}
		for _, r := range v.refused {
			if r.RefusedBy == string(feed.ModeRefuseNewer) {
				j.violate(CheckOneConn, id, r.OpenedAt.UnixNano(), "a connection attempt was refused by the source's one-connection policy: another connection of the session was open (two would-be owners)")
			}
		}
	}
}

func orOpen(reason string) string {
	if reason == "" {
		return "still open"
	}
	return reason
}

func sortedInts(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

// checkDeliveries walks every session's deliveries in arrival order: tenures,
// stale epochs, order, repeats, then loss and gaps against what the feed sent.
func (j *judge) checkDeliveries() {
	for _, id := range j.ids {
		v := j.sess[id]
		var maxEpoch int64
		var maxFirst int64 = -1 << 62
		v.minD, v.maxD = 1<<62, -1<<62
		for _, d := range v.dels {
			k := fmt.Sprintf("%s@%d", d.Worker, d.Epoch)
			t := v.byKey[k]
			if t == nil {
				t = &tenure{worker: d.Worker, epoch: d.Epoch, firstAt: d.AtNs, firstSeq: d.Seq, maxSeq: -1 << 62}
				v.byKey[k] = t
				v.tenures = append(v.tenures, t)
			}
			t.n++
			t.lastAt = d.AtNs
			if d.Epoch < maxEpoch {
				if t.stale == 0 {
					t.staleFirst = d.AtNs
				}
				t.stale++
			}
			maxEpoch = max(maxEpoch, d.Epoch)
			if d.Seq <= t.maxSeq {
				t.badOrder++
			}
			t.maxSeq = max(t.maxSeq, d.Seq)
			if by, ok := v.seen[d.Seq]; ok {
				if by != t {
					t.repeats++ // across an ownership change (checkTransitions)
				}
				j.res.Totals.Repeats++
				continue
			}
			v.seen[d.Seq] = t
			if d.Seq < maxFirst {
				v.inverted++
			}
			maxFirst = max(maxFirst, d.Seq)
			v.minD, v.maxD = min(v.minD, d.Seq), max(v.maxD, d.Seq)
		}
		j.res.Totals.Tenures += len(v.tenures)
		for _, t := range v.tenures {
			if inc := j.inc[t.worker]; inc != nil && inc.OffsetMs != 0 {
				j.res.ClockOffset.Tenures++
			}
		}
		j.res.Totals.Distinct += int64(len(v.seen))
		for _, t := range v.tenures {
			j.res.Totals.Stale += int64(t.stale)
			if t.stale > 0 {
				j.violate(CheckFencing, id, t.staleFirst, "%d deliveries by %s under epoch %d after a newer epoch of the session had delivered", t.stale, t.worker, t.epoch)
			}
			if t.badOrder > 0 && j.set.destSink() {
				j.res.Totals.Reordered += int64(t.badOrder)
			} else if t.badOrder > 0 {
				j.violate(CheckOrder, id, t.firstAt, "%d deliveries by %s@%d not above the tenure's previous one (out of order or repeated within one tenure)", t.badOrder, t.worker, t.epoch)
			}
		}
		if v.inverted > 0 && !j.set.destSink() {
			j.violate(CheckOrder, id, j.t0, "%d first deliveries arrived after a higher seq had been delivered", v.inverted)
		}
		j.lossAndGaps(v)
	}
}

type span struct{ lo, hi int64 }

func (j *judge) lossAndGaps(v *sessionView) {
	var sent []span
	for _, c := range v.conns {
		if c.Sent > 0 {
			sent = append(sent, span{c.FirstSeq, c.LastSeq})
		}
	}
	sort.Slice(sent, func(a, b int) bool { return sent[a].lo < sent[b].lo })
	var merged []span
	for _, s := range sent {
		if n := len(merged); n > 0 && s.lo <= merged[n-1].hi+1 {
			merged[n-1].hi = max(merged[n-1].hi, s.hi)
			continue
		}
		merged = append(merged, s)
	}
	isSent := func(q int64) bool {
		i := sort.Search(len(merged), func(i int) bool { return merged[i].hi >= q })
		return i < len(merged) && merged[i].lo <= q
	}
	var lost, never []int64
	var nLost, nGap, nTail, nNever int64
	for _, s := range merged {
		j.res.Totals.SentSeqs += s.hi - s.lo + 1
		for q := s.lo; q <= s.hi; q++ {
			if _, ok := v.seen[q]; ok {
				continue
			}
			if v.skipped[q] {
				continue // the worker skipped it after a permanent refusal, and logged it
			}
			if q < v.maxD {
				nLost++
				if len(lost) < 8 {
					lost = append(lost, q)
				}
			} else {
				nTail++
			}
		}
	}
	if len(v.seen) > 0 {
		var gaps []int64
		for q := v.minD; q <= v.maxD; q++ {
			if _, ok := v.seen[q]; !ok && !isSent(q) && !v.skipped[q] {
				nGap++
				if len(gaps) < 8 {
					gaps = append(gaps, q)
				}
			}
		}
		if nGap > 0 {
			j.violate(CheckNoLoss, v.id, j.t0, "%d seq(s) inside the delivered range never sent by the source (the worker resumed past them), e.g. %v", nGap, gaps)
		}
		for q := range v.seen {
			if !isSent(q) {
				nNever++
				if len(never) < 8 {
					never = append(never, q)
				}
			}
		}
	}
	if nLost > 0 {
		j.violate(CheckNoLoss, v.id, j.t0, "%d seq(s) sent by the feed and never delivered, e.g. %v", nLost, lost)
	}
	if nNever > 0 {
		j.violate(CheckNoLoss, v.id, j.t0, "%d seq(s) delivered that the feed never sent, e.g. %v", nNever, never)
	}
	j.res.Totals.Lost += nLost
	j.res.Totals.Gaps += nGap
	j.res.Totals.Tail += nTail
}

// faultCause is what ended a tenure: the injected event nearest its last
// delivery, among those that can end it.
type cause struct {
	kind  string // crash | zombie | partition | handoff | stop | outage | unexplained
	fault int
	atNs  int64
}

// finalWriteSlack bounds the time from a tenure's last delivery to its
// final write (release or stop) when it ends gracefully: the read loop's stop
// and the sink's flush.
const finalWriteSlack = time.Second

func (j *judge) causeOf(v *sessionView, prev, next *tenure) cause {
	best := cause{kind: "unexplained", atNs: prev.lastAt}
	bestDist := int64(1 << 62)
	lo, hi := prev.lastAt-int64(2*time.Second), next.firstAt
	consider := func(kind string, fault int, at int64, dist int64) {
		if at < lo || at > hi {
			return
		}
		if dist < bestDist {
			best, bestDist = cause{kind: kind, fault: fault, atNs: at}, dist
		}
	}
	abs := func(x int64) int64 {
		if x < 0 {
			return -x
		}
		return x
	}
	for _, f := range j.ev.Faults {
		at := f.Start.UnixNano()
		switch f.Kind {
		case KindKill, KindZombie, KindPartition, KindRolling, KindClockOffset, KindScaleIn, KindSinkFreezeDynamo:
			if f.Worker != prev.worker {
				continue
			}
			k := map[string]string{KindKill: "crash", KindZombie: "zombie", KindPartition: "partition", KindRolling: "handoff", KindClockOffset: "handoff", KindScaleIn: "handoff",
				KindSinkFreezeDynamo: "partition"}[f.Kind]
			if (f.Kind == KindZombie || f.Kind == KindPartition || f.Kind == KindSinkFreezeDynamo) && prev.lastAt >= at && prev.lastAt <= f.End.Add(2*time.Second).UnixNano() {
				// It delivered while paused or cut off, or right after (the
				// fencing check judges that): the fault still ended it.
				consider(k, f.N, prev.lastAt, 0)
				continue
			}
			consider(k, f.N, at, abs(at-prev.lastAt))
		case KindDynamoDown, KindSinkRefuseDynamo:
			// A tenure the outage ended delivered until the worker fenced
			// itself (within the outage), or it had just stopped reading to
			// write its final seq (a hand-off, a rebalancing move, a stop)
			// when DynamoDB stopped answering, and the write failed: its
			// last delivery is then up to finalWriteSlack before the outage,
			// and its successor could only acquire after it.
			ended := prev.lastAt >= at && prev.lastAt <= f.End.Add(time.Second).UnixNano()
			cutOff := prev.lastAt >= at-int64(finalWriteSlack) && prev.lastAt < at && next.firstAt >= f.End.UnixNano()
			if ended || cutOff {
				if bestDist > 0 {
					best, bestDist = cause{kind: "outage", fault: f.N, atNs: at}, 0
				}
			}
		}
	}
	for _, m := range j.moves[v.id] {
		if m.From == prev.worker {
			consider("rebalance", 0, m.AtNs, abs(m.AtNs-prev.lastAt))
		}
	}
	for _, a := range v.actions {
		if a.Op == "stop" && !a.Acked.IsZero() {
			at := a.Acked.UnixNano()
			consider("stop", a.Fault, at, abs(at-prev.lastAt))
		}
	}
	return best
}

// checkTransitions attributes every ownership change to the event that
// ended the previous tenure and bounds its raw repeats.
func (j *judge) checkTransitions() {
	by := map[string]*Transitions{}
	gaps := map[string][]float64{}
	bounds := map[string]int64{"crash": j.set.Bounds.ReplayCrash, "zombie": j.set.Bounds.ReplayCrash, "partition": j.set.Bounds.ReplayOutage, "outage": j.set.Bounds.ReplayOutage}
	off := &j.res.ClockOffset
	skewed := func(w string) bool { inc := j.inc[w]; return inc != nil && inc.OffsetMs != 0 }
	for _, inc := range j.ev.Incarnations {
		if inc.OffsetMs != 0 {
			off.OffsetMs = inc.OffsetMs
			off.Workers = append(off.Workers, inc.ID)
		}
	}
	for _, id := range j.ids {
		v := j.sess[id]
		for i := 1; i < len(v.tenures); i++ {
			prev, next := v.tenures[i-1], v.tenures[i]
			c := j.causeOf(v, prev, next)
			takeover := c.kind == "crash" || c.kind == "zombie" || c.kind == "partition" || c.kind == "outage"
			if takeover && skewed(next.worker) {
				off.TookOver++
			}
			if takeover && skewed(prev.worker) {
				off.TakenOver++
			}
			tr := by[c.kind]
			if tr == nil {
				b, ok := bounds[c.kind]
				if !ok {
					b = -1
				}
				tr = &Transitions{Cause: c.kind, Bound: b}
				by[c.kind] = tr
			}
			tr.Count++
			tr.Repeats += next.repeats
			tr.MaxOne = max(tr.MaxOne, next.repeats)
			gaps[c.kind] = append(gaps[c.kind], float64(next.firstAt-prev.lastAt)/1e6)
			if gap := next.firstAt - prev.lastAt; c.kind == "rebalance" && gap > j.set.Bounds.HandoffMs*int64(time.Millisecond) && !j.disturbed(id, prev.lastAt, next.firstAt) {
				j.violate(CheckRebalance, id, next.firstAt, "rebalancing move from %s to %s: the receiver's first delivery %.0f ms after the sender's last (bound %d ms)",
					prev.key(), next.key(), float64(gap)/1e6, j.set.Bounds.HandoffMs)
			}
			if c.fault > 0 {
				j.addFaultRepeats(c.fault, next.repeats)
			}
			if next.repeats == 0 {
				continue
			}
			if tr.Bound < 0 {
				j.violate(CheckRepeats, id, next.firstAt, "%d raw repeat(s) when %s took over from %s after %s (none allowed)", next.repeats, next.key(), prev.key(), withArticle(causeText(c.kind)))
			} else if next.repeats > tr.Bound {
				j.violate(CheckRepeats, id, next.firstAt, "%d raw repeats when %s took over from %s after %s (bound %d)", next.repeats, next.key(), prev.key(), withArticle(causeText(c.kind)), tr.Bound)
			}
		}
		// Repeats of a seq by its own first tenure are counted as
		// out-of-order deliveries (checkDeliveries); a first tenure has no
		// predecessor to blame.
	}
	for _, k := range []string{"crash", "zombie", "partition", "outage", "handoff", "rebalance", "stop", "unexplained"} {
		if tr := by[k]; tr != nil {
			s := StatsOf(gaps[k])
			tr.GapP50, tr.GapMax = s.P50, s.Max
			j.res.Transitions = append(j.res.Transitions, *tr)
		}
	}
}

func causeText(k string) string {
	return map[string]string{
		"crash": "crash (kill -9)", "zombie": "zombie (SIGSTOP)", "partition": "partition from DynamoDB", "outage": "DynamoDB outage", "handoff": "graceful handoff (SIGTERM)",
		"rebalance": "rebalancing move (a directed graceful hand-off)", "stop": "stop / re-start through the API", "unexplained": "ownership change no injected fault explains",
	}[k]
}

func withArticle(s string) string {
	if strings.HasPrefix(s, "o") {
		return "an " + s
	}
	return "a " + s
}

func (j *judge) addFaultRepeats(n int, r int64) {
	if j.faultRepeats == nil {
		j.faultRepeats = map[int]int64{}
	}
	j.faultRepeats[n] += r
}

// lastBefore is the session's latest delivery at or before ns (nil: none).
func (v *sessionView) lastBefore(ns int64) *Delivery {
	i := sort.Search(len(v.dels), func(i int) bool { return v.dels[i].AtNs > ns })
	if i == 0 {
		return nil
	}
	return &v.dels[i-1]
}

// liveWindow: a session counts as delivering at an instant when its latest
// delivery is at most this old (the feed sends every 1/rate).
const liveWindow = 1500 * time.Millisecond

func (j *judge) faultResult(n int) *FaultResult {
	for i := range j.res.Faults {
		if j.res.Faults[i].N == n {
			return &j.res.Faults[i]
		}
	}
	return nil
}

func (j *judge) checkFaults() {
	b := j.set.Bounds
	if b.SinkRefuseRecoverMs == 0 {
		b.SinkRefuseRecoverMs = b.SinkRecoverMs // evidence saved before the refusal bound was its own
	}
	for _, f := range j.ev.Faults {
		fr := FaultResult{Fault: f, T: j.sec(f.Start.UnixNano()), TEnd: j.sec(f.End.UnixNano())}
		switch f.Kind {
		case KindKill, KindZombie:
			fr.BoundMs, fr.RefNote = b.CrashMs, "the signal (kill -9 / SIGSTOP)"
			j.workerFault(&fr, CheckCrash)
		case KindPartition:
			fr.BoundMs, fr.RefNote = b.CrashMs, "the worker cut off from DynamoDB"
			j.workerFault(&fr, CheckCrash)
		case KindRolling, KindClockOffset:
			fr.BoundMs, fr.RefNote = b.HandoffMs, "SIGTERM"
			j.workerFault(&fr, CheckHandoff)
		case KindScaleIn:
			fr.BoundMs, fr.RefNote = b.HandoffMs, "SIGTERM (the worker is not restarted)"
			j.workerFault(&fr, CheckRebalance)
		case KindScaleOut:
			fr.BoundMs, fr.RefNote = b.BalanceMs, "the new worker's start"
			j.scaleOutFault(&fr, f)
		case KindDynamoDown:
			fr.BoundMs, fr.RefNote = b.OutageMs, "DynamoDB answering again"
			j.outageFault(&fr)
		case KindSourceDrop:
			fr.BoundMs, fr.RefNote = b.ReconnectMs, "the drop"
			j.sourceFault(&fr, f.Start)
		case KindRefuse:
			fr.BoundMs, fr.RefNote = b.ReconnectMs, "the refusal lifted"
			j.sourceFault(&fr, f.End)
		case KindSQSDown, KindChurn:
			fr.BoundMs, fr.RefNote = b.ClaimMs, "each start acknowledged"
		case KindSinkFreezeDynamo:
			fr.BoundMs, fr.RefNote = b.CrashMs, "the worker's sink and DynamoDB path frozen"
			j.workerFault(&fr, CheckCrash)
		case KindSinkLatency, KindSinkFreeze:
			fr.BoundMs, fr.RefNote = b.SinkRecoverMs, "the sink fault lifted"
			j.sinkFault(&fr)
		case KindSinkRefuse:
			fr.BoundMs, fr.RefNote = b.SinkRefuseRecoverMs, "the sink fault lifted"
			j.sinkFault(&fr)
		case KindSinkRefuseDynamo:
			fr.BoundMs, fr.RefNote = b.CrashMs+b.SinkRefuseRecoverMs, "the DynamoDB paths thawed"
			j.sinkFault(&fr)
			j.deadExits(&fr)
		}
		j.res.Faults = append(j.res.Faults, fr)
	}
	for i := range j.res.Faults {
		j.res.Faults[i].Repeats = j.faultRepeats[j.res.Faults[i].N]
	}
}

// workerFault measures a fault on one worker: the sessions it was
// delivering must be delivered again by a newer tenure of another worker.
func (j *judge) workerFault(fr *FaultResult, check string) {
	ref := fr.Start.UnixNano()
	deadline := ref + fr.BoundMs*int64(time.Millisecond)
	label := fr.Kind + " of " + fr.Worker
	var dark []float64
	for _, id := range j.ids {
		v := j.sess[id]
		last := v.lastBefore(ref)
		if last == nil || last.Worker != fr.Worker || last.AtNs < ref-int64(liveWindow) || !v.startedAt(fr.Start) {
			continue
		}
		fr.Affected++
		var rec *Delivery
		for i := range v.dels {
			if d := &v.dels[i]; d.AtNs > ref && d.Worker != fr.Worker && d.Epoch > last.Epoch {
				rec = d
				break
			}
		}
		if (rec == nil || rec.AtNs > deadline) && v.stoppedWithin(fr.Start, time.Unix(0, deadline)) {
			fr.Excluded++
			continue
		}
		if rec == nil {
			fr.Unrecovered = append(fr.Unrecovered, id)
			j.violate(check, id, ref, "%s: never delivered again by a newer tenure", label)
			continue
		}
		fr.Recovered++
		fr.samples = append(fr.samples, float64(rec.AtNs-ref)/1e6)
		dark = append(dark, float64(rec.AtNs-last.AtNs)/1e6)
		if rec.AtNs > deadline {
			fr.OverBound++
			j.violate(check, id, ref, "%s: delivered again by %s@%d only after %.0f ms (bound %d ms)", label, rec.Worker, rec.Epoch, float64(rec.AtNs-ref)/1e6, fr.BoundMs)
		}
	}
	fr.Dark = StatsOf(dark)
	if fr.Kind != KindZombie && fr.Kind != KindPartition && fr.Kind != KindSinkFreezeDynamo {
		return
	}
	// A zombie or a partitioned worker cannot heartbeat from the fault on:
	// its trust deadline is at most FenceMs after it, and past that it must
	// deliver nothing under any tenure (it cannot acquire a new one either).
	fence := ref + (j.set.Bounds.FenceMs+j.set.Bounds.FenceSlackMs)*int64(time.Millisecond)
	var latest int64
	for _, id := range j.ids {
		v := j.sess[id]
		n := 0
		var first int64
		epochs := map[int64]bool{}
		for _, d := range v.dels {
			if d.Worker != fr.Worker || d.AtNs <= ref {
				continue
			}
			latest = max(latest, d.AtNs-ref)
			if d.AtNs > fence {
				if n == 0 {
					first = d.AtNs
				}
				n++
				epochs[d.Epoch] = true
			}
		}
		if n > 0 {
			j.violate(CheckFencing, id, first, "%s %s delivered %d message(s) (epochs %v) after its trust deadline: more than %d ms after it could last heartbeat (TTL − margin + %d ms slack)",
				fr.Kind, fr.Worker, n, sortedEpochs(epochs), j.set.Bounds.FenceMs+j.set.Bounds.FenceSlackMs, j.set.Bounds.FenceSlackMs)
		}
	}
	if fr.Kind == KindPartition || fr.Kind == KindSinkFreezeDynamo {
		j.res.SelfFenceMs = append(j.res.SelfFenceMs, float64(latest)/1e6)
	}
	// Once it can reach DynamoDB again (SIGCONT, the proxy thawed), its
	// next heartbeat finds it DEAD: it must exit, non-zero.
	switch inc := j.inc[fr.Worker]; {
	case inc == nil:
	case inc.End == "alive":
		j.violate(CheckCrash, "", inc.Ended.UnixNano(), "%s: %s kept running after its watchers declared it dead (%s)", fr.Kind, fr.Worker, inc.Exit)
	case inc.End == "dead" && inc.Exit == "0":
		j.violate(CheckCrash, "", inc.Ended.UnixNano(), "%s: %s exited 0 after it was declared dead (want non-zero: the supervisor must see a failure)", fr.Kind, fr.Worker)
	}
}

// disturbed reports whether a fault other than a graceful one overlapped
// [from, to] on session id's path: a source fault on the session, or a
// crash, zombie, partition or DynamoDB outage anywhere (the move's receiver
// may be the worker hit: then the session waits for its reservation to
// lapse, and the crash checks judge it).
func (j *judge) disturbed(id string, from, to int64) bool {
	margin := int64(2 * time.Second)
	for _, f := range j.ev.Faults {
		if f.Start.UnixNano() > to || f.End.UnixNano()+margin < from {
			continue
		}
		switch f.Kind {
		case KindKill, KindZombie, KindPartition, KindDynamoDown,
			KindSinkLatency, KindSinkRefuse, KindSinkFreeze, KindSinkFreezeDynamo, KindSinkRefuseDynamo:
			// A sink fault holds the sender's final flush.
			return true
		case KindSourceDrop, KindRefuse:
			if slices.Contains(f.Sessions, id) {
				return true
			}
		}
	}
	return false
}

// scaleOutFault measures a worker joining: the sessions moved to it (its
// first delivery of each, after an earlier tenure elsewhere) are the
// affected ones, each recovered at that delivery (from the join); the
// fleet must be balanced within the bound (the runner's observation, the
// fault's End).
func (j *judge) scaleOutFault(fr *FaultResult, f Fault) {
	ref := fr.Start.UnixNano()
	until := ref + fr.BoundMs*int64(time.Millisecond) // the moves of this join, not later takeovers
	if f.End.After(f.Start) {
		until = f.End.UnixNano()
	}
	var dark []float64
	for _, id := range j.ids {
		v := j.sess[id]
		for i, t := range v.tenures {
			if t.worker != fr.Worker || i == 0 || t.firstAt < ref || t.firstAt > until {
				continue
			}
			fr.Affected++
			fr.Recovered++
			fr.samples = append(fr.samples, float64(t.firstAt-ref)/1e6)
			dark = append(dark, float64(t.firstAt-v.tenures[i-1].lastAt)/1e6)
			break
		}
	}
	fr.Dark = StatsOf(dark)
	if !f.End.After(f.Start) {
		fr.OverBound++
		j.violate(CheckRebalance, "", ref, "scale-out: %s joined; the fleet was not within ±10 %% of its fair shares %d ms later", fr.Worker, fr.BoundMs)
	} else if took := f.End.Sub(f.Start).Milliseconds(); took > fr.BoundMs {
		fr.OverBound++
		j.violate(CheckRebalance, "", ref, "scale-out: %s joined; the fleet was balanced only after %d ms (bound %d ms)", fr.Worker, took, fr.BoundMs)
	}
}

func sortedEpochs(m map[int64]bool) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// outageFault measures DynamoDB down: every tenure must stop delivering by
// its worker's trust deadline (no heartbeat can succeed), and every session
// is delivered again by a new tenure once the engine is back.
func (j *judge) outageFault(fr *FaultResult) {
	start, back := fr.Start.UnixNano(), fr.End.UnixNano()
	fence := (j.set.Bounds.FenceMs + j.set.Bounds.FenceSlackMs) * int64(time.Millisecond)
	deadline := back + fr.BoundMs*int64(time.Millisecond)
	var latest int64
	var dark []float64
	for _, id := range j.ids {
		v := j.sess[id]
		last := v.lastBefore(start)
		if last == nil || last.AtNs < start-int64(liveWindow) || !v.startedAt(fr.Start) {
			continue
		}
		fr.Affected++
		oldLast := last.AtNs
		var rec *Delivery
		late := 0
		for i := range v.dels {
			d := &v.dels[i]
			if d.AtNs <= start {
				continue
			}
			if d.Epoch <= last.Epoch {
				oldLast = max(oldLast, d.AtNs)
				latest = max(latest, d.AtNs-start)
				if d.AtNs > start+fence {
					late++
				}
				continue
			}
			if rec == nil {
				rec = d
			}
		}
		if late > 0 {
			j.violate(CheckFencing, id, start+fence, "%d deliveries under epoch ≤ %d after the trust deadline (more than TTL − margin + %d ms slack after DynamoDB went down: no heartbeat was possible)", late, last.Epoch, j.set.Bounds.FenceSlackMs)
		}
		if (rec == nil || rec.AtNs > deadline) && v.stoppedWithin(fr.Start, time.Unix(0, deadline)) {
			fr.Excluded++
			continue
		}
		if rec == nil {
			fr.Unrecovered = append(fr.Unrecovered, id)
			j.violate(CheckOutage, id, back, "never delivered again by a new tenure after DynamoDB came back")
			continue
		}
		fr.Recovered++
		fr.samples = append(fr.samples, max(0, float64(rec.AtNs-back)/1e6))
		dark = append(dark, float64(rec.AtNs-oldLast)/1e6)
		if rec.AtNs > deadline {
			fr.OverBound++
			j.violate(CheckOutage, id, back, "delivered again by %s@%d %.0f ms after DynamoDB came back (bound %d ms)", rec.Worker, rec.Epoch, float64(rec.AtNs-back)/1e6, fr.BoundMs)
		}
	}
	fr.Dark = StatsOf(dark)
	j.res.SelfFenceMs = append(j.res.SelfFenceMs, float64(latest)/1e6)
}

// sourceFault measures a drop or a refusal: the session's next connection
// at the source, then its first delivery, measured from ref.
func (j *judge) sourceFault(fr *FaultResult, refT time.Time) {
	start, ref := fr.Start.UnixNano(), refT.UnixNano()
	deadline := ref + fr.BoundMs*int64(time.Millisecond)
	var dark []float64
	for _, id := range fr.Sessions {
		v := j.sess[id]
		if v == nil {
			continue
		}
		last := v.lastBefore(start)
		if last == nil || last.AtNs < start-int64(liveWindow) || !v.startedAt(fr.Start) {
			continue
		}
		fr.Affected++
		var rec *Delivery
		for _, c := range v.conns {
			if c.OpenedAt.UnixNano() <= start {
				continue
			}
			for i := range v.dels {
				if d := &v.dels[i]; d.AtNs >= c.OpenedAt.UnixNano() {
					rec = d
					break
				}
			}
			break
		}
		if (rec == nil || rec.AtNs > deadline) && v.stoppedWithin(fr.Start, time.Unix(0, deadline)) {
			fr.Excluded++
			continue
		}
		if rec == nil {
			fr.Unrecovered = append(fr.Unrecovered, id)
			j.violate(CheckSource, id, ref, "%s: never reconnected and delivered again", fr.Kind)
			continue
		}
		fr.Recovered++
		fr.samples = append(fr.samples, max(0, float64(rec.AtNs-ref)/1e6))
		dark = append(dark, float64(rec.AtNs-last.AtNs)/1e6)
		if rec.AtNs > deadline {
			fr.OverBound++
			j.violate(CheckSource, id, ref, "%s: delivering again only %.0f ms after %s (bound %d ms)", fr.Kind, float64(rec.AtNs-ref)/1e6, fr.RefNote, fr.BoundMs)
		}
	}
	fr.Dark = StatsOf(dark)
}

// checkStarts: every acknowledged start and re-start is delivered within
// the claim bound (SQS up or down: the reconciler is the safety net).
func (j *judge) checkStarts() {
	var all []float64
	bound := j.set.Bounds.ClaimMs * int64(time.Millisecond)
	for _, a := range j.ev.Actions {
		if a.Op == "stop" || a.Acked.IsZero() {
			continue
		}
		v := j.sess[a.Session]
		// The first delivery after the request: with the notification, or
		// the reconciler, it may come before the answer does.
		ack, req := a.Acked.UnixNano(), a.At.UnixNano()
		i := sort.Search(len(v.dels), func(i int) bool { return v.dels[i].AtNs > req })
		var first *Delivery
		if i < len(v.dels) {
			first = &v.dels[i]
		}
		deadline := ack + bound
		if (first == nil || first.AtNs > deadline) && v.stoppedWithin(a.At, time.Unix(0, deadline)) {
			continue
		}
		fr := j.faultResult(a.Fault)
		if fr != nil && (fr.Kind == KindSQSDown || fr.Kind == KindChurn) {
			fr.Affected++
		}
		if first == nil {
			j.violate(CheckClaim, a.Session, ack, "%s acknowledged and never delivered", a.Op)
			if fr != nil {
				fr.Unrecovered = append(fr.Unrecovered, a.Session)
			}
			continue
		}
		lat := max(0, float64(first.AtNs-ack)/1e6)
		all = append(all, lat)
		if fr != nil && (fr.Kind == KindSQSDown || fr.Kind == KindChurn) {
			fr.Recovered++
			fr.samples = append(fr.samples, lat)
		}
		if first.AtNs > deadline {
			if fr != nil {
				fr.OverBound++
			}
			j.violate(CheckClaim, a.Session, ack, "%s delivered only %.0f ms after it was acknowledged (bound %d ms)", a.Op, lat, j.set.Bounds.ClaimMs)
		}
	}
	j.res.Claims = StatsOf(all)
}

// checkStops: a STOPPED session closes at the source within the stop bound,
// delivers nothing after it, and no tenure is acquired while it is STOPPED.
func (j *judge) checkStops() {
	bound := time.Duration(j.set.Bounds.StopMs) * time.Millisecond
	var closed []float64
	for _, a := range j.ev.Actions {
		if a.Op != "stop" || a.Acked.IsZero() {
			continue
		}
		v := j.sess[a.Session]
		next, ok := v.nextStart(a.At)
		if !ok {
			next = j.ev.End
		}
		if next.Sub(a.Acked) < bound {
			continue // started again before the bound: nothing to hold it to
		}
		j.res.StopsChecked++
		deadline := a.Acked.Add(bound)
		var closeAt time.Time
		for _, c := range v.conns {
			end := endOf(c, j.ev.End)
			if !c.OpenedAt.Before(next) || !end.After(a.Acked) {
				continue
			}
			switch {
			case c.OpenedAt.After(deadline):
				j.violate(CheckStop, v.id, c.OpenedAt.UnixNano(), "reopened %.1f s after the stop (connection #%d, by %s)", c.OpenedAt.Sub(a.Acked).Seconds(), c.ID, v.connOwner(c))
			case end.After(deadline):
				j.violate(CheckStop, v.id, a.Acked.UnixNano(), "connection #%d still open %.0f ms after the stop was acknowledged (bound %d ms)", c.ID, float64(end.Sub(a.Acked).Microseconds())/1e3, j.set.Bounds.StopMs)
			}
			if end.After(closeAt) {
				closeAt = end
			}
		}
		if !closeAt.IsZero() {
			closed = append(closed, float64(closeAt.Sub(a.Acked).Microseconds())/1e3)
		}
		late, acquired := 0, 0
		var lateAt, acqAt int64
		for _, d := range v.dels {
			if d.AtNs > deadline.UnixNano() && d.AtNs < next.UnixNano() {
				if late == 0 {
					lateAt = d.AtNs
				}
				late++
			}
			if a.Epoch >= 0 && d.Epoch > a.Epoch && d.AtNs >= a.Acked.UnixNano() && d.AtNs < next.UnixNano() {
				if acquired == 0 {
					acqAt = d.AtNs
				}
				acquired++
			}
		}
		if late > 0 {
			j.violate(CheckStop, v.id, lateAt, "%d deliveries more than %d ms after the stop was acknowledged", late, j.set.Bounds.StopMs)
		}
		if acquired > 0 {
			j.violate(CheckStop, v.id, acqAt, "%d deliveries under an epoch above %d (the epoch at the stop): a lease acquired while the session was STOPPED", acquired, a.Epoch)
		}
	}
	j.res.Stops = StatsOf(closed)
}

// checkTable reads the two snapshots of the sessions table: sessions with
// their checkpoints, and worker records.
func (j *judge) checkTable() {
	running := func(id string, at time.Time) (known, up bool) {
		inc := j.inc[id]
		if inc == nil {
			return false, false
		}
		return true, inc.Ended.IsZero() || inc.Ended.After(at)
	}
	s := j.ev.Settled
	for _, r := range s.Rows {
		v := j.view(r.Session)
		want := v.startedAt(s.At)
		if (r.State == schema.StateStarted) != want {
			j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "the table says %s, the harness's last acknowledged request says otherwise", r.State)
		}
		if r.Owner != "" {
			rec, ok := s.worker(r.Owner)
			known, up := running(r.Owner, s.At)
			switch {
			case !ok || !known:
				j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "owned by %q (epoch %d): no such worker record or process", r.Owner, r.Epoch)
				continue
			case rec.State != schema.WorkerAlive:
				j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "owned by the %s worker %q (epoch %d) after the last fault: nobody took it over", rec.State, r.Owner, r.Epoch)
				continue
			case !up:
				j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "owned by %q (epoch %d), whose process ended, yet its record says ALIVE", r.Owner, r.Epoch)
				continue
			}
		}
		if r.State == schema.StateStarted && !r.Failed && r.Owner == "" {
			j.violate(CheckEndOwners, r.Session, s.At.UnixNano(), "STARTED but owned by no worker after the last fault")
		}
	}
	for _, w := range s.Workers {
		known, up := running(w.ID, s.At)
		switch {
		case !known:
			j.violate(CheckEndOwners, "", s.At.UnixNano(), "a worker record %q (%s) no process of the run had", w.ID, w.State)
		case up && w.State != schema.WorkerAlive:
			j.violate(CheckEndOwners, "", s.At.UnixNano(), "%s is running but its record says %s (declared by %q)", w.ID, w.State, w.DeclaredBy)
		case !up && w.State == schema.WorkerAlive:
			j.violate(CheckEndOwners, "", s.At.UnixNano(), "%s ended (%s) but its record still says ALIVE after the last fault: nobody declared it dead", w.ID, j.inc[w.ID].End)
		}
	}
	f := j.ev.Final
	for _, r := range f.Rows {
		v := j.view(r.Session)
		if r.Owner != "" {
			j.violate(CheckRelease, r.Session, f.At.UnixNano(), "still owned by %q (epoch %d) after every worker stopped gracefully (want lease_owner absent)", r.Owner, r.Epoch)
		}
		if len(v.seen) == 0 {
			continue
		}
		switch {
		case r.LastSeq == nil:
			if r.State == schema.StateStarted {
				j.violate(CheckRelease, r.Session, f.At.UnixNano(), "no checkpoint, %d delivered", v.maxD)
			}
		case *r.LastSeq > v.maxHandled():
			j.violate(CheckNoLoss, r.Session, f.At.UnixNano(), "checkpoint %d ahead of the highest seq delivered %d: seqs in between would never be delivered", *r.LastSeq, v.maxHandled())
		case r.State == schema.StateStarted && *r.LastSeq < v.maxHandled():
			j.violate(CheckRelease, r.Session, f.At.UnixNano(), "final checkpoint %d behind the highest seq delivered %d after a graceful shutdown", *r.LastSeq, v.maxHandled())
		}
	}
	for _, inc := range j.ev.Incarnations {
		rec, ok := f.worker(inc.ID)
		want := schema.WorkerLeft
		if inc.End == "kill-9" || inc.End == "dead" || inc.End == "alive" || inc.End == "exited" {
			want = schema.WorkerDead
		}
		if !ok || rec.State != want {
			got := "no record"
			if ok {
				got = rec.State
			}
			j.violate(CheckRelease, "", f.At.UnixNano(), "%s (%s) ended with its record %s, want %s", inc.ID, inc.End, got, want)
		}
		switch inc.End {
		case "sigterm", "shutdown":
			if inc.Exit != "0" {
				j.violate(CheckRelease, "", inc.Ended.UnixNano(), "%s exited %q after SIGTERM (want 0 within the shutdown deadline)", inc.ID, inc.Exit)
			}
		case "exited":
			j.violate(CheckRelease, "", inc.Ended.UnixNano(), "%s exited without being asked to (%s)", inc.ID, inc.Exit)
		}
	}
}

func (j *judge) checkSinks() {
	if j.set.destSink() {
		j.checkDestination()
		return
	}
	if j.ev.BadLines > 0 {
		j.violate(CheckSink, "", j.t0, "%d stdout line(s) that are not sink records", j.ev.BadLines)
	}
	lines := 0
	for _, sf := range j.ev.SinkFiles {
		lines += sf.Lines
		if sf.Bad > 0 {
			j.violate(CheckSink, "", j.t0, "%s: %d unparsable line(s)", sf.Path, sf.Bad)
		}
		if sf.Foreign > 0 {
			j.violate(CheckSink, "", j.t0, "%s: %d record(s) naming a worker that is not one of slot %d's incarnations", sf.Path, sf.Foreign, sf.Slot)
		}
	}
	if len(j.ev.SinkFiles) > 0 && lines != len(j.ev.Deliveries) {
		j.violate(CheckSink, "", j.t0, "the sink files hold %d lines, the harness received %d records", lines, len(j.ev.Deliveries))
	}
}

func (j *judge) summarize() {
	for i := range j.res.Faults {
		fr := &j.res.Faults[i]
		fr.Recovery = StatsOf(fr.samples)
	}
	for _, k := range j.res.Plan.kinds() {
		kr := KindResult{Kind: k}
		var samples []float64
		for _, fr := range j.res.Faults {
			if fr.Kind != k {
				continue
			}
			kr.Faults++
			kr.Affected += fr.Affected
			kr.BoundMs = fr.BoundMs
			kr.OverBound += fr.OverBound
			kr.Never += len(fr.Unrecovered)
			kr.Repeats += fr.Repeats
			samples = append(samples, fr.samples...)
		}
		kr.Recovery = StatsOf(samples)
		if kr.Faults == 0 {
			j.res.Missing = append(j.res.Missing, k)
		}
		j.res.Kinds = append(j.res.Kinds, kr)
	}
	per := map[string]int{}
	for _, v := range j.res.Violations {
		per[v.Check]++
	}
	for _, c := range checkRules {
		j.res.Checks = append(j.res.Checks, CheckResult{Name: c.name, Rule: c.rule, Violations: per[c.name], Figures: j.figures(c.name)})
	}
	sort.SliceStable(j.res.Violations, func(a, b int) bool { return j.res.Violations[a].T < j.res.Violations[b].T })
	for i := range j.res.Violations {
		j.res.Violations[i].HostCPU = j.hostCPUAround(j.res.Violations[i].T)
	}
}

func fmtStats(s Stats) string {
	if s.N == 0 {
		return "n=0"
	}
	return fmt.Sprintf("p50 %.0f / p99 %.0f / max %.0f ms (n=%d)", s.P50, s.P99, s.Max, s.N)
}

func (j *judge) kind(k string) KindResult {
	for _, kr := range j.res.Kinds {
		if kr.Kind == k {
			return kr
		}
	}
	return KindResult{Kind: k}
}

func (j *judge) figures(check string) string {
	t := j.res.Totals
	b := j.set.Bounds
	switch check {
	case CheckOneConn:
		policy := 0
		for _, v := range j.sess {
			for _, r := range v.refused {
				if r.RefusedBy == string(feed.ModeRefuseNewer) {
					policy++
				}
			}
		}
		return fmt.Sprintf("%d connections, %d overlap(s) in the records, %d counted by the feed itself, %d refused by the one-connection policy, %d refused by the refuse control",
			t.Connections, len(j.res.Overlaps), len(j.ev.FeedStats.Overlaps), policy, t.Refused-policy)
	case CheckNoLoss:
		return fmt.Sprintf("%d seqs sent, %d delivered after dedupe (%d raw), %d lost, %d gaps; %d in flight when a session stopped or the run ended (after its last delivery; resumed from the checkpoint on the next start)",
			t.SentSeqs, t.Distinct, t.Deliveries, t.Lost, t.Gaps, t.Tail)
	case CheckOrder:
		return fmt.Sprintf("%d tenures", t.Tenures)
	case CheckRepeats:
		var parts []string
		for _, tr := range j.res.Transitions {
			bound := "none allowed"
			if tr.Bound >= 0 {
				bound = fmt.Sprintf("bound %d", tr.Bound)
			}
			parts = append(parts, fmt.Sprintf("%s: %d change(s), %d repeat(s), max %d in one (%s)", tr.Cause, tr.Count, tr.Repeats, tr.MaxOne, bound))
		}
		return fmt.Sprintf("%d raw repeats in all; ", t.Repeats) + strings.Join(parts, "; ")
	case CheckFencing:
		s := StatsOf(j.res.SelfFenceMs)
		return fmt.Sprintf("last delivery of a worker that could not heartbeat: max %.0f ms after it lost DynamoDB (outages and partitions; trust deadline ≤ TTL − margin = %d ms, + %d ms slack; TTL = %d ms)",
			s.Max, b.FenceMs, b.FenceSlackMs, j.set.LeaseTTLMs)
	case CheckCrash:
		return fmt.Sprintf("kill-9 %s; zombie %s; partition %s; sink+DynamoDB freeze %s; bound %d ms (TTL %d + watch %d + margin %d)", fmtStats(j.kind(KindKill).Recovery), fmtStats(j.kind(KindZombie).Recovery),
			fmtStats(j.kind(KindPartition).Recovery), fmtStats(j.kind(KindSinkFreezeDynamo).Recovery), b.CrashMs, j.set.LeaseTTLMs, j.set.WatchMs, b.CrashMarginMs)
	case CheckHandoff:
		return fmt.Sprintf("rolling-restart %s; clock-offset restart %s; bound %d ms", fmtStats(j.kind(KindRolling).Recovery), fmtStats(j.kind(KindClockOffset).Recovery), b.HandoffMs)
	case CheckRebalance:
		var moves Transitions
		for _, tr := range j.res.Transitions {
			if tr.Cause == "rebalance" {
				moves = tr
			}
		}
		return fmt.Sprintf("scale-out: moved to the new worker %s after its start, balanced within %d ms; %d rebalancing move(s), gap p50 %.0f ms, max %.0f ms (bound %d ms), %d repeat(s); scale-in %s, bound %d ms",
			fmtStats(j.kind(KindScaleOut).Recovery), b.BalanceMs, moves.Count, moves.GapP50, moves.GapMax, b.HandoffMs, moves.Repeats, fmtStats(j.kind(KindScaleIn).Recovery), b.HandoffMs)
	case CheckOutage:
		return fmt.Sprintf("%s from DynamoDB answering again; bound %d ms", fmtStats(j.kind(KindDynamoDown).Recovery), b.OutageMs)
	case CheckSource:
		return fmt.Sprintf("drop %s; refuse %s (from the refusal lifted); bound %d ms", fmtStats(j.kind(KindSourceDrop).Recovery), fmtStats(j.kind(KindRefuse).Recovery), b.ReconnectMs)
	case CheckClaim:
		return fmt.Sprintf("all starts %s; during SQS outages %s; bound %d ms", fmtStats(j.res.Claims), fmtStats(j.kind(KindSQSDown).Recovery), b.ClaimMs)
	case CheckStop:
		return fmt.Sprintf("%d stop(s) held to the bound; connection closed %s after the ack; bound %d ms", j.res.StopsChecked, fmtStats(j.res.Stops), b.StopMs)
	case CheckEndOwners:
		return fmt.Sprintf("%d sessions and %d worker records read %.1f s after the run started", len(j.ev.Settled.Rows), len(j.ev.Settled.Workers), j.sec(j.ev.Settled.At.UnixNano()))
	case CheckRelease:
		return fmt.Sprintf("%d sessions and %d worker records read after the graceful shutdown; %d worker incarnations", len(j.ev.Final.Rows), len(j.ev.Final.Workers), t.Incarnations)
	case CheckSink:
		if sk := j.ev.Sink; sk != nil {
			return fmt.Sprintf("%s: %d messages at the destination (%d not envelopes, %d naming no incarnation of the run), %d stamped by the proxy, %d by the engine; %d out-of-order or repeated arrivals within a tenure (not judged: a standard queue keeps no order, retries and partial failures reorder)",
				sk.Sink, sk.Messages, sk.Broken, sk.Unknown, sk.Stamped, sk.Unstamped, t.Reordered)
		}
		return fmt.Sprintf("%d records received, %d unparsable stdout lines, %d lines cut short by a kill (not delivered)", t.Deliveries, j.ev.BadLines, t.Truncated)
	case CheckTrust:
		if b.TrustDeadlineMs == 0 {
			return "stdout sink: not applied (the fencing check holds the stdout lines)"
		}
		s := StatsOf(j.res.TrustLateMs)
		return fmt.Sprintf("%d DynamoDB-path freeze(s); last record of a frozen worker's tenures at the destination after the freeze (0: none): max %.0f ms (bound %d ms = TTL − margin %d + request timeout %d + tolerance %d)",
			len(j.res.TrustLateMs), s.Max, b.TrustDeadlineMs, b.FenceMs, j.set.SinkRequestTimeoutMs, b.TrustTolMs)
	case CheckPrefix:
		return fmt.Sprintf("%d checkpoint(s), release_seq(s) and released last_seq(s) held to the destination's complete prefix; %d seq(s) skipped by the workers after a permanent refusal (excused)", j.res.PrefixChecked, t.Skipped)
	case CheckSinkRecovery:
		return fmt.Sprintf("latency %s, freeze %s (bound %d ms: retry backoff max 5 s + request timeout + 1 s); refusals %s (bound %d ms: a permanently refused entry's 2 remaining attempts × 5 s + request timeout + 1 s); refusals + DynamoDB frozen %s (bound %d ms, + the crash bound)",
			fmtStats(j.kind(KindSinkLatency).Recovery), fmtStats(j.kind(KindSinkFreeze).Recovery), b.SinkRecoverMs, fmtStats(j.kind(KindSinkRefuse).Recovery), b.SinkRefuseRecoverMs,
			fmtStats(j.kind(KindSinkRefuseDynamo).Recovery), b.CrashMs+b.SinkRefuseRecoverMs)
	}
	return ""
}
