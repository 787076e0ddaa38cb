// Phase rebalance: workers join a loaded fleet; time to balance, moves
// against the minimum, gap per move, judged by the chaos harness's checks.

package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wsfleet/wsfleet/scripts/chaos"
	"github.com/wsfleet/wsfleet/scripts/devstack"
	"github.com/wsfleet/wsfleet/shared/rebalance"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// rebalancePhase is the phase (phase.go).
var rebalancePhase = phase{name: PhaseRebalance, run: (*runner).rebalance, render: renderRebalance, goals: rebalanceGoals,
	onModel: func(m *ModelResults, got *Report) { m.Rebalance = got.Rebalance }}

// RebalanceResult is the rebalance phase: sessions held by two workers,
// then two more join; the fleet rebalances by directed graceful hand-offs
// at the workers' default settings.
type RebalanceResult struct {
	Phase
	Sessions      int     `json:"sessions"`
	WorkersBefore int     `json:"workers_before"`
	WorkersAfter  int     `json:"workers_after"`
	FeedRate      float64 `json:"feed_rate"`
	// JoinersReadyMs: when each joiner answered /readyz, from the join
	// (they start together, as a scale-out's tasks do).
	JoinersReadyMs []float64 `json:"joiners_ready_ms"`
	// ToBalancedMs: from the first joiner's start to the first poll that
	// found every worker within ±10 % (or 2 sessions) of its fair share
	// with every session owned; -1 when that never happened.
	ToBalancedMs float64 `json:"to_balanced_ms"`
	// Moves are the ownership changes after the join (a new connection of
	// a session at the source by another worker than the one before, by
	// the tenure header); MinMoves the least that reaches ±10 %,
	// MinMovesToShare the least that reaches the exact shares, both from
	// the loads at the join (rebalance.MinMoves).
	Moves           int     `json:"moves"`
	MinMoves        int     `json:"min_moves"`
	MinMovesToShare int     `json:"min_moves_to_share"`
	Ratio           float64 `json:"moves_over_min"`
	// MovesFromJoiners are the moves a joiner sent on: sessions it was
	// given before the fleet's plan counted the other joiner, then moved
	// to its share.
	MovesFromJoiners int `json:"moves_from_joiners"`
	// Redials are the new connections after the join by the worker that
	// held the session before (movesSeen.redials): not moves.
	Redials int `json:"redials"`
	// MovesAfterBalanced are the moves that started after the fleet was
	// first balanced, in the observation window that followed.
	MovesAfterBalanced int     `json:"moves_after_balanced"`
	ObservedAfterMs    float64 `json:"observed_after_balanced_ms"`
	// Gap per move: the source's dark time, the old connection's close to
	// the new one's open (the feed's records, one clock).
	Gap Dist `json:"gap"`
	// OpenToFirst: the new connection's open → its first message at the
	// sink (the backlog resumed from the checkpoint arrives at once).
	OpenToFirst Dist `json:"open_to_first"`
	// MovedTwiceWithinHold: sessions that changed owner twice within the
	// minimum hold.
	MovedTwiceWithinHold int             `json:"moved_twice_within_min_hold"`
	Lost                 int64           `json:"lost"`
	Gaps                 int64           `json:"gaps"`
	Duplicated           int64           `json:"duplicated"`
	Violations           []string        `json:"violations,omitempty"`
	LoadsAtJoin          map[string]int  `json:"loads_at_join"`
	LoadsAtBalanced      map[string]int  `json:"loads_at_balanced,omitempty"`
	LoadsAtEnd           map[string]int  `json:"loads_at_end"`
	Timeline             []RebalanceTick `json:"timeline"`
	MinHoldMs            float64         `json:"min_hold_ms"`
	RebalanceEveryMs     float64         `json:"rebalance_every_ms"`
	GoalToBalancedMs     float64         `json:"goal_to_balanced_ms"`
}

// RebalanceTick is the workers' loads at one instant after the join.
type RebalanceTick struct {
	AtMs  float64        `json:"at_ms"` // since the join
	Loads map[string]int `json:"loads"`
}

// Worker defaults the phase runs at (workers/streamer's Config).
const (
	defaultMinHold        = time.Minute
	defaultRebalanceEvery = 10 * time.Second
)

