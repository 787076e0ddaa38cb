package lease_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// Keeper.Anchor writes a session's first checkpoint before its first
// delivery. It is the session's first checkpoint, so the next one follows
// an interval later (one write per session lifetime, as before); it
// returns only once the write landed, retrying a throttled one as the first
// checkpoint is retried (FirstCheckpointRetry, no yield); a refused one ends
// the tenure. The fake clock is stepped by the test, in a testing/synctest
// bubble so that synctest.Wait tells when Anchor waits on it.
func TestAnchorIsTheFirstCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, started("a"), started("b"), started("c"))
		k, _ := r.keeper("w1")
		cfg := k.Config()
		ha, hb, hc := r.acquire(k, "a"), r.acquire(k, "b"), r.acquire(k, "c")
		var attempts, throttle atomic.Int64
		r.store.SetFail(func(op string) (error, bool) {
			if op == "checkpoint" {
				attempts.Add(1)
				if throttle.Add(-1) >= 0 {
					return fmt.Errorf("checkpoint: %w", lease.ErrThrottled), false
				}
			}
			return nil, false
		})
		run := func(d time.Duration) {
			for end := r.clk.Now().Add(d); r.clk.Now().Before(end); {
				r.step(cfg.Tick, []*lease.Keeper{k}, nil)
				synctest.Wait()
			}
		}

		// Landed at once, then the first delivery after it: no checkpoint
		// before an interval.
		if err := k.Anchor(r.ctx, ha, 41); err != nil {
			t.Fatalf("anchor: %v", err)
		}
		if got, _ := r.store.Get(r.ctx, "a"); ha.Checkpointed() != 41 || got.LastSeq != 41 || ha.LastSeq() != 41 {
			t.Fatalf("anchored 41: checkpointed %d, stored %d, last %d", ha.Checkpointed(), got.LastSeq, ha.LastSeq())
		}
		ha.Observe(42)
		run(cfg.CheckpointEvery - time.Second)
		if n := attempts.Load(); n != 1 {
			t.Fatalf("%d checkpoint attempts within an interval of the anchor, want none after it", n-1)
		}
		run(2 * time.Second)
		if got, _ := r.store.Get(r.ctx, "a"); got.LastSeq != 42 {
			t.Fatalf("stored %d an interval after the anchor, want the periodic checkpoint of 42", got.LastSeq)
		}

		// Throttled three times: retried after 0.5, 1 and 2 s.
		attempts.Store(0)
		throttle.Store(3)
		done := make(chan error, 1)
		go func() { done <- k.Anchor(r.ctx, hb, 6) }()
		start := r.clk.Now()
		var err error
	wait:
		for {
			synctest.Wait()
			select {
			case err = <-done:
				break wait
			default:
			}
			if r.clk.Now().Sub(start) > time.Minute {
				t.Fatalf("anchor still waiting after a minute, %d attempts", attempts.Load())
			}
			r.step(cfg.Tick, []*lease.Keeper{k}, nil)
		}
		took := r.clk.Now().Sub(start)
		backoff := lease.FirstCheckpointRetry(1, cfg.RetryEvery) + lease.FirstCheckpointRetry(2, cfg.RetryEvery) + lease.FirstCheckpointRetry(3, cfg.RetryEvery)
		if err != nil || attempts.Load() != 4 || took < backoff || took > backoff+4*cfg.Tick {
			t.Fatalf("anchor: %v after %d attempts in %s, want it landed at the 4th, after %s of back-off", err, attempts.Load(), took, backoff)
		}
		if got, _ := r.store.Get(r.ctx, "b"); hb.Checkpointed() != 6 || got.LastSeq != 6 {
			t.Fatalf("anchored 6: checkpointed %d, stored %d", hb.Checkpointed(), got.LastSeq)
		}

		// Refused: the session is another worker's now.
		r.store.Update("c", func(it *lease.Item) { it.Owner, it.Epoch = "w2", it.Epoch+1 })
		if err := k.Anchor(r.ctx, hc, 7); !errors.Is(err, lease.ErrLeaseLost) || !errors.Is(hc.Err(), lease.ErrLeaseLost) {
			t.Fatalf("anchor of a tenure taken over: %v, tenure %v, want both ErrLeaseLost", err, hc.Err())
		}
	})
}
