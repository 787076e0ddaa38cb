// The failover phase's hot standby run: sessions on sources that cannot
// replay, half started with a hot standby and half without (the control
// group), their owner killed; per session the dark time at the sink, the
// first message after the death declaration, the feed seqs lost and
// repeated; and what a standby costs (connections at the feed, memory,
// DynamoDB units), with its goals and its part of the failover section.

package bench

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// Goals of the standby run (issue 39).
const (
	// StandbyGoalDeadToFirstMs: the first message after the owner's death
	// declaration at the sink, p99, for standby sessions.
	StandbyGoalDeadToFirstMs = 50
	// StandbyGoalWRUPerSH: a standby's write units per session-hour.
	StandbyGoalWRUPerSH = 1
)

// standbyPrefix names the standby run's sessions ("sb-r<round>-<n>").
const standbyPrefix = "sb"

// StandbyRun is the failover phase's hot standby run.
type StandbyRun struct {
	Rounds           int     `json:"rounds"`
	SessionsPerRound int     `json:"sessions_per_round"`
	FeedRate         float64 `json:"feed_rate"`
	// Standby are the sessions started with a hot standby, Control the
	// same sources without one.
	Standby StandbyGroup `json:"standby"`
	Control StandbyGroup `json:"control"`
	// Promotions are the claims the survivors made on a standby's
	// connection (their /stats standby_promotions): takeovers with no dial.
	Promotions int64 `json:"promotions"`
	// ExpectedLost is what a session without standby loses at a crash by
	// the lease timings: TTL × rate.
	ExpectedLost float64     `json:"expected_lost_per_session"`
	Cost         StandbyCost `json:"cost"`
}

// StandbyGroup is one group's figures, every round's sessions together.
type StandbyGroup struct {
	Sessions int `json:"sessions"`
	// Unrecovered: never delivered again by another worker after the kill.
	Unrecovered int `json:"unrecovered"`
	// Dark: the last message the victim delivered before the kill → the
	// first message by another worker, at the sink (driver clock).
	Dark Dist `json:"dark"`
	// DeadToFirst: the victim's declared death (its record's
	// ended_at_ms) → the first message by another worker; split at the
	// new owner's acquire (its "lease acquired" log line): DeadToAcquired
	// (the takeover's listing, hand-off, admission and acquire) and
	// AcquiredToFirst (a dial or the standby's window).
	DeadToFirst     Dist `json:"declared_dead_to_first"`
	DeadToAcquired  Dist `json:"declared_dead_to_acquired"`
	AcquiredToFirst Dist `json:"acquired_to_first"`
	// Promoted: the new owner's acquire took the standby's connection
	// (its log line's standby: true).
	Promoted int `json:"promoted"`
	// Lost: feed seqs between the first and the last delivered never
	// delivered; Repeated: deliveries of a feed seq already delivered
	// (judgeFeedSeqs); the Max figures are the most in one session.
	Lost        int64 `json:"lost"`
	LostMax     int64 `json:"lost_max_per_session"`
	Repeated    int64 `json:"repeated"`
	RepeatedMax int64 `json:"repeated_max_per_session"`
	// Delivered counts the distinct feed seqs delivered.
	Delivered int64 `json:"delivered"`
	// ConnsAtKill: the session's connections open at the feed at the
	// kill (owner and standby), summed over the group.
	ConnsAtKill int `json:"connections_at_kill"`
}

// StandbyCost is what the standbys cost while held, measured in each
// round's steady window (every standby placed, before the kill), summed
// over the rounds.
type StandbyCost struct {
	WindowSeconds float64 `json:"window_s"`
	// Standbys held in the windows (sum over rounds) and the standby
	// sessions that asked for one.
	Held   int `json:"held"`
	Wanted int `json:"wanted"`
	// StandbyHours are the standby-hours of the windows.
	StandbyHours float64 `json:"standby_hours"`
	// WindowBytes: the holders' standby_window_bytes at the windows' ends
	// (summed); RSSDeltaBytes: the holders' RSS at the window's end minus
	// at their start (before any standby; BaselineTainted counts the
	// holders that held one already when read).
	WindowBytes     int64 `json:"window_bytes"`
	RSSDeltaBytes   int64 `json:"rss_delta_bytes"`
	BaselineTainted int   `json:"baseline_tainted"`
	// Steady is the holders' store meters over the windows (every kind);
	// Round their assign_standby and drop_standby over the whole rounds
	// (placements after the takeover and the drops at the stops
	// included).
	Steady map[string]Usage `json:"steady_units"`
	Round  map[string]Usage `json:"round_units"`
}