func (r *runner) rebalance(ctx context.Context) error {
	n := r.sz.RebalanceSessions
	hold, every := defaultMinHold, defaultRebalanceEvery
	// The workers name their tenure in the handshake (the feed records
	// it, as the stack's feed runs with devstack.TenureHeader): a move is
	// told from a redial by it (sessionMoves).
	settings := map[string]string{schema.EnvTenureHeader: devstack.TenureHeader}
	if r.sz.RebalanceMinHold > 0 || r.sz.RebalanceEvery > 0 {
		if r.sz.RebalanceMinHold > 0 {
			hold = r.sz.RebalanceMinHold
			settings[schema.EnvMinHold] = hold.String()
		}
		if r.sz.RebalanceEvery > 0 {
			every = r.sz.RebalanceEvery
			settings[schema.EnvRebalanceEvery] = every.String()
		}
	}
	res := &RebalanceResult{Sessions: n, WorkersBefore: 2, WorkersAfter: 4, FeedRate: r.sz.RebalanceFeedRate,
		ToBalancedMs: -1, MinHoldMs: float64(hold.Milliseconds()), RebalanceEveryMs: float64(every.Milliseconds()),
		GoalToBalancedMs: float64((2 * time.Minute).Milliseconds())}
	r.rep.Rebalance = res
	res.Phase = r.begin(PhaseRebalance, map[string]string{
		"transport": r.leaseTransport(),
		"lease":     defaultTimings,
		"workers": fmt.Sprintf("the shipped worker, a rebalancing round every %s, minimum hold %s (the defaults: %s, %s), at most 10 %% of a worker's sessions per round, %d claims/s per worker",
			every, hold, defaultRebalanceEvery, defaultMinHold, DefaultClaimRate),
		"run": fmt.Sprintf("2 workers claim %s new sessions (via SQS); once every session has been held for the minimum hold (%s), 2 more workers start together (as a scale-out's tasks do); the loads are polled (GET /stats) every 250 ms until every worker is within ±10 %% (or 2 sessions) of its fair share, then for %s more",
			thousands(n), hold, r.sz.RebalanceObserve),
		"feed":    fmt.Sprintf("%g msg/s per session, resume by ?from=last_seq+1", res.FeedRate),
		"moves":   "an ownership change is a new connection of the session at the source after the join by another worker than the connection before (the feed's records, the tenure header); a new connection by the same worker is a redial, counted apart; the minimum is computed from the loads at the join (shared/rebalance.MinMoves)",
		"judging": "lost and duplicated messages from the feed's connection records and the sink records (the chaos harness's checks, scripts/chaos)",
	})
	defer res.end()
	ls, err := r.startLeaseStack(ctx, PhaseRebalance, res.FeedRate)
	if err != nil {
		return err
	}
	defer ls.shutdown()

	ws, err := ls.addWorkers(ctx, res.WorkersBefore, true, settings, nil)
	if err != nil {
		return err
	}
	ids := sessionIDs("rb-%05d", n)
	if err := ls.startSessions(ctx, ids); err != nil {
		return err
	}
	got, err := ls.col.waitAll(ctx, ids, nil, 3*time.Minute)
	if err != nil {
		return err
	}
	if len(got) != n {
		return fmt.Errorf("%d of %d sessions delivering 3 min after their start", len(got), n)
	}
	r.log.Info().Int("sessions", n).Msg("rebalance: every session delivering; waiting out the minimum hold")
	if err := sleepCtx(ctx, hold+2*time.Second); err != nil {
		return err
	}
	loads := func() (map[string]int, error) {
		out := map[string]int{}
		for _, w := range ws {
			st, err := getStats(ctx, w.Admin)
			if err != nil {
				return nil, err
			}
			out[w.ID] = st.Owned
		}
		return out, nil
	}
	if res.LoadsAtJoin, err = loads(); err != nil {
		return err
	}
	join := time.Now()
	joined, ready, err := ls.addWorkersAtOnce(ctx, res.WorkersAfter-res.WorkersBefore, true, settings)
	if err != nil {
		return err
	}
	for _, at := range ready {
		res.JoinersReadyMs = append(res.JoinersReadyMs, ms1(at.Sub(join)))
	}
	ws = append(ws, joined...)
	atJoin := map[string]int{}
	for _, w := range ws {
		atJoin[w.ID] = res.LoadsAtJoin[w.ID] // the joiners at 0
	}
	res.MinMoves, res.MinMovesToShare = rebalance.MinMoves(rebalance.Even(atJoin), rebalance.Settings{})

	var balancedAt, lastTick time.Time
	deadline := join.Add(r.sz.RebalanceTimeout)
	for {
		ls2, err := loads()
		if err != nil {
			return err
		}
		now := time.Now()
		if now.Sub(lastTick) >= 2*time.Second {
			lastTick = now
			res.Timeline = append(res.Timeline, RebalanceTick{AtMs: ms1(now.Sub(join)), Loads: ls2})
		}
		total := 0
		for _, l := range ls2 {
			total += l
		}
		if balancedAt.IsZero() && total == n && rebalance.Balanced(rebalance.Even(ls2), rebalance.Settings{}) {
			balancedAt = now
			res.ToBalancedMs = ms1(now.Sub(join))
			res.LoadsAtBalanced = ls2
			r.log.Info().Float64("after_ms", res.ToBalancedMs).Interface("loads", ls2).Msg("rebalance: balanced")
		}
		if !balancedAt.IsZero() && now.Sub(balancedAt) >= r.sz.RebalanceObserve {
			res.LoadsAtEnd = ls2
			res.ObservedAfterMs = ms1(now.Sub(balancedAt))
			break
		}
		if now.After(deadline) {
			res.LoadsAtEnd = ls2
			r.log.Warn().Interface("loads", ls2).Msg("rebalance: not balanced by the deadline")
			break
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}

	conns, err := ls.st.FeedRecords(ctx, "")
	if err != nil {
		return err
	}
	moves := sessionMoves(conns, join, hold)
	res.Moves, res.MovedTwiceWithinHold, res.Redials = len(moves.gaps), moves.twiceWithinHold, moves.redials
	for _, w := range joined {
		res.MovesFromJoiners += moves.bySender[w.ID]
	}
	res.Gap = Summarize(moves.gaps)
	if res.MinMoves > 0 {
		res.Ratio = float64(res.Moves) / float64(res.MinMoves)
	}
	if !balancedAt.IsZero() {
		for _, at := range moves.opened {
			if at.After(balancedAt) {
				res.MovesAfterBalanced++
			}
		}
	}
	var toFirst []time.Duration
	for id, opens := range moves.bySession {
		for _, at := range opens {
			if o, ok := ls.col.first(id, func(o sinkObs) bool { return !o.At.Before(at) }); ok {
				toFirst = append(toFirst, o.At.Round(0).Sub(at))
			}
		}
	}
	res.OpenToFirst = Summarize(toFirst)

	// Judged on the records as they stand: the observation window after
	// the fleet was balanced is the streaming after the last move. The
	// sessions are not stopped one by one (2,000 stops at once queue behind
	// each other in the one local DynamoDB engine, which is no figure of
	// this phase); the stack's shutdown ends them.
	// The deliveries first, then the feed's records: every seq delivered
	// is then in a record of what was sent.
	dels := ls.col.deliveries()
	if conns, err = ls.st.FeedRecords(ctx, ""); err != nil {
		return err
	}
	judgeRebalance(res, chaos.Evidence{Start: res.Phase.Started, End: time.Now(), Deliveries: dels, Conns: conns})
	return nil
}

// movesSeen are the ownership changes after an instant, from the feed's
// connection records.
type movesSeen struct {
	gaps            []time.Duration        // per move: the previous connection's close → this one's open
	opened          []time.Time            // per move: the new connection's open
	bySession       map[string][]time.Time // the opens, by session
	twiceWithinHold int                    // sessions with two moves less than the minimum hold apart
	// redials are the new connections after the instant by the worker
	// that held the connection before (its tenure header names the same
	// worker): a dropped connection dialled again, or a hand-off the
	// receiver refused and its sender kept. No ownership change.
	redials int
	// bySender counts the moves by the worker that held the session
	// before (by the tenure header; a move without one is in none).
	bySender map[string]int
}

// sessionMoves finds every connection opened after since that follows an
// earlier connection of its session by another worker: a move. The worker
// is the tenure header's (feed.ConnRecord.Tenure, "<worker id>/<epoch>");
// a connection without one counts as a move (the header is off).
func sessionMoves(conns []feed.ConnRecord, since time.Time, minHold time.Duration) movesSeen {
	m := movesSeen{bySession: map[string][]time.Time{}, bySender: map[string]int{}}
	by := map[string][]feed.ConnRecord{}
	for _, c := range conns {
		if c.Reason == feed.ReasonRefused || c.Reason == feed.ReasonBadReq {
			continue
		}
		by[c.Session] = append(by[c.Session], c)
	}
	for id, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].OpenedAt.Before(rs[j].OpenedAt) })
		var last time.Time
		twice := false
		for i := 1; i < len(rs); i++ {
			if !rs[i].OpenedAt.After(since) {
				continue
			}
			w, _, wok := feed.ParseTenure(rs[i].Tenure)
			prev, _, pok := feed.ParseTenure(rs[i-1].Tenure)
			if wok && pok && prev == w {
				m.redials++
				continue
			}
			if !rs[i-1].ClosedAt.IsZero() {
				m.gaps = append(m.gaps, rs[i].OpenedAt.Sub(rs[i-1].ClosedAt))
			} else {
				m.gaps = append(m.gaps, 0) // overlapping: the judge reports it
			}
			m.opened = append(m.opened, rs[i].OpenedAt)
			if pok {
				m.bySender[prev]++
			}
			m.bySession[id] = append(m.bySession[id], rs[i].OpenedAt)
			if !last.IsZero() && rs[i].OpenedAt.Sub(last) < minHold {
				twice = true
			}
			last = rs[i].OpenedAt
		}
		if twice {
			m.twiceWithinHold++
		}
	}
	return m
}

