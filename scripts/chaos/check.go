// The judge: Analyze, the check names and rules, and the judge's index of
// the evidence per session (tenures, the session view and its queries).
//
// Analyze indexes the evidence, runs the judge's passes (check_passes.go)
// in their order, then sums up (check_summary.go). A pass is one walk over
// the indexed evidence, in a check_*.go file of its own (the starts and
// stops share check_actions.go; the faults pass's measures are by fault
// family in check_faults_*.go), filing violations under the checks it
// declares; a check several passes judge is in sharedChecks. Adding a
// check:
//   - its Check* constant here and its entry in checkRules (the rule as the
//     report states it, at its place in the report's order);
//   - the pass that judges it declares it in passes, or a new pass: its
//     file, its entry in passes with the passes whose results it reads
//     (after) and placed after them;
//   - its figures (check_summary.go's figures), its row in docs/chaos.md's
//     check table, and a test planting its violation (the tests run every
//     pass under declaredOnly: a violation of a check its pass does not
//     declare panics);
//   - TestEveryCheckHasItsRuleAndItsPasses, TestPassesRunAfterWhatTheyRead
//     and TestDocsTableEveryCheck hold the registry and the docs to the
//     constants.

package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

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
	// Sessions whose source cannot replay (check_standby.go), and every
	// session's epochs (check_onedeliverer.go):
	CheckStandbyNoLoss  = "standby-no-loss" // nothing lost at an owner's death or a rebalancing move that a standby connection was sent
	CheckStandbyRepeats = "standby-repeats" // a standby session's takeovers repeat feed seqs within the replay bound
	CheckOneDeliverer   = "one-deliverer"   // one worker per lease epoch of a session
)

// checkRules are the checks in report order, with what each one holds.
var checkRules = []struct{ name, rule string }{
	{CheckOneConn, "at every instant the open connections of a session belong to one tenure (the feed's records; a connection without a tenure header is its own); two of one tenure only as a planned reconnect: a session started with planned reconnects, the tenure (<worker id>/<lease epoch>) one that delivered the session, at most two connections, overlapping no longer than the switch timeout + 1 s; no attempt refused because another was open"},
	{CheckNoLoss, "(sessions whose source can replay; the others: standby-no-loss) every seq the feed sent is delivered (after dedupe by connection_id + seq); no gap inside the delivered range; nothing delivered that was never sent; checkpoints never ahead of the sink; a seq the worker logged as skipped (permanent sink refusal, on_sink_refusal skip) is excused only if the sink fault proxy refused that message permanently"},
	{CheckOrder, "per session, first deliveries in seq order; within a tenure (worker, epoch) strictly increasing, no repeat; on the kinesis sink, in the stream's order, no arrival of a tenure below one it wrote before unless it repeats one it wrote (a partition key keeps its order; repeats after a timeout are at-least-once)"},
	{CheckRepeats, "(sessions without a standby; those with one: standby-repeats) raw repeats only across a crash, a zombie, a partition or a DynamoDB outage, within the checkpoint bound; none across a graceful handoff, a rebalancing move, a stop/re-start or an unexplained owner change; AWS sink: no record first stored during a source-poison episode or its recovery stored more than 3 times within one tenure (the sink's attempts of one entry)"},
	{CheckStandbyNoLoss, "sessions started with a hot standby on a source that cannot replay (seq_mode none, or the seq field without resume), judged by the feed's seq in the delivered data: no feed seq missing inside what each start delivered across an owner's death (kill -9, SIGSTOP, a partition from DynamoDB: the tenures either side of the hole, as the ownership changes are attributed) or a rebalancing move (the worker moves a standby session only to its standby's worker, once that worker said it would take it; a fault of the receiver it could not know of then, from 1.5 heartbeat intervals before its answer on, excuses the move's hole as lost to two faults) that a standby connection of the session (the feed's records: tenure <worker id>/standby/<n>) had been sent; what is missing where no standby connection had it, or at no death (the source dropped or closed the connections), is reported beside the control group's loss (the same sources without a standby), never judged"},
	{CheckStandbyRepeats, "a standby session's feed seqs delivered again by a later tenure: across an owner's death at most the replay bound of its cause (the standby's window starts after the owner's checkpoint, written every checkpoint interval: crash and zombie as a crash, partition as an outage), across a DynamoDB outage or storm its replay bound; none across a graceful handoff, a rebalancing move, a stop/re-start or an unexplained owner change"},
	{CheckOneDeliverer, "one worker delivers under each lease epoch of a session (a standby never delivers under the owner's epoch); deliveries under an epoch older than one that delivered are fencing's"},
	{CheckFencing, "no delivery under a stale epoch once a newer epoch delivered; no delivery by a worker that cannot heartbeat after its trust deadline (last heartbeat + TTL − safety margin: zombie, partition, DynamoDB down)"},
	{CheckCrash, "after kill -9, SIGSTOP or a partition from DynamoDB every session of the worker is delivered again by a newer tenure within TTL + watch interval + margin (+ the lag, for a kill while the DynamoDB model's indexes lag); a zombie or partitioned worker learns it is DEAD at its next heartbeat and exits non-zero"},
	{CheckHandoff, "after SIGTERM (rolling restart, clock-offset restart) every session of the worker is delivered again by another worker within 1 s of its previous tenure's last delivery (the drain hands sessions off a few at a time, the others streaming until their turn), and within the shutdown deadline of the SIGTERM"},
	{CheckRebalance, "after a worker joins (scale-out) every running worker is within ±10 % (or 2 sessions) of its fair share within the balance bound (minimum hold + 6 rounds + 2 s); every rebalancing move (a graceful hand-off) is delivered by its receiver within 1 s of its previous owner's last delivery, with no repeat; after a scale-in (SIGTERM, not restarted) every session of the worker is delivered again by another worker within 1 s of its previous tenure's last delivery, and within the shutdown deadline of the SIGTERM"},
	{CheckOutage, "after DynamoDB is back every session is delivered again by a new tenure within the claim bound; after a throttling or ambiguous-error storm of the DynamoDB model, every session delivers a new seq within the crash + claim bound, and a worker declared dead in it exits non-zero"},
	{CheckSource, "after the source drops a connection, stops refusing, or closes one at its max age (source-schedule), the session delivers a new seq within the reconnect bound"},
	{CheckClaim, "every start and re-start (SQS up or down) is delivered within the claim bound"},
	{CheckStop, "a STOPPED session's connection closes within one heartbeat interval (+ margin; whichever worker the SQS stop reaches), nothing is delivered after, it never reopens and no newer tenure is acquired while it is STOPPED"},
	{CheckEndOwners, "after the last fault: no session owned by a DEAD or LEFT worker (or one whose process ended); every STARTED session owned by an ALIVE worker that is running; every ended process's record DEAD or LEFT, every running one's ALIVE"},
	{CheckRelease, "after SIGTERM of every worker: no session has an owner (lease_owner absent), every worker record LEFT (DEAD for those killed or declared dead), every worker exited 0, every final checkpoint (the session's last_seq or release_seq) equal to the highest seq delivered"},
	{CheckSink, "stdout sink: every stdout line is a sink record; each worker slot's sink file names only its own incarnations; the files hold what the harness received. AWS sink: every destination message is a sink envelope naming a worker incarnation of the run; the workers' stdout holds no sink line; every copy of a message the source sent poisoned (source-poison: invalid UTF-8, characters SQS refuses) carries it byte for byte, whichever form the envelope uses (data as JSON or as a string, data_b64)"},
	{CheckTrust, "AWS sink: while the harness has a worker's DynamoDB path frozen from F (DynamoDB down, a partition, a zombie's SIGSTOP, the sink+DynamoDB faults), nothing of its tenures reaches the destination after F + TTL − margin + the sink request timeout + a tolerance (until the thaw; for good after a partition or a SIGSTOP: it was declared dead)"},
	{CheckPrefix, "every session's checkpoint and release_seq (the table, read after the last fault and after the shutdown) and every last_seq a worker logged releasing or handing it off is at most the highest seq S such that every seq from the session's first up to S is at the destination (seqs the worker logged as skipped after a permanent sink refusal excused)"},
	{CheckSinkRecovery, "after a sink fault (latency, refusals, freeze; refusals with every DynamoDB path frozen) or a source-poison episode is lifted, every session delivering when it began delivers a new seq within the bound; no session stays stuck behind a poisoned seq it never delivered"},
}

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
	// planned: the session was started with planned reconnects.
	planned bool
	// source is how its source was started when it cannot replay
	// (SourceNoSeq, SourceLive; "": with resume); standby: with a hot
	// standby (check_standby.go).
	source  string
	standby bool
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
	// plannedDark is, per planned switch, the gap in the session's
	// deliveries across it (PlannedResult.Dark).
	plannedDark []float64
	// pass is the pass running (nil outside them).
	pass *pass
}

