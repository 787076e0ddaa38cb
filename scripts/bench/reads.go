// Phase reads: the liveness protocol's units per worker-hour as the fleet
// grows (Keepers on dynalite, no session).

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// readsPhase is the phase (phase.go).
var readsPhase = phase{name: PhaseReads, run: (*runner).reads, render: renderReads, goals: readsGoals}

// ReadsRun is one run of the reads phase: Workers Keepers on one table.
type ReadsRun struct {
	Workers     int     `json:"workers"`
	WindowSec   float64 `json:"window_s"`
	WorkerHours float64 `json:"worker_hours"`
	// Kinds: the window's usage by request kind, per worker-hour (the
	// session-hour fields of KindCost are not used).
	Kinds    []KindCost `json:"kinds"`
	WRUPerWH float64    `json:"wru_per_worker_hour"`
	RRUPerWH float64    `json:"rru_per_worker_hour"`
	// Heartbeats per worker-hour (3,600 at one a second: the Keepers kept up).
	HeartbeatsPerWH float64 `json:"heartbeats_per_worker_hour"`
	HeartbeatErrors int64   `json:"heartbeat_errors"`
	DeclaredDead    int64   `json:"declared_dead"`
	Passes          int64   `json:"reconcile_passes"`
}

// ReadsResult is figure 7: what finding dead workers costs as the fleet
// grows.
type ReadsResult struct {
	Phase
	Runs []ReadsRun `json:"runs"`
}

// readsObserver counts what the Keepers of a run report.
type readsObserver struct {
	hbErrors, died atomic.Int64
}

func (o *readsObserver) Heartbeat(_ time.Duration, err error) {
	if err != nil {
		o.hbErrors.Add(1)
	}
}
func (o *readsObserver) Ended(*lease.Held, error) {}
func (o *readsObserver) Mailbox([]string)         {}
func (o *readsObserver) WorkerDied(string)        { o.died.Add(1) }

func (r *runner) reads(ctx context.Context) error {
	sz := r.sz
	res := &ReadsResult{}
	res.Phase = r.begin(PhaseReads, map[string]string{
		"workers":   fmt.Sprintf("%s simulated workers per run, each a lease.Keeper (shared/lease) on its own dynamostore.Store, all in the driver's process, on one dynalite table (in memory, fresh per run); no session", joinInts(sz.ReadsWorkers, " and ")),
		"lease":     "lease.DefaultConfig: heartbeat every 1 s, TTL 10 s, 2 watchers per worker reading every 500 ms, the alive workers listed every 5 s (Keeper.Run)",
		"reconcile": "each worker also runs what its reconciler reads every pass (every 5 s ± 20 %, workers/streamer/internal/claim): Audit (by_owner of itself) and Orphans(1,000) (the 16 by_unowned shards and the GONE workers)",
		"window":    fmt.Sprintf("the Keepers register spread over 1 s, run %s (one listing and watch targets in place), then the window: %s; units from the stores' meters (Units), summed", lease.DefaultConfig("x").RefreshEvery+2*time.Second, sz.ReadsWindow),
	})
	r.rep.Reads = res
	defer res.end()
	for _, n := range sz.ReadsWorkers {
		run, err := r.readsRun(ctx, n)
		if run != nil {
			res.Runs = append(res.Runs, *run)
		}
		if err != nil {
			return fmt.Errorf("%d workers: %w", n, err)
		}
	}
	return nil
}

func (r *runner) readsRun(ctx context.Context, n int) (*ReadsRun, error) {
	dir := filepath.Join(r.cfg.WorkDir, fmt.Sprintf("reads-%d", n))
	if err := freshDir(dir); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 4*n+16, 4*n+16
	dyn, ddb, err := r.startDynalite(ctx, dir, &http.Client{Timeout: 10 * time.Second, Transport: tr})
	if err != nil {
		return nil, err
	}
	defer dyn.Stop()
	table := schema.DefaultTableName

	obs := &readsObserver{}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	stores := make([]*dynamostore.Store, n)
	var passes atomic.Int64
	for i := range n {
		cfg := lease.DefaultConfig(fmt.Sprintf("reads-%03d", i))
		st := dynamostore.New(ddb, table)
		k, err := lease.NewKeeper(st, clock.Real{}, cfg, obs, nil)
		if err != nil {
			return nil, err
		}
		if err := sleepCtx(ctx, time.Second/time.Duration(n)); err != nil {
			return nil, err
		}
		if err := k.Register(ctx); err != nil {
			return nil, err
		}
		stores[i] = st
		wg.Go(func() { _ = k.Run(rctx) })
		wg.Go(func() {
			const every, jitter = 5 * time.Second, 0.2
			for {
				d := time.Duration(float64(every) * (1 + jitter*(2*rand.Float64()-1)))
				if sleepCtx(rctx, d) != nil {
					return
				}
				passes.Add(1)
				_, _ = k.Audit(rctx, nil)
				_, _ = k.Orphans(rctx, 1000)
			}
		})
	}
	if err := sleepCtx(ctx, lease.DefaultConfig("x").RefreshEvery+2*time.Second); err != nil {
		return nil, err
	}
	sum := func() map[string]Usage {
		out := map[string]Usage{}
		for _, s := range stores {
			addUnits(out, s.Units())
		}
		return out
	}
	u0, p0, e0, d0 := sum(), passes.Load(), obs.hbErrors.Load(), obs.died.Load()
	t0 := time.Now()
	if err := sleepCtx(ctx, r.sz.ReadsWindow); err != nil {
		return nil, err
	}
	u1, p1, e1, d1 := sum(), passes.Load(), obs.hbErrors.Load(), obs.died.Load()
	el := time.Since(t0)
	run := &ReadsRun{Workers: n, WindowSec: el.Seconds(), WorkerHours: float64(n) * el.Hours(), Passes: p1 - p0, HeartbeatErrors: e1 - e0, DeclaredDead: d1 - d0}
	delta := diffUnits(u1, u0)
	split := Split(delta, 0, run.WorkerHours)
	run.Kinds = split.Kinds
	run.WRUPerWH, run.RRUPerWH = split.Total.WRUPerWH, split.Total.RRUPerWH
	run.HeartbeatsPerWH = float64(delta[dynamostore.OpHeartbeat].Writes) / run.WorkerHours
	r.log.Info().Int("workers", n).Float64("rru_per_worker_hour", run.RRUPerWH).Float64("wru_per_worker_hour", run.WRUPerWH).
		Float64("heartbeats_per_worker_hour", run.HeartbeatsPerWH).Int64("declared_dead", run.DeclaredDead).Msg("reads run")
	return run, nil
}