// judgeRebalance holds the run to the chaos harness's checks: no fault is
// injected, so every ownership change must repeat nothing (an
// "unexplained" change allows no repeat) and lose nothing. The evidence
// ends while every session still streams: only the checks of what
// happened while it streamed apply (the end-of-run table checks need the
// harness's own final scans).
func judgeRebalance(res *RebalanceResult, ev chaos.Evidence) {
	j := judgeLease(ev, res.FeedRate)
	res.Lost, res.Gaps = j.Totals.Lost, j.Totals.Gaps
	for _, t := range j.Transitions {
		if t.Cause != "stop" {
			res.Duplicated += t.Repeats
		}
	}
	res.Violations = append(res.Violations, violations(j)...)
}

func ms1(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Millisecond)
}

func renderRebalance(p printer, r *Report) {
	rb := r.Rebalance
	if rb == nil {
		return
	}
	heading(p, rb, "4b. Rebalancing: %s sessions on %d workers, then %d more join", thousands(rb.Sessions), rb.WorkersBefore, rb.WorkersAfter-rb.WorkersBefore)
	p("| figure | value |\n|---|---|\n")
	bal := "never (within the run's deadline)"
	if rb.ToBalancedMs >= 0 {
		bal = ms(rb.ToBalancedMs)
	}
	p("| join → every worker within ±10 %% (or 2 sessions) of its share | %s |\n", bal)
	p("| loads at the join → when balanced → at the end | %s → %s → %s |\n", loadList(rb.LoadsAtJoin), loadList(rb.LoadsAtBalanced), loadList(rb.LoadsAtEnd))
	p("| moves made | %d (the minimum to reach ±10 %%: %d, to reach the exact shares: %d; ratio to the ±10 %% minimum %.2f) |\n", rb.Moves, rb.MinMoves, rb.MinMovesToShare, rb.Ratio)
	p("| of which sent on by a joiner (given to it before the plan counted the other joiner) | %d |\n", rb.MovesFromJoiners)
	p("| joiners ready (/readyz) after the join | %s |\n", joinList(rb.JoinersReadyMs))
	p("| redials: new connections by the worker that held the session before (a dropped connection, a refused hand-off kept) | %d |\n", rb.Redials)
	p("| moves after the fleet was balanced (observed %s) | %d |\n", ms(rb.ObservedAfterMs), rb.MovesAfterBalanced)
	p("| sessions moved twice within the minimum hold (%s) | %d |\n", ms(rb.MinHoldMs), rb.MovedTwiceWithinHold)
	p("| messages lost / skipped / duplicated | %d / %d / %d |\n\n", rb.Lost, rb.Gaps, rb.Duplicated)
	p(distHeader)
	distRow(p, "gap per move: old connection closed → new one opened (at the source)", rb.Gap)
	distRow(p, "new connection opened → its first message at the sink", rb.OpenToFirst)
	p("\n")
	for _, v := range rb.Violations {
		p("- violation: %s\n", v)
	}
	if len(rb.Violations) > 0 {
		p("\n")
	}
	p("Each worker, every %s, reads the alive workers' records (load, capacity, draining) and computes the same plan (shared/rebalance): nothing moves while every worker is within ±10 %% (or 2 sessions) of its capacity-weighted share; otherwise every worker above its share sends and every one below receives, at most 10 %% of the sender's sessions per round, only sessions held at least %s. A move is a graceful hand-off given to the receiver: close 1001, flush, then a POST /handoff to the receiver's admin address naming the tenure, its final checkpoint and its secret, and the receiver acquires it from that tenure at once (one write; when it does not take it, the sender releases it with the receiver's name on the session, handoff_to, and only the receiver may acquire until the hand-off bound lapses, then anyone may). So the time to balance is about the rounds the 10 %% bound needs (1,000 → 550 sessions is 6 rounds) plus the joiners' claim admission; moves are directed, so none is wasted on a session that comes back.\n\n",
		ms(rb.RebalanceEveryMs), ms(rb.MinHoldMs))
}

