// Phase cost: DynamoDB write and read units per session-hour as the
// workers' stores meter them, for active and idle sessions, and what they
// cost (the price model: cost.go).

package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/wsfleet/wsfleet/cmd/wsfleet/apiclient"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/testkit/feed"
)

// costPhase is the phase (phase.go).
var costPhase = phase{name: PhaseCost, run: (*runner).cost, render: renderCost, goals: costGoals,
	onModel: func(m *ModelResults, got *Report) { m.Cost = got.Cost }}

// ckptWait is how long a cost run waits, once every session is held, for
// the steady window: one checkpoint interval and its jitter.
const ckptWait = DefaultCheckpointEvery * 11 / 10

// TenureFinalCheckpoint is the per-tenure kind that runs before issue 37's checkpoint move
// reported: the checkpoints written between the window and the end of the
// stop. A stop writes its final checkpoint on the release (release_seq),
// so those were the steady checkpoints of the stop's ~minute, already in
// the per-session-hour figure: new runs leave them out of the tenure.
// Kept so that the bill reads an older run's figure.
const TenureFinalCheckpoint = "final_checkpoint"

// IdleFeedRate is the idle run's feed rate: the feed wants a rate > 0, and
// at 0.0001 msg/s a session's first message would come 2.8 hours after it
// connects, so no session sends anything during the run.
const IdleFeedRate = 0.0001

// AuthHeaderBytes is the size of the Authorization header every cost
// session carries (a realistic bearer token), so that a session item is
// above 1 KB, as in production.
const AuthHeaderBytes = 1024

// CostRun is one steady run of the cost phase: its sessions, its window
// and what the workers' stores metered.
type CostRun struct {
	Name     string  `json:"name"` // "active" (1 msg/s) or "idle"
	Sessions int     `json:"sessions"`
	Workers  int     `json:"workers"`
	FeedRate float64 `json:"feed_rate"`
	// Held is the mean of the sessions held at the window's start and end.
	Held              float64 `json:"held"`
	SessionsPerWorker float64 `json:"sessions_per_worker"`
	RampSec           float64 `json:"ramp_s"` // first start → every session held
	WindowSec         float64 `json:"window_s"`
	SessionHours      float64 `json:"session_hours"`
	WorkerHours       float64 `json:"worker_hours"`
	// Steady is the window's usage (the sum of the workers' store meters).
	Steady CostSplit `json:"steady"`
	// HeartbeatWRUPerWH is the heartbeat write units per worker-hour;
	// HeartbeatsPerWH the heartbeat writes.
	HeartbeatWRUPerWH float64 `json:"heartbeat_wru_per_worker_hour"`
	HeartbeatsPerWH   float64 `json:"heartbeats_per_worker_hour"`
	// CheckpointsPerSH are the checkpoint writes per session-hour.
	CheckpointsPerSH float64 `json:"checkpoints_per_session_hour"`
	// IndexWritesInWindow is every index write unit of the window, all
	// kinds (0: no index key value took a write in steady state).
	IndexWritesInWindow int64 `json:"index_writes_in_window"`
	// Tenure: the ramp's acquires (from the workers' start to the
	// window), the stop's release and final checkpoint (every session
	// stopped through the API after the window), per session.
	Tenure    []TenureCost `json:"tenure"`
	TenureWRU float64      `json:"tenure_wru"`
	TenureRRU float64      `json:"tenure_rru"`
	// Monthly on-demand cost per 1,000 sessions: measured, and at the
	// defaults' 1,000 sessions per worker.
	MonthlyMeasured float64 `json:"monthly_usd_per_1000_sessions_measured"`
	MonthlyDefaults float64 `json:"monthly_usd_per_1000_sessions_at_1000_per_worker"`
	// Meter is the window as the DynamoDB model billed it (nil on
	// dynalite).
	Meter *MeterRates `json:"model_meter,omitempty"`
}

// CostResult is figure 5: the workers' own store meters (GET /stats
// store_units) during steady runs at the default timings.
type CostResult struct {
	Phase
	Active *CostRun `json:"active,omitempty"`
	Idle   *CostRun `json:"idle,omitempty"`
	// TableCeiling is TableWRULimit ÷ the active run's write units per
	// session-second at the defaults' 1,000 sessions per worker;
	// TableCeilingMeasured the same at this run's sessions per worker.
	TableCeiling         int `json:"table_ceiling_sessions"`
	TableCeilingMeasured int `json:"table_ceiling_sessions_measured"`
	// The busiest keys: one worker record (its heartbeats), one checkpoint
	// item, in write units per second; the worker record's reads (its
	// watchers).
	WorkerKeyWRUPerSec     float64 `json:"worker_key_wru_per_s"`
	CheckpointKeyWRUPerSec float64 `json:"checkpoint_key_wru_per_s"`
	WorkerKeyRRUPerSec     float64 `json:"worker_key_rru_per_s"`
}

