// Phase dynalite: one worker on dynalite, stepped up until dynalite is the
// bottleneck.

package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/shared/spec"
)

// dynalitePhase is the phase (phase.go).
var dynalitePhase = phase{name: PhaseDynalite, run: (*runner).dynalite, render: renderDynalite}

// DynStep is one step of the dynalite capacity run.
type DynStep struct {
	Target       int     `json:"target"`
	Held         int     `json:"held"`
	RampSec      float64 `json:"ramp_s"`
	RenewsPerSec float64 `json:"renews_per_s"`
	NeededPerSec float64 `json:"needed_renews_per_s"` // 1 heartbeat/s
	// CheckpointsPerSec: checkpoint requests in the window.
	CheckpointsPerSec float64 `json:"checkpoints_per_s"`
	RenewErrors       int64   `json:"renew_errors"`
	LeaseLost         int64   `json:"lease_lost"`
	RenewP50Ms        int64   `json:"renew_p50_le_ms"` // bucket upper bound; -1 = above 2 s
	RenewP99Ms        int64   `json:"renew_p99_le_ms"`
	WorkerCPU         float64 `json:"worker_cpu_pct"`
	DynaliteCPU       float64 `json:"dynalite_cpu_pct"`
	FeedCPU           float64 `json:"feed_cpu_pct"`
	MachineCPU        float64 `json:"machine_cpu_pct"` // every process, % of one core
	MsgRate           float64 `json:"msg_per_s"`
	CPUPer1k          float64 `json:"worker_cpu_pct_per_1000_msg_s"`
	RSSPerSessKB      float64 `json:"rss_kib_per_session"`
	Verdict           string  `json:"verdict"`
	LoadEnd           LoadAvg `json:"load_end"`
}

// DynaliteResult is figure 4 with dynalite as the lease store.
type DynaliteResult struct {
	Phase
	Steps      []DynStep `json:"steps"`
	MaxHealthy int       `json:"max_healthy_sessions"`
	Bottleneck string    `json:"bottleneck"`
}

// Verdicts of a step.
const (
	VerdictOK        = "ok"
	VerdictSaturated = "dynalite saturated (heartbeats and checkpoints still on time)"
)

// judgeStep says whether a step kept every lease healthy, and if not why.
func judgeStep(s DynStep) string {
	var why []string
	if s.Held < s.Target {
		why = append(why, fmt.Sprintf("holds %d of %d", s.Held, s.Target))
	}
	if s.LeaseLost > 0 {
		why = append(why, fmt.Sprintf("%d lease(s) lost", s.LeaseLost))
	}
	if s.RenewErrors > 0 {
		why = append(why, fmt.Sprintf("%d heartbeat error(s)", s.RenewErrors))
	}
	if s.NeededPerSec > 0 && s.RenewsPerSec < 0.95*s.NeededPerSec {
		why = append(why, fmt.Sprintf("writes behind (%.0f/s of %.0f/s)", s.RenewsPerSec, s.NeededPerSec))
	}
	if s.RenewP99Ms < 0 || s.RenewP99Ms > 1000 {
		why = append(why, "heartbeat p99 above 1 s")
	}
	if len(why) > 0 {
		return strings.Join(why, "; ")
	}
	if s.DynaliteCPU >= 90 {
		return VerdictSaturated
	}
	return VerdictOK
}

// bottleneckOf names what limited an unhealthy step: dynalite at a full
// core, the machine (every core busy), or neither.
func bottleneckOf(s DynStep, cores int) string {
	switch {
	case s.DynaliteCPU >= 75:
		return fmt.Sprintf("dynalite: one Node process at %.0f %% of its one core, whose queue delays heartbeats (heartbeat p99 %s) toward the trust deadline (machine %.0f %% of %d %%)", s.DynaliteCPU, bucket(s.RenewP99Ms), s.MachineCPU, 100*cores)
	case s.MachineCPU >= 90*float64(cores):
		return fmt.Sprintf("the machine (all %d cores %.0f %% busy: worker %.0f %%, dynalite %.0f %%, feed %.0f %%)", cores, s.MachineCPU/float64(cores), s.WorkerCPU, s.DynaliteCPU, s.FeedCPU)
	default:
		return fmt.Sprintf("neither dynalite's core nor the machine (dynalite %.0f %%, machine %.0f %% of %d %%)", s.DynaliteCPU, s.MachineCPU, 100*cores)
	}
}

