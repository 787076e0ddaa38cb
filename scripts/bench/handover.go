// Phases failover and handoff: kill -9 or SIGTERM of the owner → first
// message by the new owner, judged by the chaos harness's checks.

package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/scripts/chaos"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// failoverPhase is the phase (phase.go).
var failoverPhase = phase{name: PhaseFailover, run: (*runner).failover, goals: failoverGoals,
	render: func(p printer, r *Report) {
		renderHandover(p, r.Failover, "2. Crash failover: kill -9 of the owner → first message by the new owner")
	},
	onModel: func(m *ModelResults, got *Report) { m.Failover = got.Failover }}

var handoffPhase = phase{name: PhaseHandoff, run: (*runner).handoff, goals: handoffGoals,
	render: func(p printer, r *Report) {
		renderHandover(p, r.Handoff, "3. Graceful handoff: SIGTERM of the owner → first message by the new owner")
		if r.HandoffSmall != nil {
			renderHandover(p, r.HandoffSmall, fmt.Sprintf("3b. Graceful handoff, %d sessions per SIGTERM", r.HandoffSmall.SessionsPerRound))
		}
	},
	onModel: func(m *ModelResults, got *Report) { m.Handoff, m.HandoffSmall = got.Handoff, got.HandoffSmall }}

// Handover kinds (HandoverResult.Kind).
const (
	kindKill = chaos.KindKill // "kill-9"
	kindTerm = "sigterm"
)

// HandoverResult is figure 2 (kill -9) or 3 (SIGTERM): the owner of every
// session of a round is signalled; each session is one sample of
// signal → first message delivered by another worker.
type HandoverResult struct {
	Phase
	Kind             string `json:"kind"` // kill-9 | sigterm
	Rounds           int    `json:"rounds"`
	SessionsPerRound int    `json:"sessions_per_round"`
	Survivors        int    `json:"survivors"`
	// Gap: signal → first message at the sink from another worker (driver clock).
	Gap Dist `json:"gap"`
	// PerRound are the rounds' own distributions.
	PerRound []Dist `json:"per_round"`
	// The gap's parts, from the feed's connection records (same machine
	// clock): signal → the old connection closed at the source; signal →
	// the new owner's connection opened; that open → first message at the
	// sink.
	OldClosed   Dist `json:"old_closed"`
	NewOpened   Dist `json:"new_opened"`
	OpenToFirst Dist `json:"open_to_first"`
	// Dark: per session, the old connection's close at the source → the
	// first message by another worker at the sink: the session's own
	// outage. A graceful shutdown hands its sessions off a few at a time
	// (WSFLEET_SHUTDOWN_IN_FLIGHT), the others streaming until their turn,
	// so Gap (from the signal) also holds the wait for the turn, Dark not.
	Dark Dist `json:"dark"`
	// After a crash, from the victim's worker record (ended_at_ms, written
	// by the watcher that declared it dead): kill → declared dead (its
	// sessions takeable from then on), and that instant → first message by
	// the new owner (the takeover path).
	KillToDead  Dist `json:"kill_to_declared_dead"`
	DeadToFirst Dist `json:"declared_dead_to_first"`
	// NotifyToOpen: the survivors' ClaimLatencyMs metric (start
	// notification sent → the new connection open), for the sessions they
	// claimed from a notification.
	NotifyToOpen Dist `json:"notify_to_open"`
	// After a SIGTERM, from the victim's "lease released" log lines: how
	// long each session's release write (with the final checkpoint) and its
	// hand-off notification took.
	VictimRelease Dist `json:"victim_release"`
	VictimPublish Dist `json:"victim_publish"`
	Unrecovered   int  `json:"unrecovered"`
	// From the feed's and the sinks' records, by the chaos harness's checks
	// (package chaos): Duplicated are the raw repeats across the ownership
	// changes the signals caused, DuplicatedMax the most in one (one
	// session, one round), ReplayBound what one crash may repeat.
	Lost int64 `json:"lost"`
	// Gaps are seqs inside the delivered range the source never sent: the
	// new owner resumed past them (the chaos no-loss check).
	Gaps           int64    `json:"gaps"`
	Duplicated     int64    `json:"duplicated"` // repeats caused by the ownership change
	DuplicatedMax  int64    `json:"duplicated_max_per_session"`
	ReplayBound    int64    `json:"replay_bound"`
	Stale          int64    `json:"stale_epoch_deliveries"`
	MaxConcurrent  int      `json:"max_concurrent_connections"`
	Violations     []string `json:"violations,omitempty"`
	FeedRate       float64  `json:"feed_rate"`
	TTLPlusWatchMs float64  `json:"ttl_plus_watch_ms"` // TTL + one watch interval (500 ms)
	TTLPlusRecMs   float64  `json:"ttl_plus_reconcile_ms"`
	GoalP99Ms      float64  `json:"goal_p99_ms"`
	ClaimRateLimit int      `json:"claims_per_second_per_worker"`
	// Standby is the crash failover's hot standby run beside the dial
	// takeover (handover_standby.go; nil: not run).
	Standby *StandbyRun `json:"standby,omitempty"`
}