func (r *runner) cost(ctx context.Context) error {
	sz := r.sz
	res := &CostResult{}
	res.Phase = r.begin(PhaseCost, map[string]string{
		"transport": r.leaseTransport(),
		"lease":     defaultTimings,
		"active": fmt.Sprintf("%s sessions on %d workers (both consume the work queue; claims up to 200/s each to shorten the ramp), dynalite in memory, feed %g msg/s per session, each session started through the API with a %d-byte Authorization header; sinks to /dev/null",
			thousands(sz.CostSessions), sz.CostWorkers, 1.0, AuthHeaderBytes),
		"idle": fmt.Sprintf("at the same time, on a stack of its own: %s sessions on %d workers whose feed sends nothing (%g msg/s: the feed wants a rate > 0; the first message would come after 2.8 h)",
			thousands(sz.CostIdleSessions), sz.CostWorkers, IdleFeedRate),
		"window": fmt.Sprintf("steady window of %s that starts once every session is held and one checkpoint interval × 1.1 (%s) has passed, so that every session has checkpointed and the ramp is over; counts from each worker's dynamostore meters (GET /stats store_units) at the window's ends, summed",
			sz.CostWindow, ckptWait),
		"billing": "the store meters each request as DynamoDB bills it (dynamostore/units.go): a write ceil(max(item before, after) / 1 KB) units, a failed condition the existing item's size, 1 unit per index entry put or deleted (2 for a key move); consistent reads ceil(size / 4 KB), query pages 0.5 × ceil(bytes / 4 KB)",
		"tenure":  "acquire over the ramp, release (with the final checkpoint as release_seq) over the stop of every session through the API after the window, per session; the periodic checkpoints written during the stop are the steady rate's, not the tenure's (ingest's own writes, the start's PutItem and the stop's write and mailbox add, are not the workers' and are not counted)",
		"pricing": fmt.Sprintf("on-demand us-east-1: $%.3f per million WRU, $%.3f per million RRU; %d h per month; table quota %s WRU/s", PriceWriteMillion, PriceReadMillion, HoursPerMonth, thousands(TableWRULimit)),
	})
	r.rep.Cost = res
	defer res.end()
	active := &CostRun{Name: "active", Sessions: sz.CostSessions, Workers: sz.CostWorkers, FeedRate: 1}
	idle := &CostRun{Name: "idle", Sessions: sz.CostIdleSessions, Workers: sz.CostWorkers, FeedRate: IdleFeedRate}
	res.Active, res.Idle = active, idle
	var g errgroup.Group
	g.Go(func() error { return r.costRun(ctx, "cost", active) })
	g.Go(func() error { return r.costRun(ctx, "cost-idle", idle) })
	err := g.Wait()
	if active.WorkerHours > 0 {
		norm := active.Steady.Total.NormWRUPerSH
		res.TableCeiling = TableCeiling(norm)
		res.TableCeilingMeasured = TableCeiling(active.Steady.Total.WRUPerSH)
		res.WorkerKeyWRUPerSec = active.HeartbeatWRUPerWH / 3600
		for _, k := range active.Steady.Kinds {
			if k.Kind == dynamostore.OpGetWorker {
				// Each worker reads the records of the Watchers workers it
				// watches and is watched by about as many: per record
				// about what one worker reads.
				res.WorkerKeyRRUPerSec = k.RRUPerWH / 3600
			}
		}
		if active.SessionHours > 0 {
			for _, k := range active.Steady.Kinds {
				if k.Kind == dynamostore.OpCheckpoint {
					res.CheckpointKeyWRUPerSec = k.WRUPerSH / 3600
				}
			}
		}
		r.log.Info().Float64("wru_per_session_hour_at_defaults", norm).Float64("usd_month_per_1000", active.MonthlyDefaults).Int("table_ceiling", res.TableCeiling).Msg("cost")
	}
	return err
}