func (r *runner) dynalite(ctx context.Context) error {
	sz := r.sz
	res := &DynaliteResult{}
	var steps []string
	for _, n := range sz.DynSteps {
		steps = append(steps, itoa(n))
	}
	res.Phase = r.begin(PhaseDynalite, map[string]string{
		"worker": "bin/streamer with the DynamoDB store on dynalite (in memory, same machine), no work queue (claims by reconciliation every 1 s, 500 claims/s), lease timings at their defaults (heartbeat every 1 s, checkpoints every 60 s when advanced), " + EnvMaxRenews + "=" + DynMaxRenews + " (more checkpoints in flight than the default 64, so that as dynalite slows down the engine saturates before 64 ÷ its latency does), sink stdout → /dev/null",
		"feed":   "as the memory runs: bin/feed on 4 loopback addresses, 1 msg/s per session",
		"steps":  strings.Join(steps, ", ") + " sessions (seeded with BatchWriteItem as ingest writes them: STARTED, no owner, in the by_unowned index); stop at the first step that is not healthy",
		"window": fmt.Sprintf("settle %s, then measure %s: heartbeats and checkpoints from the worker's /stats, CPU of the worker, dynalite (node) and the feed from /proc", sz.DynSettle, sz.DynWindow),
		"health": "a step is healthy when it holds every session, loses no tenure, has no heartbeat error, heartbeats at ≥ 95 % of once a second and its heartbeat p99 is ≤ 1 s (checkpoints start a minute after each claim, mostly after the window: they are reported, not judged)",
	})
	r.rep.Dynalite = res
	defer res.end()
	e := &capEnv{dir: filepath.Join(r.cfg.WorkDir, "dynalite")}
	if err := freshDir(e.dir); err != nil {
		return err
	}
	dyn, ddb, err := r.startDynalite(ctx, e.dir, &http.Client{Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer dyn.Stop()
	defer e.stop(func(err error) { r.log.Warn().Err(err).Msg("dynalite run: stop") })
	dynPid := dyn.Pid() // node itself (argv[0]), not a wrapper
	table := schema.DefaultTableName
	if err := r.startFeed(ctx, e, 1); err != nil {
		return err
	}
	maxN := sz.DynSteps[len(sz.DynSteps)-1]
	engine := []string{"AWS_ENDPOINT_URL_DYNAMODB=" + dyn.Endpoint(), "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_EC2_METADATA_DISABLED=true"}
	if err := r.startCapWorker(ctx, e, "dynalite-worker", []string{r.cfg.Bin.Streamer}, map[string]string{
		schema.EnvTableName: table, schema.EnvMaxSessions: itoa(maxN + 100), schema.EnvClaimsPerSecond: "500", EnvMaxRenews: DynMaxRenews,
	}, engine); err != nil {
		return err
	}
	urls := e.feedURLs()
	seeded := 0
	for _, target := range sz.DynSteps {
		start := time.Now()
		if err := seedSessions(ctx, ddb, table, seeded, target, urls, true); err != nil {
			return err
		}
		seeded = target
		step := DynStep{Target: target}
		if err := waitHeld(ctx, e, target, 1, time.Minute+time.Duration(target/200)*time.Second); err != nil {
			r.log.Warn().Err(err).Int("target", target).Msg("dynalite step: not every session claimed")
		}
		step.RampSec = time.Since(start).Seconds()
		if err := sleepCtx(ctx, sz.DynSettle); err != nil {
			return err
		}
		w, err := measureWindow(ctx, e, dynPid, sz.DynWindow)
		if err != nil {
			return err
		}
		var cr CapRunResult
		fillCapResult(&cr, w, 1)
		step.Held, step.MsgRate, step.WorkerCPU, step.FeedCPU, step.CPUPer1k, step.RSSPerSessKB = cr.Held, cr.MsgRate, cr.CPUPct, cr.FeedCPUPct, cr.CPUPer1k, cr.RSSPerSessKB
		step.DynaliteCPU, step.MachineCPU = w.otherCPU, w.machineCPU
		// Since issue 13 a held session writes nothing but its checkpoints
		// (every 60 s when advanced, the first a minute after its claim:
		// after these short windows) and the worker heartbeats once a
		// second: the step is judged on the heartbeats; the checkpoints
		// written in the window are reported beside them.
		step.RenewsPerSec = float64(w.s1.HeartbeatsOK-w.s0.HeartbeatsOK) / w.seconds
		step.NeededPerSec = 1 / DefaultHeartbeatEvery.Seconds()
		step.CheckpointsPerSec = float64(w.s1.StoreRequests["checkpoint"]-w.s0.StoreRequests["checkpoint"]) / w.seconds
		step.RenewErrors = w.s1.HeartbeatErrors - w.s0.HeartbeatErrors
		step.LeaseLost = w.s1.LeaseLost - w.s0.LeaseLost
		hist := subCounts(w.s1.HeartbeatLatency, w.s0.HeartbeatLatency)
		step.RenewP50Ms, _ = BucketPercentile(w.s1.HeartbeatBucketsMs, hist, 50)
		step.RenewP99Ms, _ = BucketPercentile(w.s1.HeartbeatBucketsMs, hist, 99)
		step.Verdict = judgeStep(step)
		step.LoadEnd = ReadLoad()
		res.Steps = append(res.Steps, step)
		r.log.Info().Int("target", target).Int("held", step.Held).Float64("renews_s", step.RenewsPerSec).Float64("needed_s", step.NeededPerSec).
			Float64("dynalite_cpu", step.DynaliteCPU).Int64("renew_p99_le_ms", step.RenewP99Ms).Str("verdict", step.Verdict).Msg("dynalite step")
		if step.Verdict != VerdictOK {
			if res.Bottleneck == "" {
				res.Bottleneck = fmt.Sprintf("at %d sessions: %s; limited by %s", target, step.Verdict, bottleneckOf(step, runtime.NumCPU()))
			}
			if step.Verdict != VerdictSaturated {
				break
			}
			continue
		}
		res.MaxHealthy = step.Held
	}
	if res.Bottleneck == "" {
		res.Bottleneck = fmt.Sprintf("none up to %d sessions", res.MaxHealthy)
	}
	return nil
}

// seedSessions writes sessions from..to-1 as ingest would (STARTED, never
// leased; the spec item, then the session naming it), 12 sessions (24
// items) per BatchWriteItem, 4 batches at a time; each spec has the feed's
// seq, and resumes with the feed's from query parameter when resumable.
func seedSessions(ctx context.Context, ddb *dynamodb.Client, table string, from, to int, urls []string, resumable bool) error {
	var resume *spec.Resume
	if resumable {
		resume = &spec.Resume{QueryParam: "from"}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for lo := from; lo < to; lo += 12 {
		hi := min(lo+12, to)
		g.Go(func() error {
			var reqs []types.WriteRequest
			for n := lo; n < hi; n++ {
				id := fmt.Sprintf("dyn-%06d", n)
				gen := int64(1)
				stored, err := spec.Spec{WSURL: strings.ReplaceAll(urls[n%len(urls)], "{id}", id), Resume: resume}.Stored()
				if err != nil {
					return err
				}
				ref := sessionitem.SpecRef(gen, stored)
				sp, err := sessionitem.EncodeSpec(id, ref, stored)
				if err != nil {
					return err
				}
				item, err := sessionitem.Encode(sessionitem.Item{
					ConnectionID: id, DesiredState: schema.StateStarted, IndexShard: schema.IndexShardFor(schema.StateStarted, id),
					SpecRef: ref, Generation: &gen,
					UnownedShard: schema.UnownedShardOf(id), // new and unowned: the reconcilers find it through by_unowned
					CreatedAtMs:  time.Now().UnixMilli(), UpdatedAtMs: time.Now().UnixMilli(),
				})
				if err != nil {
					return err
				}
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: sp}}, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
			}
			for attempt := 0; len(reqs) > 0; attempt++ {
				out, err := ddb.BatchWriteItem(gctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
				if err != nil {
					return fmt.Errorf("seed sessions: %w", err)
				}
				reqs = out.UnprocessedItems[table]
				if attempt > 20 {
					return fmt.Errorf("seed sessions: %d items unprocessed after 20 attempts", len(reqs))
				}
			}
			return nil
		})
	}
	return g.Wait()
}

func renderDynalite(p printer, r *Report) {
	d := r.Dynalite
	if !heading(p, d, "5b. One worker's capacity with dynalite as the lease store") {
		return
	}
	// The memory store's CPU per session at 1 msg/s, to tell the store's
	// share of the worker's CPU apart.
	var memPerSess float64
	if r.Capacity != nil {
		// The dynalite steps' feed is plain ws: the memory store's run on ws.
		for _, run := range r.Capacity.Runs {
			if run.Rate == 1 && run.Held > 0 && len(run.Env) == 0 && (run.Transport == "" || run.Transport == "ws" || memPerSess == 0) {
				memPerSess = run.CPUPct / float64(run.Held)
			}
		}
	}
	p("| sessions | held | heartbeats/s (needed) | checkpoints/s | heartbeat p50 / p99 | heartbeat errors | tenures lost | dynalite CPU | worker CPU | worker CPU above the memory store's for as many sessions | RSS per session | feed CPU | machine CPU (of %d %%) | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", 100*r.Machine.Cores)
	for _, s := range d.Steps {
		store := "—"
		if memPerSess > 0 {
			store = fmt.Sprintf("%.1f %%", s.WorkerCPU-memPerSess*float64(s.Held))
		}
		p("| %s | %s | %.2f (%.0f) | %.1f | %s / %s | %d | %d | %.0f %% | %.0f %% | %s | %.1f KiB | %.0f %% | %.0f %% | %s |\n",
			thousands(s.Target), thousands(s.Held), s.RenewsPerSec, s.NeededPerSec, s.CheckpointsPerSec, bucket(s.RenewP50Ms), bucket(s.RenewP99Ms), s.RenewErrors, s.LeaseLost,
			s.DynaliteCPU, s.WorkerCPU, store, s.RSSPerSessKB, s.FeedCPU, s.MachineCPU, s.Verdict)
	}
	if memPerSess > 0 {
		p("\nThe worker's CPU above what the memory store run used per session (%.4f %% of a core per session at 1 msg/s) is the DynamoDB client's: signing, HTTP and JSON for every heartbeat, checkpoint and reconcile query.\n", memPerSess)
	}
	p("\nHeartbeat latencies are histogram buckets (≤ 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000 ms) kept by the worker. Bottleneck: %s. Largest healthy step: %s sessions. ", d.Bottleneck, thousands(d.MaxHealthy))
	p("Since issue 13 a held session costs dynalite one checkpoint a minute (when it advanced) and the worker one heartbeat a second, so N sessions need 1 + N/60 writes/s, plus the reconcile queries every pass; a probe measured dynalite at ~2,200–3,800 UpdateItems/s from 16 goroutines on an idle machine (docs/references.md). In AWS the table's partitions scale out; the table ceiling of section 6 applies instead.\n\n")
}