func (r *runner) failover(ctx context.Context) error {
	res := &HandoverResult{Kind: kindKill, Rounds: r.sz.FailoverRounds, SessionsPerRound: r.sz.FailoverSessions}
	r.rep.Failover = res
	return r.handover(ctx, PhaseFailover, res)
}

func (r *runner) handoff(ctx context.Context) error {
	res := &HandoverResult{Kind: kindTerm, Rounds: r.sz.HandoffRounds, SessionsPerRound: r.sz.HandoffSessions}
	r.rep.Handoff = res
	if err := r.handover(ctx, PhaseHandoff, res); err != nil {
		return err
	}
	if r.sz.HandoffSmallRounds == 0 {
		return nil
	}
	small := &HandoverResult{Kind: kindTerm, Rounds: r.sz.HandoffSmallRounds, SessionsPerRound: r.sz.HandoffSmallSessions}
	r.rep.HandoffSmall = small
	return r.handover(ctx, PhaseHandoff, small)
}

// handover runs the rounds: a victim worker alone claims the round's
// sessions (through SQS), two survivors start, the victim is signalled, and
// every session's first delivery by a survivor is timed. Then the sessions
// are stopped and the survivors leave, so the next round starts clean.
func (r *runner) handover(ctx context.Context, name string, res *HandoverResult) error {
	res.Survivors, res.FeedRate = 2, r.sz.LeaseFeedRate
	if res.Kind == kindTerm {
		res.FeedRate = r.sz.HandoffFeedRate
	}
	res.TTLPlusWatchMs = float64((DefaultTTL + DefaultHeartbeatEvery/2).Milliseconds())
	res.TTLPlusRecMs = float64((DefaultTTL + DefaultReconcile).Milliseconds())
	res.ClaimRateLimit = DefaultClaimRate
	signal := "SIGKILL (kill -9)"
	res.GoalP99Ms = float64((DefaultTTL + time.Second).Milliseconds())
	if res.Kind == kindTerm {
		signal = "SIGTERM (graceful: directed hand-offs to the survivors, at least 4 at a time: close 1001, flush, POST /handoff giving the tenure with its final checkpoint: the receiver acquires it and answers; a release reserved for the receiver only when it does not)"
		res.GoalP99Ms = 250
	}
	res.Phase = r.begin(name, map[string]string{
		"transport": r.leaseTransport(),
		"lease":     defaultTimings,
		"round":     fmt.Sprintf("a victim worker alone claims %d new sessions via SQS; 2 survivors start (both consume the queue); %s later the victim gets %s", res.SessionsPerRound, settleBefore(res.Kind), signal),
		"rounds":    fmt.Sprintf("%d (fresh victim and survivors each round; %d samples in all)", res.Rounds, res.Rounds*res.SessionsPerRound),
		"feed":      fmt.Sprintf("%g msg/s per session, resume by ?from=last_seq+1 (the new owner gets the backlog at once)", res.FeedRate),
		"clock":     "driver-side monotonic clock: from just before the signal to the driver reading the new owner's first sink line",
		"judging":   "lost and duplicated messages from the feed's connection records and the sink records (the chaos harness's checks, scripts/chaos)",
	})
	defer res.end()
	standby := res.Kind == kindKill && r.sz.StandbyRounds > 0
	if standby {
		res.Phase.Settings["standby"] = fmt.Sprintf("after the dial rounds, %d round(s) of %d sessions on sources that cannot replay, half with a hot standby, half without; the feed admits standby connections (-allow-standby) and the workers name their tenure (%s) and move no session by rebalancing within a round (%s=%s); a steady window of %s before each kill measures the standbys' cost",
			r.sz.StandbyRounds, r.sz.StandbySessions, schema.EnvTenureHeader, schema.EnvMinHold, standbyRunSettings[schema.EnvMinHold], r.sz.StandbyCostWindow)
	}
	ls, err := r.startLeaseStackWith(ctx, fmt.Sprintf("%s-%d", name, res.SessionsPerRound), res.FeedRate, standby)
	if err != nil {
		return err
	}
	defer ls.shutdown()

	var all, toTakeable, toFirst []time.Duration
	var claimMs, releaseMs, publishMs []float64
	var rounds []roundData
	stopped := map[string]time.Time{}
	for k := 1; k <= res.Rounds; k++ {
		rd, stops, err := r.handoverRound(ctx, ls, res.Kind, k, res.SessionsPerRound)
		if err != nil {
			return fmt.Errorf("round %d: %w", k, err)
		}
		rounds = append(rounds, rd)
		gaps := rd.gaps()
		all = append(all, gaps...)
		res.Unrecovered += len(rd.ids) - len(rd.moved)
		d := Summarize(gaps)
		res.PerRound = append(res.PerRound, d)
		for id, at := range stops {
			stopped[id] = at
		}
		a, b := rd.takeover()
		toTakeable, toFirst = append(toTakeable, a...), append(toFirst, b...)
		claimMs, releaseMs, publishMs = append(claimMs, rd.claimMs...), append(releaseMs, rd.releaseMs...), append(publishMs, rd.publishMs...)
		r.log.Info().Str("phase", name).Int("round", k).Int("n", d.N).Float64("p50_ms", d.P50).Float64("p99_ms", d.P99).Msg("round done")
	}
	res.Gap = WithSamples(all)
	res.KillToDead, res.DeadToFirst = Summarize(toTakeable), Summarize(toFirst)
	res.NotifyToOpen = SummarizeMs(claimMs)
	res.VictimRelease, res.VictimPublish = SummarizeMs(releaseMs), SummarizeMs(publishMs)

	// The dial rounds are judged at their end, before the standby run's
	// sessions start.
	conns, err := ls.st.FeedRecords(ctx, "")
	if err != nil {
		return err
	}
	res.OldClosed, res.NewOpened, res.OpenToFirst, res.Dark = gapParts(rounds, conns)
	judgeHandover(res, chaos.Evidence{Start: res.Phase.Started, End: time.Now(), Deliveries: ls.col.deliveries(), Conns: conns}, rounds, stopped)
	if !standby {
		return nil
	}
	res.Standby, err = r.standbyRun(ctx, ls, res.FeedRate)
	return err
}