// costRun runs one steady run on a stack of its own.
func (r *runner) costRun(ctx context.Context, name string, run *CostRun) error {
	ls, err := r.startLeaseStack(ctx, name, run.FeedRate)
	if err != nil {
		return err
	}
	ls.discardSinks = true
	defer ls.shutdown()
	perWorker := (run.Sessions*11/10)/run.Workers + 10
	ws, err := ls.addWorkers(ctx, run.Workers, true, map[string]string{schema.EnvMaxSessions: itoa(perWorker), schema.EnvClaimsPerSecond: "200"}, nil)
	if err != nil {
		return err
	}
	ids := sessionIDs(name+"-%05d", run.Sessions)
	t0 := time.Now()
	if err := ls.startWithToken(ctx, ids); err != nil {
		return err
	}
	if err := ls.waitOwned(ctx, ws, run.Sessions, 5*time.Minute); err != nil {
		return err
	}
	run.RampSec = time.Since(t0).Seconds()
	r.log.Info().Str("run", name).Int("sessions", run.Sessions).Float64("ramp_s", run.RampSec).Msg("cost: every session held; waiting one checkpoint interval")
	if err := sleepCtx(ctx, ckptWait); err != nil {
		return err
	}
	s0, owned0, err := sumUnits(ctx, ws)
	if err != nil {
		return err
	}
	u0, err := ls.tableUsage(ctx, ls.table())
	if err != nil {
		return err
	}
	w0 := time.Now()
	if err := sleepCtx(ctx, r.sz.CostWindow); err != nil {
		return err
	}
	s1, owned1, err := sumUnits(ctx, ws)
	if err != nil {
		return err
	}
	u1, err := ls.tableUsage(ctx, ls.table())
	if err != nil {
		return err
	}
	el := time.Since(w0)
	run.WindowSec = el.Seconds()
	run.Held = float64(owned0+owned1) / 2
	run.SessionsPerWorker = run.Held / float64(len(ws))
	run.SessionHours = run.Held * el.Hours()
	run.WorkerHours = float64(len(ws)) * el.Hours()
	delta := diffUnits(s1, s0)
	run.Steady = Split(delta, run.SessionHours, run.WorkerHours)
	hb := delta[dynamostore.OpHeartbeat]
	run.HeartbeatWRUPerWH = float64(hb.TotalWriteUnits()) / run.WorkerHours
	run.HeartbeatsPerWH = float64(hb.Writes) / run.WorkerHours
	if run.SessionHours > 0 {
		run.CheckpointsPerSH = float64(delta[dynamostore.OpCheckpoint].Writes) / run.SessionHours
	}
	run.IndexWritesInWindow = IndexWriteUnits(delta)
	run.MonthlyMeasured = MonthlyPer1000(run.Steady.Total.WRUPerSH, run.Steady.Total.RRUPerSH)
	run.MonthlyDefaults = MonthlyPer1000(run.Steady.Total.NormWRUPerSH, run.Steady.Total.NormRRUPerSH)
	if ls.st.Model != nil {
		run.Meter = meterRates(u0, u1, run.SessionHours)
	}

	// The end of every tenure: a stop through the API (the owner releases
	// with a final checkpoint).
	if _, err := ls.stopSessions(ctx, ids); err != nil {
		return err
	}
	if err := ls.waitOwnedZero(ctx, ws, 2*time.Minute); err != nil {
		return err
	}
	s2, _, err := sumUnits(ctx, ws)
	if err != nil {
		return err
	}
	end := diffUnits(s2, s1)
	tenure := map[string]Usage{
		dynamostore.OpAcquire: s0[dynamostore.OpAcquire],
		dynamostore.OpRelease: end[dynamostore.OpRelease],
	}
	run.Tenure = PerTenure(tenure, run.Sessions, dynamostore.OpAcquire, dynamostore.OpRelease)
	for _, t := range run.Tenure {
		run.TenureWRU += t.WRU
		run.TenureRRU += t.RRU
	}
	r.log.Info().Str("run", name).Float64("wru_per_session_hour", run.Steady.Total.WRUPerSH).Float64("at_1000_per_worker", run.Steady.Total.NormWRUPerSH).Msg("cost run done")
	return nil
}

// authToken is a bearer token of AuthHeaderBytes bytes in all.
func authToken() string {
	return "Bearer " + strings.Repeat("x", AuthHeaderBytes-len("Bearer "))
}