// PerStandby is x divided by the standbys held (0 when none).
func (c StandbyCost) PerStandby(x float64) float64 {
	if c.Held == 0 {
		return 0
	}
	return x / float64(c.Held)
}

// WRUPerSH is the standbys' own write units (assign_standby,
// drop_standby) per standby-hour in the steady windows.
func (c StandbyCost) WRUPerSH() float64 {
	if c.StandbyHours <= 0 {
		return 0
	}
	w := c.Steady[dynamostore.OpAssignStandby].TotalWriteUnits() + c.Steady[dynamostore.OpDropStandby].TotalWriteUnits()
	return float64(w) / c.StandbyHours
}

// RRUPerSH is the holders' consistent reads of the session item (the
// standby's backstop re-read, kind get) per standby-hour in the steady
// windows: the holders own nothing then, so their gets are the standbys'.
func (c StandbyCost) RRUPerSH() float64 {
	if c.StandbyHours <= 0 {
		return 0
	}
	return c.Steady[dynamostore.OpGet].ReadUnits / c.StandbyHours
}

// judgeFeedSeqs counts, over one session's deliveries in arrival order,
// the feed seqs between the first and the last delivered that were never
// delivered (lost) and the deliveries of a feed seq already delivered
// (repeated); deliveries without a feed seq are left out.
func judgeFeedSeqs(obs []sinkObs) (delivered, lost, repeated int64) {
	seen := map[int64]bool{}
	lo, hi := int64(0), int64(0)
	for _, o := range obs {
		q := o.FeedSeq
		if q <= 0 {
			continue
		}
		if seen[q] {
			repeated++
			continue
		}
		seen[q] = true
		if len(seen) == 1 || q < lo {
			lo = q
		}
		hi = max(hi, q)
	}
	delivered = int64(len(seen))
	if delivered > 0 {
		lost = hi - lo + 1 - delivered
	}
	return delivered, lost, repeated
}

// standbyRound is what one standby round observed.
type standbyRound struct {
	victim   string
	at       time.Time       // the kill
	standby  map[string]bool // session → started with a standby
	ids      []string
	moved    map[string]sinkObs
	deadAtMs int64
	// promotions: the survivors' standby_promotions after the moves.
	promotions int64
	// acquired: each session's first acquire by a survivor after the
	// kill, from their logs.
	acquired map[string]acquireLine
	cost     StandbyCost
}

// standbyFields are the start fields of the standby run's session i: even
// ones with a standby, odd ones the control group; each group by turns on
// seq_mode none (the feed's "seq" rides in the data) and on the seq field
// with resume switched off (a reconnect starts live). No checkpoint_every:
// such a source writes no periodic checkpoint (docs/api.md), so the
// standby's window delivers all it holds.
func standbyFields(i int) (fields map[string]any, standby bool) {
	standby = i%2 == 0
	fields = map[string]any{"resume_query_param": nil}
	if (i/2)%2 == 0 {
		fields["seq_mode"], fields["seq_field"] = "none", nil
	}
	if standby {
		fields["standby"] = map[string]any{"enabled": true}
	}
	return fields, standby
}

// standbyRunSettings are the standby run's workers' settings: no session
// moves by rebalancing within a round (a round lasts under 3 minutes), so
// that the steady window measures standbys held, not the moves the
// survivors' arrival would start (each move of a standby session to its
// standby's worker promotes it and places the next: an assignment more),
// and the kill finds the victim owning every session. The rounds still
// run and refresh each worker's view of the fleet, which placement uses.
var standbyRunSettings = map[string]string{schema.EnvMinHold: "10m"}

// standbyRun runs the standby rounds on ls (the failover phase's stack,
// after its dial rounds were judged) and returns the run's figures.
func (r *runner) standbyRun(ctx context.Context, ls *leaseStack, rate float64) (*StandbyRun, error) {
	res := &StandbyRun{Rounds: r.sz.StandbyRounds, SessionsPerRound: r.sz.StandbySessions, FeedRate: rate, ExpectedLost: DefaultTTL.Seconds() * rate}
	var rounds []standbyRound
	for k := 1; k <= res.Rounds; k++ {
		rd, err := r.standbyRoundRun(ctx, ls, k, res.SessionsPerRound)
		if err != nil {
			return nil, fmt.Errorf("standby round %d: %w", k, err)
		}
		rounds = append(rounds, rd)
		r.log.Info().Int("round", k).Int("standbys_held", rd.cost.Held).Int64("promotions", rd.promotions).Msg("standby round done")
	}
	conns, err := ls.st.FeedRecords(ctx, "")
	if err != nil {
		return nil, err
	}
	summarizeStandby(res, rounds, ls.col, conns)
	return res, nil
}

