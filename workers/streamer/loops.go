// The control and metrics loops.

package streamer

import (
	"context"
	"slices"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
	"github.com/wsfleet/wsfleet/shared/metrics"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/session"
)

// opened is the sessions' open hook: the claim latency of notified claims.
func (w *Worker) opened(s *session.Session, first bool) {
	if first && s.ClaimedAtMs() > 0 {
		w.reg.Observe(schema.MetricClaimLatencyMs, float64(w.deps.Clock.Now().UnixMilli()-s.ClaimedAtMs()), metrics.Milliseconds)
	}
}

// controlLoop runs every due session's Tick each controlTick. A session
// says when it next has something to do (session.NextDue): most, with
// traffic and no timers of their own, need a Tick once per
// session.TickCeiling, not every pass. The loop keeps its own list of the
// sessions, made anew only when one came or went, and their due times in
// a compact array beside it, read again from the sessions only after a
// poke (session.Schedule): a pass touches only the sessions that are due.
func (w *Worker) controlLoop(ctx context.Context) {
	// A ticker on the worker's clock (tick). The tick's reading is the base
	// clock's (an Offset clock shifts Now, not its timers): the time the
	// sessions read.
	t := newTick(w.deps.Clock, controlTick)
	defer t.Stop()
	var ss []*session.Session
	var dues []int64
	seen := ^uint64(0)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C():
			t.next()
			full := w.env.Schedule.Poked()
			w.mu.Lock()
			if w.sessionsGen != seen {
				seen, full = w.sessionsGen, true
				clear(ss)
				ss = ss[:0]
				for _, s := range w.sessions {
					ss = append(ss, s)
				}
				dues = slices.Grow(dues[:0], len(ss))[:len(ss)]
			}
			w.mu.Unlock()
			at := now.UnixNano()
			for i, s := range ss {
				if full {
					dues[i] = s.NextDue()
				}
				if at >= dues[i] {
					s.Tick(now)
					dues[i] = s.NextDue()
				}
			}
		}
	}
}

func (w *Worker) metricsLoop(ctx context.Context) {
	t := newTick(w.deps.Clock, w.cfg.MetricsEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.next()
			w.flushMetrics()
		}
	}
}

func (w *Worker) flushMetrics() {
	w.stats.mu.Lock()
	for name, c := range w.flushedCounters() {
		v := c.Swap(0)
		w.stats.flushedLocked(name, v)
		w.reg.Add(name, float64(v))
	}
	w.stats.mu.Unlock()
	owned := w.owned()
	w.reg.Set(schema.MetricOwnedSessions, float64(owned))
	w.reg.Set(schema.MetricFreeCapacity, float64(w.cfg.MaxSessions-owned))
	w.reg.Set(schema.MetricCapacityUtilization, 100*float64(owned)/float64(w.cfg.MaxSessions))
	w.reg.Set(schema.MetricAliveWorkers, float64(w.keeper.AliveWorkers()))
	standbys, windowBytes := w.standbyTotals()
	w.reg.Set(schema.MetricStandbys, float64(standbys))
	w.reg.Set(schema.MetricStandbyBytes, float64(windowBytes))
	if _, err := w.reg.Flush(w.deps.Metrics, w.deps.Clock.Now()); err != nil {
		w.log.Warn().Err(err).Msg("metrics flush")
	}
}

func (w *Worker) owned() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.sessions)
}

// tick is a time.Ticker on a clock.Clock (which has timers only): it fires
// every period on the cadence of its start, and a tick taken late skips
// the ticks it missed, as a Ticker drops them.
type tick struct {
	clock.Timer
	clk    clock.Clock
	period time.Duration
	at     time.Time // the pending tick, on clk
}

func newTick(clk clock.Clock, period time.Duration) *tick {
	return &tick{Timer: clk.NewTimer(period), clk: clk, period: period, at: clk.Now().Add(period)}
}

// next arms the tick after the one just received.
func (t *tick) next() {
	now := t.clk.Now()
	t.at = t.at.Add(t.period)
	if !t.at.After(now) {
		t.at = now.Add(t.period - now.Sub(t.at)%t.period)
	}
	t.Reset(t.at.Sub(now))
}