// startWithToken starts ids through the API with the Authorization header,
// 16 at a time.
func (ls *leaseStack) startWithToken(ctx context.Context, ids []string) error {
	tok := authToken()
	return eachID(ctx, ids, 16, func(ctx context.Context, id string) error {
		_, err := ls.st.API.Start(ctx, apiclient.StartRequest{
			ConnectionID: id, Spec: spec.Spec{WSURL: feed.URL(ls.st.FeedURL(), id), Resume: &spec.Resume{QueryParam: feed.DefaultResumeParam},
				Headers: map[string]string{"Authorization": tok}},
		})
		if err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
		return nil
	})
}

// waitOwned polls the workers until they hold want sessions in all.
func (ls *leaseStack) waitOwned(ctx context.Context, ws []*bworker, want int, timeout time.Duration) error {
	n, err := waitTotal(ctx, ws, owned, func(n int) bool { return n >= want }, time.Second, timeout)
	if errors.Is(err, errWaited) {
		return fmt.Errorf("workers hold %d of %d sessions after %s", n, want, timeout)
	}
	return err
}

// sumUnits adds up the workers' store meters and owned sessions, reading
// the workers at once (the snapshot spans one round trip).
func sumUnits(ctx context.Context, ws []*bworker) (map[string]Usage, int, error) {
	out := map[string]Usage{}
	owned := 0
	err := eachStats(ctx, ws, func(_ *bworker, st workerStats) error {
		u, err := storeUnits(st)
		if err != nil {
			return err
		}
		owned += st.Owned
		addUnits(out, u)
		return nil
	})
	return out, owned, err
}