// judgeHandover holds the rounds to the chaos harness's checks: every
// signal is a fault on its victim (a SIGTERM is the harness's graceful
// handoff), every stop an API stop; the bench's lease timings give the
// bounds.
func judgeHandover(res *HandoverResult, ev chaos.Evidence, rounds []roundData, stopped map[string]time.Time) {
	kind := chaos.KindKill
	if res.Kind == kindTerm {
		kind = chaos.KindRolling
	}
	for i, rd := range rounds {
		ev.Faults = append(ev.Faults, chaos.Fault{N: i + 1, Kind: kind, Start: rd.at, End: rd.at, Worker: rd.victim})
	}
	for id, at := range stopped {
		ev.Actions = append(ev.Actions, chaos.Action{Op: "stop", Session: id, At: at, Acked: at, Epoch: -1})
	}
	j := judgeLease(ev, res.FeedRate)
	res.Lost, res.Gaps, res.Stale, res.ReplayBound = j.Totals.Lost, j.Totals.Gaps, j.Totals.Stale, j.Settings.Bounds.ReplayCrash
	res.MaxConcurrent = min(1, j.Totals.Connections)
	for _, o := range j.Overlaps {
		res.MaxConcurrent = max(res.MaxConcurrent, o.Max)
	}
	for _, k := range j.Kinds {
		if k.Kind == kind {
			res.Duplicated = k.Repeats
		}
	}
	for _, t := range j.Transitions {
		if t.Cause == "crash" && kind == chaos.KindKill {
			res.DuplicatedMax = t.MaxOne
		}
	}
	res.Violations = append(res.Violations, violations(j)...)
}