func joinList(at []float64) string {
	if len(at) == 0 {
		return "–"
	}
	var parts []string
	for _, a := range at {
		parts = append(parts, ms(a))
	}
	return strings.Join(parts, " / ")
}

func loadList(m map[string]int) string {
	if len(m) == 0 {
		return "–"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprint(m[k]))
	}
	return strings.Join(parts, " / ")
}

// rebalanceGoals are the rebalancing phase's goals (Goals): time to
// balance, moves against the minimum, gap per move, nothing lost.
func rebalanceGoals(r *Report) []Goal {
	var gs []Goal
	if rb := r.Rebalance; rb != nil && rb.Sessions > 0 && len(rb.LoadsAtJoin) > 0 {
		what := fmt.Sprintf("%s sessions, %d → %d workers", thousands(rb.Sessions), rb.WorkersBefore, rb.WorkersAfter)
		g := Goal{Figure: "Rebalancing: join → every worker within ±10 % of its share, " + what, Known: true,
			Goal: "≤ " + ms(rb.GoalToBalancedMs), Met: rb.ToBalancedMs >= 0 && rb.ToBalancedMs <= rb.GoalToBalancedMs}
		g.Measured = "never"
		if rb.ToBalancedMs >= 0 {
			g.Measured = ms(rb.ToBalancedMs)
		}
		if !g.Met {
			g.Miss = "not balanced in time"
			if rb.ToBalancedMs >= 0 {
				g.Miss = "+" + ms(rb.ToBalancedMs-rb.GoalToBalancedMs)
			}
		}
		gs = append(gs, g)
		gs = append(gs, judged("Rebalancing: moves made ÷ the minimum to reach ±10 %", fmt.Sprintf("%d ÷ %d = %.2f", rb.Moves, rb.MinMoves, rb.Ratio), "≤ 1.2", rb.MinMoves > 0 && rb.Ratio <= 1.2,
			fmt.Sprintf("%.2f", rb.Ratio)))
		gs = append(gs, judged("Rebalancing: gap per move (the source's dark time), p99", ms(rb.Gap.P99), "≤ 500 ms", rb.Gap.N > 0 && rb.Gap.P99 <= 500,
			"+"+ms(rb.Gap.P99-500)))
		gs = append(gs, judged("Rebalancing: messages lost / duplicated; sessions moved twice within the minimum hold", fmt.Sprintf("%d / %d; %d", rb.Lost, rb.Duplicated, rb.MovedTwiceWithinHold), "0 / 0; 0", rb.Lost == 0 && rb.Gaps == 0 && rb.Duplicated == 0 && rb.MovedTwiceWithinHold == 0 && len(rb.Violations) == 0,
			fmt.Sprintf("%d lost, %d skipped, %d duplicated, %d moved twice, %d violation(s)", rb.Lost, rb.Gaps, rb.Duplicated, rb.MovedTwiceWithinHold, len(rb.Violations))))
	}
	return gs
}