func renderCost(p printer, r *Report) {
	c := r.Cost
	if !heading(p, c, "6. DynamoDB cost: write and read units per session-hour") {
		return
	}
	for _, run := range []*CostRun{c.Active, c.Idle} {
		if run == nil || run.WorkerHours == 0 {
			continue
		}
		renderCostRun(p, run)
	}
	a, idle := c.Active, c.Idle
	if a == nil || a.WorkerHours == 0 {
		return
	}
	tot := a.Steady.Total
	live, own, ckpt, rd := a.Steady.Category(dynamostore.CatLiveness), a.Steady.Category(dynamostore.CatOwnership), a.Steady.Category(dynamostore.CatCheckpoint), a.Steady.Category(dynamostore.CatReads)
	p("**What each figure is, at 1 msg/s per session.**\n\n")
	p("- **Liveness** is the worker's heartbeat: one conditional write of its own record per second, whatever it holds (the record is well below 1 KB: 1 write unit each, nothing indexed changes). Measured: %.0f heartbeats and %.0f write units per worker-hour. Per session it scales as (heartbeat write units per worker-hour) ÷ (sessions per worker): %.2f write units per session-hour measured at this run's %.0f sessions per worker; **at the defaults' 1,000 sessions per worker %.0f ÷ 1,000 = %.2f** (the figure the goals use).\n",
		a.HeartbeatsPerWH, a.HeartbeatWRUPerWH, live.WRUPerSH, a.SessionsPerWorker, a.HeartbeatWRUPerWH, live.NormWRUPerSH)
	p("- **Ownership** (acquire, release, fail) is written only when a session changes hands: %.2f write units per session-hour in the steady window (%d index write units in it, all kinds). Its cost is per tenure, below.\n", own.WRUPerSH, a.IndexWritesInWindow)
	p("- **Checkpoints**: each session writes `last_seq` on its session item (below 1 KB: 1 write unit, the 1 KB Authorization header being in the spec item; no index projects it) every 60 s when its last_seq advanced: %.1f checkpoints and %.1f write units per session-hour.\n", a.CheckpointsPerSH, ckpt.WRUPerSH)
	p("- **Reads**: the watchers' reads of the records they watch (`get_worker`, consistent, 1 unit each), the reconcile passes (`unowned`: the 16 by_unowned shards; `list_workers`: the alive and GONE workers; `owned_by`: the by_owner audit of the worker's own sessions, whose pages grow with them) and single-session reads (`get`: a stop or a new generation); the mailbox comes back with the heartbeat at no cost. %.2f read units per session-hour measured, %.2f at 1,000 sessions per worker (the per-worker reads divided by 1,000).\n\n", rd.RRUPerSH, rd.NormRRUPerSH)
	p("**Total at the defaults (1,000 sessions per worker, 1 msg/s): %.1f write units per session-hour**, of which liveness + ownership %.2f, checkpoints %.1f; and %.2f read units. Measured at this run's %.0f sessions per worker: %.1f write units, %.2f read units. Before issue 13 it was %s write units per session-hour (a renewal every 3.33 s, 1 base + 2 index units each).\n\n",
		tot.NormWRUPerSH, live.NormWRUPerSH+own.NormWRUPerSH, ckpt.NormWRUPerSH, tot.NormRRUPerSH, a.SessionsPerWorker, tot.WRUPerSH, tot.RRUPerSH, thousands(PreviousWRUPerSH))
	if idle != nil && idle.WorkerHours > 0 {
		it := idle.Steady.Total
		p("**Idle sessions** (the feed sends nothing): %.2f write units per session-hour at the defaults' 1,000 sessions per worker (%.2f measured at %.0f sessions per worker), of which checkpoints %.2f: a session whose last_seq does not advance writes nothing; only its worker's heartbeat is shared among its sessions.\n\n",
			it.NormWRUPerSH, it.WRUPerSH, idle.SessionsPerWorker, idle.Steady.Category(dynamostore.CatCheckpoint).NormWRUPerSH)
	}
	p("**Projected on-demand cost per 1,000 sessions per month** (%d h, $%.3f per million WRU, $%.3f per million RRU): **$%s at the defaults** (1,000 sessions per worker, 1 msg/s), **against $%s before issue 13**; $%s measured at this run's %.0f sessions per worker.",
		HoursPerMonth, PriceWriteMillion, PriceReadMillion, money(a.MonthlyDefaults), money(PreviousMonthly), money(a.MonthlyMeasured), a.SessionsPerWorker)
	if idle != nil && idle.WorkerHours > 0 {
		p(" Idle sessions: $%s at the defaults.", money(idle.MonthlyDefaults))
	}
	p("\n\n")
	if len(a.Tenure) > 0 {
		p("**Per tenure** (one claim to one release), from the ramp (acquire) and the stop of all %s sessions after the window (release, whose write carries the final checkpoint; runs before issue 37's checkpoint move added the periodic checkpoints written while the stop went on as a final_checkpoint row, which are the steady rate's):\n\n| request | requests | write units (of which index) | read units |\n|---|---|---|---|\n", thousands(a.Sessions))
		for _, t := range a.Tenure {
			p("| %s | %.2f | %.2f (%.2f) | %.2f |\n", t.Kind, t.Requests, t.WRU, t.IndexWRU, t.RRU)
		}
		p("| **per tenure** | | **%.2f** | **%.2f** |\n\n", a.TenureWRU, a.TenureRRU)
		p("The acquire and the release are billed on the session item, which stays below 1 KB (the 1 KB header is in the session's spec item, which the acquire reads: its read units), and each moves the item's by_owner and by_unowned index entries (a release of a stopped session only by_owner). The acquire fences the last owner's checkpoints in its own write (they are on the same item: its epoch), so a clean start-to-stop tenure is 5 write units (acquire 1 + 2 index, release 1 + 1 index); an acquire refused because another worker took the session first (a lost race) adds 1. A session that starts and ends once an hour adds %.1f write units per session-hour.\n\n", a.TenureWRU)
	}
	p("**Table ceiling.** An on-demand table's default write quota is %s write units per second (docs/references.md). At the defaults' %.1f write units per session-hour (%.5f per session-second) one table holds %s ÷ %.5f = **%s sessions** (%s at this run's %.0f sessions per worker; before issue 13: %s, the index shards' limit). The ceiling is set by the checkpoints: it grows with WSFLEET_CHECKPOINT_EVERY.\n\n",
		thousands(TableWRULimit), tot.NormWRUPerSH, tot.NormWRUPerSH/3600, thousands(TableWRULimit), tot.NormWRUPerSH/3600, thousands(c.TableCeiling), thousands(c.TableCeilingMeasured), a.SessionsPerWorker, thousands(PreviousTableLimit))
	idx := a.IndexWritesInWindow
	if idle != nil {
		idx += idle.IndexWritesInWindow
	}
	p("**Hot keys.** No key takes more than one worker's heartbeats or one session's checkpoints: the busiest base-table key is a worker record, %.2f write units/s (its heartbeats) and about %.1f read units/s (its watchers), against %s write and %s read units/s per partition; a session item takes %.4f write units/s of checkpoints. The store meters index writes by kind: **%d index write units in the steady windows** (both runs, every kind), so no index key value took a write in steady state — nothing indexed changes on a heartbeat or a checkpoint. Index entries move only with ownership (per tenure above), on the by_owner value of the acquiring worker (at most its claim rate: 50/s by default) and the 16 by_unowned shards.\n\n",
		c.WorkerKeyWRUPerSec, c.WorkerKeyRRUPerSec, thousands(PartitionWCU), thousands(PartitionRCU), c.CheckpointKeyWRUPerSec, idx)
}