func renderHandover(p printer, h *HandoverResult, title string) {
	if !heading(p, h, "%s", title) {
		return
	}
	if h.Kind == kindTerm {
		p("![hand-off dark time CDF](%s)\n\n", ChartHandoffCDF)
	} else {
		p("![crash failover CDF](%s)\n\n", ChartFailoverCDF)
	}
	p(distHeader)
	if h.Dark.N > 0 && h.Kind == kindTerm {
		distRow(p, "old connection closed at the source → first message by another worker (the session's dark time)", h.Dark)
	}
	distRow(p, "signal → first message by another worker", h.Gap)
	for i, d := range h.PerRound {
		distRow(p, fmt.Sprintf("— round %d", i+1), d)
	}
	distRow(p, "signal → old connection closed at the source", h.OldClosed)
	distRow(p, "signal → new owner's connection opened", h.NewOpened)
	distRow(p, "new connection opened → first message at the sink", h.OpenToFirst)
	if h.VictimRelease.N > 0 {
		distRow(p, "the victim's release per session (0 when the receiver took the given tenure: no write; else one write: the session item with the final checkpoint as release_seq, reserved for the receiver; conditional on owner and epoch)", h.VictimRelease)
	}
	if h.VictimPublish.N > 0 {
		distRow(p, "the victim handing each session to its receiver (POST /handoff giving the tenure, answered once the receiver acquired it; when it did not, after the release: the tell, or a start notification)", h.VictimPublish)
	}
	if h.NotifyToOpen.N > 0 {
		distRow(p, "receiver told → new connection open (the survivors' ClaimLatencyMs: admission, acquire, dial)", h.NotifyToOpen)
	}
	if h.KillToDead.N > 0 {
		distRow(p, "kill → victim declared dead (its record's ended_at_ms: sessions takeable)", h.KillToDead)
		distRow(p, "declared dead → first message by the new owner", h.DeadToFirst)
	}
	p("\n")
	p("| judged from the feed's and the sinks' records | |\n|---|---|\n")
	p("| sessions never delivered again | %d |\n", h.Unrecovered)
	p("| messages lost (sent by the feed, never delivered) | %d |\n", h.Lost)
	p("| messages skipped (never sent: the new owner resumed past them) | %d |\n", h.Gaps)
	if h.Kind == "sigterm" {
		p("| messages duplicated across the handoff | %d |\n", h.Duplicated)
	} else {
		p("| messages duplicated across the crash (all sessions / most in one session / checkpoint bound) | %d / %d / %d |\n", h.Duplicated, h.DuplicatedMax, h.ReplayBound)
	}
	p("| deliveries under a stale epoch | %d |\n", h.Stale)
	p("| most connections of one session open at once at the source | %d |\n\n", h.MaxConcurrent)
	if len(h.Violations) > 0 {
		p("Evidence violations: %s\n\n", strings.Join(h.Violations, "; "))
	}
	if h.Kind == "kill-9" {
		p("What bounds it: nothing is renewed per session; the victim's one heartbeat a second keeps all its sessions. After the kill its heartbeat counter stops; each of its 2 watchers (chosen by rendezvous hashing) reads the record every %s and may declare it dead once the counter stood still for the TTL on the watcher's own clock (no wall-clock skew enters), by a conditional write that bumps the victim's epoch. The declaring watcher then lists the victim's sessions and spreads them like a graceful shutdown: it reads the fleet once, gives each alive worker (itself included) a part by its room below its fair share, tells the other survivor its part at once (POST /handoff with the dead tenure, which the receiver checks against the victim's record) and claims its own; each acquire is conditional on the dead owner and its epoch, and only what nobody could be told of goes on the queue. So no two survivors race for one session (a lost race is a failed write and a read in dynalite's queue), and each claims at most its share, within one admission burst. ", ms(float64((DefaultHeartbeatEvery / 2).Milliseconds())))
		p("So the gap is kill → declared dead, at most TTL + one watch interval = %s after the last heartbeat the watcher saw (less when the kill came up to a heartbeat interval after it), plus the claim (admission, acquire, dial, the backlog's first message). ", ms(h.TTLPlusWatchMs))
		if h.DeadToFirst.N > 0 {
			p("Measured: kill → declared dead p50 %s, max %s (one sample per round: the wall-clock ended_at_ms against the driver's kill time); declared dead → first message p50 %s, p99 %s, max %s. ", ms(h.KillToDead.P50), ms(h.KillToDead.Max), ms(h.DeadToFirst.P50), ms(h.DeadToFirst.P99), ms(h.DeadToFirst.Max))
			p("The worst case is TTL + watch interval + the claim ≈ %s, against the goal TTL + 1 s = %s. ", ms(h.TTLPlusWatchMs+h.DeadToFirst.P99), ms(h.GoalP99Ms))
		}
		if h.Gap.P99 > h.GoalP99Ms {
			p("The goal is missed by %s: the claim path above exceeds the %s left between TTL + watch interval and the goal (claims are admitted at %d/s per worker, burst %d). ", ms(h.Gap.P99-h.GoalP99Ms), ms(h.GoalP99Ms-h.TTLPlusWatchMs), h.ClaimRateLimit, h.ClaimRateLimit)
		}
		p("Messages are repeated after a crash by design: the new owner resumes after the last checkpoint, written every 60 s when last_seq advanced (bound: rate × (checkpoint interval × 1.1 + 1 s) + 1 = %d at %g msg/s; a round's sessions are younger than one checkpoint interval, so each replays from its start).\n\n", h.ReplayBound, h.FeedRate)
		renderStandby(p, h.Standby, h)
	} else {
		p("A SIGTERMed worker reads the alive workers' records once and spreads its sessions over them by their room below their fair share; it hands them off at least %d at a time (WSFLEET_SHUTDOWN_IN_FLIGHT; more when the rest would not be done by a third of the deadline), the others streaming until their turn. Each hand-off is: the close handshake with the source (status 1001), the sink flush, POST /handoff to the receiver giving it the tenure (no write by the victim: the receiver acquires from that tenure, recording the final checkpoint, and answers; a release reserved for the receiver only when it does not; claim admission %d claims/s per worker, burst %d, applies to bursts, not to these paced moves), the spec's read, the dial, and the first message: the backlog the source replays from last_seq + 1 at once, or the source's next message, up to 1/rate = %s later. ",
			DefaultShutdownInFlight, h.ClaimRateLimit, h.ClaimRateLimit, ms(1000/max(h.FeedRate, 0.001)))
		p("The dark time (the first row) is that chain for one session; \"signal → first message\" adds the wait for its turn, so its maximum is the whole drain of %d sessions to %d survivors (bound: the shutdown deadline, %s; at half of it whatever is left goes at once). ",
			h.SessionsPerRound, h.Survivors, ms(float64(DefaultShutdownDeadline.Milliseconds())))
		if h.Dark.N > 0 && h.Dark.P99 > 250 {
			p("The goal (dark time p99 ≤ 250 ms) is missed by %s: the hand-offs in flight queue their requests (the acquire and the spec's read each) in dynalite's single Node.js thread, which shares the 2 cores with the workers, the feed and fauxqs; the release row and the receivers' claim latency above show how much each side waited. ", ms(h.Dark.P99-250))
		}
		p("\n\n")
	}
}

