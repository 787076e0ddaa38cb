package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// CostResult is figure 5: the store's own request counts during a steady
// run at the default timings, per session-hour, and what they cost.
type CostResult struct {
	Phase
	Sessions      int                `json:"sessions"`
	Workers       int                `json:"workers"`
	WindowSec     float64            `json:"window_s"`
	SessionHours  float64            `json:"session_hours"`
	WorkerHours   float64            `json:"worker_hours"`
	Steady        []KindCost         `json:"steady"`     // per kind, during the steady window
	PerTenure     map[string]float64 `json:"per_tenure"` // requests per session tenure (claim + release), by kind
	WRUPerSH      float64            `json:"wru_per_session_hour"`
	IndexWRUPerSH float64            `json:"index_wru_per_session_hour"`
	RRUPerSH      float64            `json:"rru_per_session_hour"`
	// Monthly on-demand cost per 1,000 sessions: steady state, and with one
	// tenure (acquire + release, …) per session-hour on top.
	MonthlyPer1000         float64 `json:"monthly_usd_per_1000_sessions"`
	MonthlyPer1000HourlyTn float64 `json:"monthly_usd_per_1000_sessions_hourly_tenures"`
	TenureWRU              float64 `json:"tenure_wru"`
	QueryPagesPerWorkerH   float64 `json:"orphan_query_pages_per_worker_hour"`
	// The index partition bound: by formula at the default renew interval,
	// and from the measured index write units.
	GSIMaxSessions int `json:"gsi_max_sessions"` // per index key value (shard)
	// GSITableMaxSessions is GSIMaxSessions × schema.IndexShards (an even
	// hash); ShardSpread is how uneven this run's ids fell (ShardSpread).
	GSITableMaxSessions    int     `json:"gsi_table_max_sessions"`
	ShardSpread            float64 `json:"shard_spread"`
	GSIMaxSessionsMeasured int     `json:"gsi_max_sessions_measured"`
	RenewEverySec          float64 `json:"renew_every_s"`
}

func (r *runner) cost(ctx context.Context) error {
	sz := r.sz
	res := &CostResult{Sessions: sz.CostSessions, Workers: 2, RenewEverySec: DefaultRenewEvery.Seconds(), PerTenure: map[string]float64{}}
	res.Phase = r.begin(PhaseCost, map[string]string{
		"lease":   defaultTimings,
		"run":     fmt.Sprintf("%d sessions on 2 workers (both consume the work queue), dynalite in memory; counts from each worker's dynamostore Stats (GET /stats) over a steady window of %s that starts two renew intervals after the last claim", sz.CostSessions, sz.CostWindow),
		"tenure":  "acquire and failed-acquire counts over the ramp, release counts over the stop of every session, divided by the session count",
		"pricing": fmt.Sprintf("on-demand us-east-1: $%.3f per million WRU, $%.3f per million RRU; items < 1 KB; index KEYS_ONLY (~%d B per entry); %d h per month", PriceWriteMillion, PriceReadMillion, IndexEntryBytes, HoursPerMonth),
	})
	r.rep.Cost = res
	defer res.end()
	ls, err := r.startLeaseStack(ctx, "cost", 1)
	if err != nil {
		return err
	}
	defer ls.shutdown()
	var ws []*bworker
	for range res.Workers {
		w, err := ls.addWorker(ctx, true, nil)
		if err != nil {
			return err
		}
		ws = append(ws, w)
	}
	ids := make([]string, sz.CostSessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("cost-%05d", i)
	}
	if err := ls.startSessions(ctx, ids); err != nil {
		return err
	}
	got, err := ls.col.waitAll(ctx, ids, nil, 2*time.Minute)
	if err != nil {
		return err
	}
	if len(got) != len(ids) {
		return fmt.Errorf("%d of %d sessions delivering after 2 min", len(got), len(ids))
	}
	if err := sleepCtx(ctx, 2*DefaultRenewEvery); err != nil {
		return err
	}
	s0, owned0, err := sumStats(ctx, ws)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := sleepCtx(ctx, sz.CostWindow); err != nil {
		return err
	}
	s1, owned1, err := sumStats(ctx, ws)
	if err != nil {
		return err
	}
	el := time.Since(t0)
	res.WindowSec = el.Seconds()
	res.SessionHours = float64(owned0+owned1) / 2 * el.Hours()
	res.WorkerHours = float64(len(ws)) * el.Hours()
	delta := diffCounts(s1, s0)
	res.Steady = CostRows(delta, res.SessionHours)
	for _, k := range res.Steady {
		res.WRUPerSH += k.WRUPerSH
		res.IndexWRUPerSH += k.IndexWRUPerSH
		res.RRUPerSH += k.RRUPerSH
	}
	res.QueryPagesPerWorkerH = float64(delta["orphan_query_page"]) / res.WorkerHours
	res.MonthlyPer1000 = MonthlyPer1000(res.WRUPerSH, res.RRUPerSH)
	res.GSIMaxSessions = GSIMaxSessions(DefaultRenewEvery)
	res.GSIMaxSessionsMeasured = GSIMaxSessionsMeasured(res.IndexWRUPerSH)
	res.GSITableMaxSessions = res.GSIMaxSessions * schema.IndexShards
	res.ShardSpread = ShardSpread(ids)

	// Per tenure: the ramp's claims (s0), then every session's release.
	if _, err := ls.stopSessions(ctx, ids); err != nil {
		return err
	}
	if err := ls.waitOwnedZero(ctx, ws, 30*time.Second); err != nil {
		return err
	}
	s2, _, err := sumStats(ctx, ws)
	if err != nil {
		return err
	}
	n := float64(len(ids))
	for _, k := range []string{"acquire", "acquire_failed", "classify_read"} {
		res.PerTenure[k] = float64(s0[k]) / n
	}
	res.PerTenure["release"] = float64(s2["release"]-s1["release"]) / n
	for k, v := range res.PerTenure {
		u := RequestUnits[k]
		res.TenureWRU += v * (u.Base + u.Index)
	}
	res.MonthlyPer1000HourlyTn = MonthlyPer1000(res.WRUPerSH+res.TenureWRU, res.RRUPerSH+res.PerTenure["classify_read"])
	r.log.Info().Float64("wru_per_session_hour", res.WRUPerSH).Float64("usd_month_per_1000", res.MonthlyPer1000).Msg("cost")
	return nil
}

// sumStats adds up the workers' store request counts and owned sessions.
func sumStats(ctx context.Context, ws []*bworker) (map[string]int64, int, error) {
	out := map[string]int64{}
	owned := 0
	for _, w := range ws {
		st, err := getStats(ctx, w.Admin)
		if err != nil {
			return nil, 0, err
		}
		owned += st.Owned
		for k, v := range st.StoreRequests {
			out[k] += v
		}
	}
	return out, owned, nil
}

func diffCounts(b, a map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range b {
		out[k] = v - a[k]
	}
	return out
}