func joinInts(ns []int, sep string) string {
	var out []string
	for _, n := range ns {
		out = append(out, itoa(n))
	}
	return strings.Join(out, sep)
}

func renderReads(p printer, r *Report) {
	rd := r.Reads
	if !heading(p, rd, "7. Finding dead workers: units per worker-hour as the fleet grows") {
		return
	}
	if len(rd.Runs) == 0 {
		return
	}
	kinds := map[string]bool{}
	for _, run := range rd.Runs {
		for _, k := range run.Kinds {
			kinds[k.Kind] = true
		}
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		ci, cj := catRank(dynamostore.Category(ks[i])), catRank(dynamostore.Category(ks[j]))
		if ci != cj {
			return ci < cj
		}
		return ks[i] < ks[j]
	})
	// row writes a row: label, then one cell per run.
	row := func(label string, cell func(ReadsRun) string) {
		p("| %s |", label)
		for _, run := range rd.Runs {
			p(" %s |", cell(run))
		}
		p("\n")
	}
	row("per worker-hour", func(run ReadsRun) string { return fmt.Sprintf("%d workers", run.Workers) })
	p("|---|")
	for range rd.Runs {
		p("---|")
	}
	p("\n")
	for _, k := range ks {
		row(k+": write / read units", func(run ReadsRun) string {
			var kc KindCost
			for _, x := range run.Kinds {
				if x.Kind == k {
					kc = x
				}
			}
			return fmt.Sprintf("%.0f / %.0f", kc.WRUPerWH, kc.RRUPerWH)
		})
	}
	row("**total: write / read units**", func(run ReadsRun) string { return fmt.Sprintf("**%.0f / %.0f**", run.WRUPerWH, run.RRUPerWH) })
	row("heartbeats (one a second would be 3,600; the Keeper sends the next a second after the 50 ms tick that sent the last: about 3,550)", func(run ReadsRun) string { return fmt.Sprintf("%.0f", run.HeartbeatsPerWH) })
	row("heartbeat errors / workers declared dead in the window", func(run ReadsRun) string { return fmt.Sprintf("%d / %d", run.HeartbeatErrors, run.DeclaredDead) })
	row("window, worker-hours", func(run ReadsRun) string { return fmt.Sprintf("%.0f s, %.3f", run.WindowSec, run.WorkerHours) })
	p("\n")
	first, last := rd.Runs[0], rd.Runs[len(rd.Runs)-1]
	if first.RRUPerWH > 0 && last.Workers > first.Workers {
		p("From %d to %d workers the read units per worker-hour go ×%.2f (reads that grew with the square of the fleet, every worker reading every record, would go ×%d). ",
			first.Workers, last.Workers, last.RRUPerWH/first.RRUPerWH, last.Workers/first.Workers)
	}
	p("Each worker reads only the records of the 2 workers rendezvous hashing gives it (every 500 ms: 4 reads/s), and is read by about 2; the listings of alive and GONE workers are index queries whose pages grow by a few dozen bytes per worker (0.5 read unit per 4 KB), and the reconcile queries (16 by_unowned shards, its own by_owner) do not depend on the fleet. Writes per worker are its heartbeats. These are the per-worker figures section 6 divides by the sessions per worker.\n\n")
}

// readsGoals is the reads phase's goal (Goals): read units per worker-hour
// flat as the fleet grows.
func readsGoals(r *Report) []Goal {
	var gs []Goal
	if rd := r.Reads; rd != nil && len(rd.Runs) >= 2 && rd.Runs[0].RRUPerWH > 0 {
		a, b := rd.Runs[0], rd.Runs[len(rd.Runs)-1]
		ratio := b.RRUPerWH / a.RRUPerWH
		gs = append(gs, judged(fmt.Sprintf("Read units per worker-hour, %d workers ÷ %d workers (N² reads would be ×%d)", b.Workers, a.Workers, b.Workers/max(a.Workers, 1)), fmt.Sprintf("%.0f ÷ %.0f = ×%.2f", b.RRUPerWH, a.RRUPerWH, ratio), "about ×1 (< ×2)", ratio < 2,
			fmt.Sprintf("×%.2f", ratio)))
	}
	return gs
}
