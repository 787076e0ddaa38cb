package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// ClaimResult is figure 1: POST /sessions → first message at the sink.
type ClaimResult struct {
	Phase
	Workers  int     `json:"workers"`
	FeedRate float64 `json:"feed_rate"`
	Warmup   int     `json:"warmup_excluded"`
	// SQS: the start notification path; SQSPost is the POST's own round
	// trip (the item write and the notification send) within it.
	SQS         Dist `json:"sqs"`
	SQSPost     Dist `json:"sqs_post"`
	SQSTimeouts int  `json:"sqs_timeouts"`
	// Reconcile: the workers consume no queue; a new item is found by the
	// next reconcile pass of either worker.
	Reconcile         Dist `json:"reconcile"`
	ReconcileTimeouts int  `json:"reconcile_timeouts"`
}

func (r *runner) claim(ctx context.Context) error {
	sz := r.sz
	res := &ClaimResult{Workers: 2, FeedRate: sz.ClaimFeedRate, Warmup: sz.ClaimWarmup}
	res.Phase = r.begin(PhaseClaim, map[string]string{
		"workers": "2 (both consume the work queue for the SQS path; two others consume nothing for the reconcile path)",
		"lease":   defaultTimings,
		"feed":    fmt.Sprintf("%g msg/s per session: the first message is produced %s after the connection opens (included)", sz.ClaimFeedRate, time.Duration(float64(time.Second)/sz.ClaimFeedRate)),
		"samples": fmt.Sprintf("%d per path, sequential on the SQS path (each session stopped after its first message), starts %s apart on average on the reconcile path; %d warm-up samples excluded", sz.ClaimSamples, sz.ReconcileSpacing, sz.ClaimWarmup),
		"clock":   "driver-side monotonic clock: from just before the POST to the driver reading the sink line from the worker's stdout",
	})
	r.rep.Claim = res
	defer res.end()
	ls, err := r.startLeaseStack(ctx, "claim", sz.ClaimFeedRate)
	if err != nil {
		return err
	}
	defer ls.shutdown()

	// The SQS path.
	var ws []*bworker
	for range 2 {
		w, err := ls.addWorker(ctx, true, nil)
		if err != nil {
			return err
		}
		ws = append(ws, w)
	}
	var lat, post []time.Duration
	for i := range sz.ClaimWarmup + sz.ClaimSamples {
		id := fmt.Sprintf("clm-sqs-%04d", i)
		t0 := time.Now()
		if _, err := ls.st.StartSession(ctx, id); err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
		tPost := time.Since(t0)
		got, err := ls.col.waitAll(ctx, []string{id}, nil, 10*time.Second)
		if err != nil {
			return err
		}
		if _, err := ls.st.API.Stop(ctx, id); err != nil {
			return fmt.Errorf("stop %s: %w", id, err)
		}
		if i < sz.ClaimWarmup {
			continue
		}
		o, ok := got[id]
		if !ok {
			res.SQSTimeouts++
			continue
		}
		lat = append(lat, o.At.Sub(t0))
		post = append(post, tPost)
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	res.SQS, res.SQSPost = Summarize(lat), Summarize(post)
	r.log.Info().Float64("p50_ms", res.SQS.P50).Float64("p99_ms", res.SQS.P99).Msg("claim latency via SQS")
	if err := stopWorkers(ws); err != nil {
		return err
	}

	// The reconciliation path: two workers without a queue consumer.
	for range 2 {
		if _, err := ls.addWorker(ctx, false, nil); err != nil {
			return err
		}
	}
	var mu sync.Mutex
	var rec []time.Duration
	g, gctx := errgroup.WithContext(ctx)
	for i := range sz.ClaimWarmup + sz.ClaimSamples {
		// Uniform gaps around the mean: the start instants are unrelated
		// to the workers' pass schedule.
		gap := time.Duration(float64(sz.ReconcileSpacing) * (0.5 + rand.Float64()))
		if err := sleepCtx(gctx, gap); err != nil {
			break
		}
		g.Go(func() error {
			id := fmt.Sprintf("clm-rec-%04d", i)
			t0 := time.Now()
			if _, err := ls.st.StartSession(gctx, id); err != nil {
				return fmt.Errorf("start %s: %w", id, err)
			}
			got, err := ls.col.waitAll(gctx, []string{id}, nil, 30*time.Second)
			if err != nil {
				return err
			}
			if _, err := ls.st.API.Stop(gctx, id); err != nil {
				return fmt.Errorf("stop %s: %w", id, err)
			}
			if i < sz.ClaimWarmup {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			if o, ok := got[id]; ok {
				rec = append(rec, o.At.Sub(t0))
			} else {
				res.ReconcileTimeouts++
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	res.Reconcile = Summarize(rec)
	r.log.Info().Float64("p50_ms", res.Reconcile.P50).Float64("p99_ms", res.Reconcile.P99).Msg("claim latency via reconciliation")
	return nil
}

// defaultTimings are the worker defaults every lease phase runs with.
const defaultTimings = "defaults: liveness TTL 10 s, heartbeat every 1 s (watchers read every 500 ms), checkpoints every 60 s when advanced, safety margin 2 s, reconcile every 5 s ± 20 %, 50 claims/s per worker, long poll 20 s"

// Default lease timings (lease.DefaultConfig, streamer.DefaultConfig).
const (
	DefaultHeartbeatEvery  = time.Second
	DefaultCheckpointEvery = time.Minute
	DefaultTTL             = 10 * time.Second
	// DefaultRenewEvery is what a steady phase waits for the per-session
	// writes to reach their rate: since issue 13 one heartbeat (1 s), so
	// 2 × it is short; the cost phase waits a checkpoint interval instead.
	DefaultRenewEvery = DefaultHeartbeatEvery
	DefaultReconcile  = 5 * time.Second
	DefaultClaimRate  = 50
	// DefaultShutdownDeadline and DefaultShutdownInFlight: the graceful
	// shutdown's bound and how many sessions it hands off at once.
	DefaultShutdownDeadline = 30 * time.Second
	DefaultShutdownInFlight = 4
)