func renderCostRun(p printer, run *CostRun) {
	what := "1 msg/s per session"
	if run.Name == "idle" {
		what = "idle: the feed sends nothing"
	}
	p("### %s sessions, %s\n\n", thousands(run.Sessions), what)
	p("%d workers holding %.0f sessions (%.0f per worker; every session held %.0f s after the first start); steady window %.0f s: %.2f session-hours, %.3f worker-hours.\n\n",
		run.Workers, run.Held, run.SessionsPerWorker, run.RampSec, run.WindowSec, run.SessionHours, run.WorkerHours)
	p("| category | write units per session-hour (of which index) | at 1,000 sessions per worker | read units per session-hour | at 1,000 sessions per worker |\n|---|---|---|---|---|\n")
	for _, c := range run.Steady.Categories {
		p("| %s | %.2f (%.2f) | %.2f | %.2f | %.2f |\n", c.Category, c.WRUPerSH, c.IndexWRUPerSH, c.NormWRUPerSH, c.RRUPerSH, c.NormRRUPerSH)
	}
	t := run.Steady.Total
	p("| **total** | **%.2f (%.2f)** | **%.2f** | **%.2f** | **%.2f** |\n\n", t.WRUPerSH, t.IndexWRUPerSH, t.NormWRUPerSH, t.RRUPerSH, t.NormRRUPerSH)
	p("| request kind | category | scales with | writes (condition failed) | reads | write units (index) | read units | per worker-hour: write / read units |\n|---|---|---|---|---|---|---|---|\n")
	for _, k := range run.Steady.Kinds {
		scale := "sessions"
		if k.PerWorker {
			scale = "workers"
		}
		p("| %s | %s | %s | %d (%d) | %d | %d (%d) | %.1f | %.0f / %.0f |\n", k.Kind, k.Category, scale, k.Usage.Writes, k.Usage.ConditionFailed, k.Usage.Reads,
			k.Usage.TotalWriteUnits(), k.Usage.IndexWriteUnits, k.Usage.ReadUnits, k.WRUPerWH, k.RRUPerWH)
	}
	p("\n")
}

// costGoals are the cost phase's goals (Goals): write units per
// session-hour, the table ceiling, no hot index key.
func costGoals(r *Report) []Goal {
	var gs []Goal
	if c := r.Cost; c != nil && c.Active != nil && c.Active.WorkerHours > 0 {
		a := c.Active
		tot := a.Steady.Total.NormWRUPerSH
		lo := a.Steady.Category(dynamostore.CatLiveness).NormWRUPerSH + a.Steady.Category(dynamostore.CatOwnership).NormWRUPerSH
		add := func(fig string, v, limit float64, unit string) {
			gs = append(gs, judged(fig, fmt.Sprintf("%.2f%s", v, unit), fmt.Sprintf("≤ %g%s", limit, unit), v <= limit,
				fmt.Sprintf("+%.2f", v-limit)))
		}
		add("Write units per session-hour at the defaults (1,000 sessions per worker, 1 msg/s)", tot, 64, "")
		add("— of which liveness + ownership", lo, 4, "")
		if i := c.Idle; i != nil && i.WorkerHours > 0 {
			add("Write units per idle session-hour at the defaults", i.Steady.Total.NormWRUPerSH, 4, "")
		}
		gs = append(gs, judged("Table ceiling (40,000 WRU/s ÷ write units per session-second at the defaults)", thousands(c.TableCeiling)+" sessions", "≥ 1,000,000", c.TableCeiling >= 1_000_000,
			thousands(1_000_000-c.TableCeiling)+" sessions short"))
		idx := a.IndexWritesInWindow
		if c.Idle != nil {
			idx += c.Idle.IndexWritesInWindow
		}
		gs = append(gs, judged("Index write units in the steady windows (no hot index key)", fmt.Sprint(idx), "0", idx == 0,
			fmt.Sprintf("%d index write units", idx)))
	}
	return gs
}