// summarizeStandby fills res's groups and cost from the rounds, the sink
// observations and the feed's connection records.
func summarizeStandby(res *StandbyRun, rounds []standbyRound, col *collector, conns []feed.ConnRecord) {
	type acc struct {
		dark, deadToFirst, deadToAcq, acqToFirst []time.Duration
	}
	accs := map[bool]*acc{true: {}, false: {}}
	res.Cost = StandbyCost{Steady: map[string]Usage{}, Round: map[string]Usage{}}
	for _, rd := range rounds {
		res.Promotions += rd.promotions
		c := rd.cost
		res.Cost.WindowSeconds += c.WindowSeconds
		res.Cost.Held += c.Held
		res.Cost.Wanted += c.Wanted
		res.Cost.StandbyHours += c.StandbyHours
		res.Cost.WindowBytes += c.WindowBytes
		res.Cost.RSSDeltaBytes += c.RSSDeltaBytes
		res.Cost.BaselineTainted += c.BaselineTainted
		addUnits(res.Cost.Steady, c.Steady)
		addUnits(res.Cost.Round, c.Round)
		for _, id := range rd.ids {
			sb := rd.standby[id]
			g, a := &res.Control, accs[false]
			if sb {
				g, a = &res.Standby, accs[true]
			}
			g.Sessions++
			obs := col.session(id)
			delivered, lost, repeated := judgeFeedSeqs(obs)
			g.Delivered += delivered
			g.Lost += lost
			g.LostMax = max(g.LostMax, lost)
			g.Repeated += repeated
			g.RepeatedMax = max(g.RepeatedMax, repeated)
			g.ConnsAtKill += openAt(conns, id, rd.at)
			first, ok := rd.moved[id]
			if !ok {
				g.Unrecovered++
				continue
			}
			if last, ok := lastBefore(obs, rd.victim, rd.at); ok {
				a.dark = append(a.dark, first.At.Round(0).Sub(last.At.Round(0)))
			}
			dead := time.UnixMilli(rd.deadAtMs)
			if rd.deadAtMs > 0 {
				a.deadToFirst = append(a.deadToFirst, first.At.Round(0).Sub(dead))
			}
			if acq, ok := rd.acquired[id]; ok {
				if acq.Standby {
					g.Promoted++
				}
				a.acqToFirst = append(a.acqToFirst, first.At.Round(0).Sub(acq.At))
				if rd.deadAtMs > 0 {
					a.deadToAcq = append(a.deadToAcq, acq.At.Sub(dead))
				}
			}
		}
	}
	for sb, g := range map[bool]*StandbyGroup{true: &res.Standby, false: &res.Control} {
		a := accs[sb]
		g.Dark, g.DeadToFirst = WithSamples(a.dark), Summarize(a.deadToFirst)
		g.DeadToAcquired, g.AcquiredToFirst = Summarize(a.deadToAcq), Summarize(a.acqToFirst)
	}
}