// failoverGoals are the crash failover's goals (Goals): the gap's p99, no loss.
func failoverGoals(r *Report) []Goal {
	var gs []Goal
	if f := r.Failover; f != nil && f.Gap.N > 0 {
		gs = append(gs, judged("Crash failover (kill -9 → first message by the new owner), p99", ms(f.Gap.P99), "≤ TTL + 1 s = "+ms(f.GoalP99Ms), f.Gap.P99 <= f.GoalP99Ms && f.Unrecovered == 0,
			"+"+ms(f.Gap.P99-f.GoalP99Ms)+neverRecovered(f.Unrecovered)))
		gs = append(gs, judged("Crash failover: messages lost / skipped (the no-loss check)", fmt.Sprintf("%d / %d", f.Lost, f.Gaps), "0 / 0", f.Lost == 0 && f.Gaps == 0,
			fmt.Sprintf("%d lost, %d skipped", f.Lost, f.Gaps)))
	}
	return append(gs, standbyGoals(r)...)
}

// neverRecovered is a miss's note of n sessions never recovered ("": none).
func neverRecovered(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d session(s) never recovered", n)
}

// handoffGoals are the graceful handoff's goals (Goals), per handoff run:
// the dark time, the drain, nothing lost or duplicated.
func handoffGoals(r *Report) []Goal {
	var gs []Goal
	for _, h := range []*HandoverResult{r.Handoff, r.HandoffSmall} {
		if h == nil || h.Gap.N == 0 {
			continue
		}
		what := fmt.Sprintf("%d sessions per SIGTERM", h.SessionsPerRound)
		gs = append(gs, judged("Graceful handoff: a session's dark time (old connection closed at the source → first message by the new owner), p99, "+what, ms(h.Dark.P99), "≤ 250 ms", h.Dark.N > 0 && h.Dark.P99 <= 250,
			fmt.Sprintf("+%s (×%.1f)", ms(h.Dark.P99-250), h.Dark.P99/250)))
		deadline := float64(DefaultShutdownDeadline.Milliseconds())
		gs = append(gs, judged("Graceful handoff: SIGTERM → the last session's first message by its new owner (the drain), "+what, ms(h.Gap.Max), "≤ the shutdown deadline, "+ms(deadline), h.Gap.Max <= deadline,
			fmt.Sprintf("+%s", ms(h.Gap.Max-deadline))))
		gs = append(gs, judged("Graceful handoff: messages lost / duplicated, "+what, fmt.Sprintf("%d / %d", h.Lost, h.Duplicated), "0 / 0", h.Lost == 0 && h.Duplicated == 0,
			fmt.Sprintf("%d lost, %d duplicated", h.Lost, h.Duplicated)))
	}
	return gs
}
