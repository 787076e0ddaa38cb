package streamer

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// TestCrashBeforeTheFirstCheckpointLosesNothing: sessions with a resumable
// source and no checkpoint yet are run by worker a while the table throttles
// every checkpoint for their first seconds; a dies (kill -9) well before
// CheckpointEvery, and b takes them over. b resumes each from the checkpoint
// a wrote once the throttling ended (a session without a checkpoint does not
// yield to the throttling as the periodic checkpoints do), so the
// destination gets every seq from the first a delivered on, with repeats and
// no hole. Found by the fleet simulator (crash-throttled): the first
// checkpoints were held for a minute, the new owner dialed without from= and
// what the source sent meanwhile was lost. In a testing/synctest bubble on a
// memory store, the sessions served by the test feed over in-memory pipes.
func TestCrashBeforeTheFirstCheckpointLosesNothing(t *testing.T) {
	const sessions, rate = 5, 5.0 // messages/s per session
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		_, pn, stopFeed := pipeFeed(t, rate)
		defer stopFeed()
		st := memstore.New()
		ids := putFeedSessions(t, st, sessions)
		// The table throttles every checkpoint for the first 3 s.
		var throttled atomic.Bool
		throttled.Store(true)
		st.SetFail(func(op string) (error, bool) {
			if op == "checkpoint" && throttled.Load() {
				return fmt.Errorf("checkpoint: %w", lease.ErrThrottled), false
			}
			return nil, false
		})
		rec := &recSink{by: map[string][]delivery{}} // the destination, both workers'
		var all []*policyWorker
		defer func() {
			for _, r := range all {
				r.stop()
			}
		}()
		start := func(id string) *policyWorker { // a keeps every session until it dies
			r := startPolicyWorker(t, id, st, pn, rec, 0)
			all = append(all, r)
			return r
		}

		a := start("fa")
		time.Sleep(3 * time.Second)
		throttled.Store(false)
		time.Sleep(2 * time.Second)
		b := start("fb")
		time.Sleep(10 * time.Second)
		if ckpt := DefaultConfig().CheckpointEvery; time.Since(t0) >= ckpt {
			t.Fatalf("a dies %s in, not before CheckpointEvery (%s)", time.Since(t0), ckpt)
		}
		lastByA := map[string]int64{}
		for _, id := range ids {
			ds := rec.get(id)
			if len(ds) == 0 || ds[0].worker != "fa" {
				t.Fatalf("%s: deliveries %v before a dies, want a's", id, ds)
			}
			lastByA[id] = ds[len(ds)-1].seq
		}
		crash(a.w, a.store, a.cancel, a.done)
		a.ended = true

		ttl := DefaultConfig().LeaseTTL
		for _, id := range ids {
			for it, _ := st.Get(context.Background(), id); it.Owner != "fb"; it, _ = st.Get(context.Background(), id) {
				if time.Since(t0) > 15*time.Second+3*ttl {
					t.Fatalf("%s: owner %q %s after a died", id, it.Owner, time.Since(t0)-15*time.Second)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		time.Sleep(5 * time.Second) // b delivers for a while
		for _, id := range ids {
			ds := rec.get(id)
			first, last := ds[0].seq, maxSeq(ds)
			missing, fromB := holesAndFirstOf(ds, "fb")
			if fromB == -1 || len(missing) > 0 {
				t.Errorf("%s: a delivered %d–%d, b from %d, up to %d: %d seqs never delivered (%v)",
					id, first, lastByA[id], fromB, last, len(missing), missing)
			}
		}
		b.stop()
	})
}

// TestFencedBeforeTheFirstCheckpointLosesNothing: worker a delivers the
// first message of each of its sessions (resumable, no checkpoint yet) and
// is then cut off its table before any other write of theirs lands, as a
// starved machine whose requests all time out: its heartbeats stop, it
// fences itself, and b takes the sessions over. The destination gets every
// seq from the first a delivered on (b resumes from the anchor a wrote
// before its first delivery), with repeats and no hole. Found by
// TestRebalanceNewWorkersTakeTheirShare on a loaded machine (a gap at seq
// 2–7: the first tenure was fenced before its first checkpoint landed, and
// the next owner dialed without from=). In a testing/synctest bubble on a
// memory store, the sessions served by the test feed over in-memory pipes.
func TestFencedBeforeTheFirstCheckpointLosesNothing(t *testing.T) {
	const sessions, rate = 3, 5.0 // messages/s per session
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		_, pn, stopFeed := pipeFeed(t, rate)
		defer stopFeed()
		st := memstore.New()
		ids := putFeedSessions(t, st, sessions)
		rec := &recSink{by: map[string][]delivery{}} // the destination, both workers'
		cut := &cutAtFirst{recSink: rec, worker: "fa", sessions: sessions}
		a := startPolicyWorker(t, "fa", st, pn, cut, 0)
		defer a.stop()
		cut.arm(a.store.sever)
		for !cut.done() {
			if time.Since(t0) > time.Minute {
				t.Fatalf("a delivered the first message of %d of %d sessions in a minute", len(cut.firsts()), sessions)
			}
			time.Sleep(50 * time.Millisecond)
		}
		cutAt := time.Now()
		b := startPolicyWorker(t, "fb", st, pn, rec, 0)
		defer b.stop()

		ttl := DefaultConfig().LeaseTTL
		for _, id := range ids {
			for it, _ := st.Get(context.Background(), id); it.Owner != "fb"; it, _ = st.Get(context.Background(), id) {
				if time.Since(cutAt) > 3*ttl {
					t.Fatalf("%s: owner %q %s after a was cut off", id, it.Owner, time.Since(cutAt))
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		time.Sleep(5 * time.Second) // b delivers for a while
		for _, id := range ids {
			ds := rec.get(id)
			if len(ds) == 0 || ds[0].worker != "fa" {
				t.Fatalf("%s: deliveries %v, want a's first", id, ds)
			}
			first, last := ds[0].seq, maxSeq(ds)
			missing, fromB := holesAndFirstOf(ds, "fb")
			if fromB == -1 || len(missing) > 0 {
				t.Errorf("%s: a delivered from %d (first %d when cut off), b from %d, up to %d: %d seqs never delivered (%v)",
					id, first, cut.firsts()[id], fromB, last, len(missing), missing)
			}
		}
	})
}

// cutAtFirst is the destination of TestFencedBeforeTheFirstCheckpointLosesNothing:
// it takes every message into recSink and, once worker has delivered the
// first message of each of its sessions, cuts that worker off its table
// (armed with the cut) before acknowledging that message.
type cutAtFirst struct {
	*recSink
	worker   string
	sessions int

	mu    sync.Mutex
	cut   func()
	first map[string]int64
	fired bool
}

func (c *cutAtFirst) arm(cut func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
}

func (c *cutAtFirst) Handle(ctx context.Context, m sink.Message) error {
	if err := c.recSink.Handle(ctx, m); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.WorkerID != c.worker || c.fired {
		return nil
	}
	if c.first == nil {
		c.first = map[string]int64{}
	}
	if _, ok := c.first[m.ConnectionID]; !ok {
		c.first[m.ConnectionID] = m.Seq
	}
	if len(c.first) == c.sessions && c.cut != nil {
		c.cut()
		c.fired = true
	}
	return nil
}

func (c *cutAtFirst) done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fired
}

func (c *cutAtFirst) firsts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.first)
}

// holesAndFirstOf is what ds (one session's deliveries) never delivered
// between its first and its highest seq, and the first seq worker w
// delivered (-1: none).
func holesAndFirstOf(ds []delivery, w string) (missing []int64, fromW int64) {
	seen := seqSet(ds)
	for s := ds[0].seq; s <= maxSeq(ds); s++ {
		if !seen[s] {
			missing = append(missing, s)
		}
	}
	fromW = -1
	for _, d := range ds {
		if d.worker == w {
			return missing, d.seq
		}
	}
	return missing, fromW
}