// standbyRoundRun is one standby round: a victim alone claims the round's
// sessions, two survivors start and receive the standbys, the steady
// window measures their cost, the victim is killed and every session's
// first delivery by a survivor is awaited; then the sessions stop and the
// survivors leave.
func (r *runner) standbyRoundRun(ctx context.Context, ls *leaseStack, k, n int) (standbyRound, error) {
	rd := standbyRound{ids: sessionIDs(standbyPrefix+"-r"+itoa(k)+"-%04d", n), standby: map[string]bool{}}
	fields := map[string]map[string]any{}
	for i, id := range rd.ids {
		f, sb := standbyFields(i)
		fields[id], rd.standby[id] = f, sb
		if sb {
			rd.cost.Wanted++
		}
	}
	start := func(ctx context.Context, ids []string) error {
		return ls.startSessionsWith(ctx, ids, func(id string) map[string]any { return fields[id] })
	}
	victim, err := ls.startVictim(ctx, standbyRunSettings, rd.ids, start)
	if err != nil {
		return rd, err
	}
	rd.victim = victim.ID
	rss0 := map[string]int64{}
	// The baseline before any standby, read right after each survivor's
	// start: the victim places them once its view of the fleet (refreshed
	// every 5 s) holds the survivor.
	survivors, err := ls.addWorkers(ctx, 2, true, standbyRunSettings, func(w *bworker) error {
		st, err := getStats(ctx, w.Admin)
		if err != nil {
			return err
		}
		if st.Standbys > 0 {
			rd.cost.BaselineTainted++
		}
		rss0[w.ID], err = ProcRSS(w.Proc.Pid())
		return err
	})
	if err != nil {
		return rd, err
	}
	if err := waitStandbys(ctx, survivors, rd.cost.Wanted, 45*time.Second); err != nil {
		r.log.Warn().Err(err).Int("round", k).Msg("standbys not all placed")
	}
	if err := r.standbyWindow(ctx, survivors, rss0, &rd.cost); err != nil {
		return rd, err
	}
	if rd.at, rd.moved, rd.deadAtMs, err = ls.signalMoved(ctx, victim, syscall.SIGKILL, rd.ids, killMoveTimeout); err != nil {
		return rd, err
	}
	// More streaming after the move, so that a loss or a repeat at the
	// boundary shows in the records.
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return rd, err
	}
	ids := map[string]bool{}
	for _, id := range rd.ids {
		ids[id] = true
	}
	rd.acquired = map[string]acquireLine{}
	for _, w := range survivors {
		st, err := getStats(ctx, w.Admin)
		if err != nil {
			return rd, err
		}
		rd.promotions += st.StandbyPromotions
		acq, err := acquiredAfter(w.Proc.LogPath, ids, rd.at)
		if err != nil {
			return rd, err
		}
		for id, a := range acq {
			if cur, ok := rd.acquired[id]; !ok || a.At.Before(cur.At) {
				rd.acquired[id] = a
			}
		}
	}
	if _, err := ls.stopSessions(ctx, rd.ids); err != nil {
		return rd, err
	}
	if err := ls.waitOwnedZero(ctx, survivors, 20*time.Second); err != nil {
		r.log.Warn().Err(err).Msg("sessions still owned after the stops")
	}
	if err := waitStandbys(ctx, survivors, 0, 20*time.Second); err != nil {
		r.log.Warn().Err(err).Msg("standbys still held after the stops")
	}
	// The round's standby writes: the survivors' meters started at zero
	// with them (the holders write the assignments and the drops).
	end, _, err := sumUnits(ctx, survivors)
	if err != nil {
		return rd, err
	}
	rd.cost.Round = map[string]Usage{}
	for _, kind := range []string{dynamostore.OpAssignStandby, dynamostore.OpDropStandby} {
		rd.cost.Round[kind] = end[kind]
	}
	return rd, stopWorkers(survivors)
}

// standbyWindow measures the held standbys' cost over the steady window
// (Sizes.StandbyCostWindow, at least the settle the survivors need to
// watch the victim): the holders' store meters at its ends, their
// standbys, windows and RSS at its end against rss0 (their RSS before any
// standby).
func (r *runner) standbyWindow(ctx context.Context, holders []*bworker, rss0 map[string]int64, c *StandbyCost) error {
	start, _, err := sumUnits(ctx, holders)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := sleepCtx(ctx, max(r.sz.StandbyCostWindow, settleBefore(kindKill))); err != nil {
		return err
	}
	end, _, err := sumUnits(ctx, holders)
	if err != nil {
		return err
	}
	c.WindowSeconds = time.Since(t0).Seconds()
	c.Steady = diffUnits(end, start)
	err = eachStats(ctx, holders, func(w *bworker, st workerStats) error {
		rss, err := ProcRSS(w.Proc.Pid())
		if err != nil {
			return err
		}
		c.Held += st.Standbys
		c.WindowBytes += st.StandbyWindowBytes
		c.RSSDeltaBytes += rss - rss0[w.ID]
		return nil
	})
	if err != nil {
		return err
	}
	c.StandbyHours = float64(c.Held) * c.WindowSeconds / 3600
	return nil
}

// waitStandbys polls the workers until they hold want standbys in all
// (or timeout).
func waitStandbys(ctx context.Context, ws []*bworker, want int, timeout time.Duration) error {
	n, err := waitTotal(ctx, ws, standbys, func(n int) bool { return n == want }, 200*time.Millisecond, timeout)
	if errors.Is(err, errWaited) {
		return fmt.Errorf("workers hold %d standby(s), want %d, after %s", n, want, timeout)
	}
	return err
}
