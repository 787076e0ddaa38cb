// The worker's side of its liveness: registration, the load its heartbeats
// report, and what the Keeper tells it (observer).

package streamer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// observer hears the keeper: heartbeat latencies, tenures that end (whose
// session must close at once), the mailbox, and the workers it declared dead.
type observer struct{ w *Worker }

func (o observer) Heartbeat(latency time.Duration, err error) {
	o.w.stats.heartbeat(latency, err)
	if err == nil {
		o.w.reg.ObserveDuration(schema.MetricHeartbeatLatencyMs, latency)
		if o.w.hbFailing.CompareAndSwap(true, false) {
			o.w.log.Info().Msg("heartbeat succeeded again")
		}
		if o.w.leftFenced.CompareAndSwap(true, false) {
			// Trusted again: the sessions left while fenced are still this
			// worker's in the table, and nobody else may take them while
			// it heartbeats. An audit claims them back now, on its own
			// goroutine: the reconciler's pass may still be in a call
			// made while the table did not answer.
			o.w.ph.tasks.Go(func() { _ = o.w.audit(o.w.hardCtx, nil) })
		}
		return
	}
	if o.w.hbFailing.CompareAndSwap(false, true) {
		o.w.log.Warn().Err(err).Msg("heartbeat failing (sessions are fenced at the trust deadline unless one succeeds)")
	}
}

func (o observer) Ended(h *lease.Held, err error) {
	if !errors.Is(err, lease.ErrStopped) {
		o.w.reg.Add(schema.MetricLeaseLost, 1)
		o.w.stats.leaseLost.Add(1)
	}
	o.w.mu.Lock()
	s := o.w.sessions[h.ID()]
	o.w.mu.Unlock()
	if s != nil && s.Held() == h {
		if err == nil {
			err = lease.ErrReleased
		}
		s.Interrupt(err)
	}
}

func (o observer) Mailbox(entries []string) {
	for _, e := range entries {
		o.w.ph.tasks.Go(func() { o.w.reread(o.w.hardCtx, e) })
	}
}

func (o observer) WorkerDied(id string) {
	o.w.reg.Add(schema.MetricWorkersDeclaredDead, 1)
	o.w.log.Warn().Str("dead_worker_id", id).Msg("worker declared dead: taking its sessions over")
	o.w.ph.tasks.Go(func() { o.w.takeover(o.w.hardCtx, id) })
}

// register creates the worker record, retrying while the table is
// unreachable, until ctx ends.
func (w *Worker) register(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := w.keeper.Register(ctx)
		if err == nil {
			return nil
		}
		if errors.Is(err, lease.ErrWorkerExists) {
			// Not our own earlier attempt (that one carries this process's
			// boot id and counts as registered): another process has or
			// had this id, and its record stays for a day after it ended.
			return fmt.Errorf("worker id %s is already registered by another process (a different boot id): %s must be unique to each process and never reused: %w",
				w.cfg.WorkerID, schema.EnvWorkerID, err)
		}
		if ctx.Err() != nil {
			return err
		}
		if attempt == 0 {
			w.log.Warn().Err(err).Msg("register the worker record (retrying)")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("register: %w", ctx.Err())
		case <-w.deps.Clock.After(time.Second):
		}
	}
}

// report is what each heartbeat carries: load, capacity, admin address,
// whether the worker drains, its rebalancing moves over the last minute.
func (w *Worker) report() lease.Load {
	w.mu.Lock()
	draining := w.state != stateRunning
	w.mu.Unlock()
	adv := ""
	if p := w.advertiseAddr.Load(); p != nil {
		adv = *p
	}
	// Standbys are not load: rebalancing balances the sessions owned (a
	// standby's placement spreads them by rendezvous hashing), though each
	// takes one of MaxSessions' slots (Free).
	return lease.Load{Sessions: w.owned(), Capacity: w.cfg.MaxSessions, AdminAddr: adv, Draining: draining,
		MovesPerMin: w.rebal.movesPerMin(w.deps.Clock.Now())}
}