func (j *judge) sec(ns int64) float64 { return float64(ns-j.t0) / 1e9 }

// violate files a violation of check, one the running pass declares.
func (j *judge) violate(check, session string, atNs int64, format string, args ...any) {
	if declaredOnly && (j.pass == nil || !slices.Contains(j.pass.checks, check)) {
		name := "(none)"
		if j.pass != nil {
			name = j.pass.name
		}
		panic(fmt.Sprintf("chaos: pass %s filed a violation of %q, a check it does not declare", name, check))
	}
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
	for i := range passes {
		j.pass = &passes[i]
		j.pass.run(j)
	}
	j.pass = nil
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
		v.planned = v.planned || a.Planned
		if a.Op != "stop" {
			v.source, v.standby = cmp.Or(a.Source, v.source), v.standby || a.Standby
		}
	}
	for _, v := range j.sess {
		sort.SliceStable(v.actions, func(a, b int) bool { return v.actions[a].At.Before(v.actions[b].At) })
		sort.SliceStable(v.conns, func(a, b int) bool { return v.conns[a].OpenedAt.Before(v.conns[b].OpenedAt) })
	}
	j.ids = slices.Sorted(maps.Keys(j.sess))
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

// liveAt is the session's last delivery before at when the session was
// delivering then (within liveWindow) and started (a fault's affected
// sessions); nil otherwise.
func (v *sessionView) liveAt(at time.Time) *Delivery {
	ns := at.UnixNano()
	last := v.lastBefore(ns)
	if last == nil || last.AtNs < ns-int64(liveWindow) || !v.startedAt(at) {
		return nil
	}
	return last
}

// firstNewSeqAfter is the session's first delivery after end of a seq above
// every seq delivered by end (nil: none), with that highest seq and the
// time of the last delivery by end.
func (v *sessionView) firstNewSeqAfter(end int64) (rec *Delivery, maxBefore, lastBefore int64) {
	maxBefore = -1 << 62
	for _, d := range v.dels {
		if d.AtNs <= end {
			maxBefore, lastBefore = max(maxBefore, d.Seq), max(lastBefore, d.AtNs)
		}
	}
	for i := range v.dels {
		if d := &v.dels[i]; d.AtNs > end && d.Seq > maxBefore {
			return d, maxBefore, lastBefore
		}
	}
	return nil, maxBefore, lastBefore
}
