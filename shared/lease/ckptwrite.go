// The scan's periodic checkpoint writes: the checkpoints one scan found
// due, written under one deadline by a few goroutines instead of a
// goroutine and a deadline each.

package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// ckptWrite is one due checkpoint of a scan: h's seq.
type ckptWrite struct {
	h   *Held
	seq int64
}

// ckptWritesEach is how many of a scan's checkpoints one goroutine writes,
// one after the other: a scan starts a goroutine per ckptWritesEach due
// (up to MaxConcurrentWrites), so that a store's latency delays a
// checkpoint by at most a few writes (4 × 50 ms of DynamoDB latency stay
// within a scan), while the in-memory store's writes, which take no time,
// share one goroutine and one deadline per scan instead of a goroutine, a
// context and a timer each (about 300 B of garbage per checkpoint:
// TestCheckpointRoundAllocatesPerScan).
const ckptWritesEach = 4

// writeCheckpoints writes batch, the checkpoints one scan found due (each
// marked in flight by checkpointDue), and waits for them. They share one
// deadline, RPCTimeout from the start, and each write still gets most of
// an RPCTimeout: one whose turn comes later than checkpointLate after the
// start (the writes before it were slow, or MaxConcurrentWrites were in
// flight) is not sent, and its tenure goes to the next scan, which gives
// it a deadline of its own, where it would have waited for its turn
// before.
func (k *Keeper) writeCheckpoints(ctx context.Context, batch []ckptWrite) {
	wctx, cancel := context.WithTimeout(ctx, k.cfg.RPCTimeout)
	defer cancel()
	late := k.clk.Now().Add(k.checkpointLate())
	var next atomic.Int64
	write := func() {
		for {
			i := next.Add(1) - 1
			if i >= int64(len(batch)) {
				return
			}
			k.writeCheckpoint(ctx, wctx, late, batch[i])
		}
	}
	writers := min((len(batch)+ckptWritesEach-1)/ckptWritesEach, k.cfg.MaxConcurrentWrites)
	for range writers - 1 {
		k.wg.Go(write)
	}
	write()
}

// checkpointLate is how long after its scan's start a checkpoint may still
// be sent under the scan's deadline: a scan, so that it has RPCTimeout −
// 250 ms of it at the defaults, and half the deadline when RPCTimeout is
// shorter than two scans.
func (k *Keeper) checkpointLate() time.Duration {
	return min(checkpointScanEvery, k.cfg.RPCTimeout/2)
}

// errCheckpointDeferred is the outcome of a checkpoint not sent: its turn
// came late (writeCheckpoints), the next scan sends it.
var errCheckpointDeferred = errors.New("checkpoint deferred to the next scan")

// writeCheckpoint writes c under wctx, the deadline of its scan's writes,
// unless its turn comes after late, within MaxConcurrentWrites, and
// records the outcome: the next checkpoint's time, a throttled store's
// yield, the end of a tenure the store refused for good.
func (k *Keeper) writeCheckpoint(ctx, wctx context.Context, late time.Time, c ckptWrite) {
	h, seq := c.h, c.seq
	select {
	case k.sem <- struct{}{}:
	case <-wctx.Done():
		if err := ctx.Err(); err != nil {
			h.checkpointDone(seq, err, k.clk.Now())
			return
		}
		k.deferCheckpoint(h, seq)
		return
	}
	if k.clk.Now().After(late) {
		<-k.sem
		k.deferCheckpoint(h, seq)
		return
	}
	err := k.checkpointUnder(wctx, h, seq)
	<-k.sem
	next := k.clk.Now().Add(h.every)
	switch {
	case errors.Is(err, ErrThrottled):
		next = k.checkpointThrottled(k.clk.Now())
		if n := h.throttledFirst(); n > 0 {
			next = k.clk.Now().Add(FirstCheckpointRetry(n, k.cfg.RetryEvery))
		}
	case err != nil && IsTransient(err):
		next = k.clk.Now().Add(k.cfg.RetryEvery)
	case err == nil:
		k.checkpointSucceeded()
	}
	h.checkpointDone(seq, err, next)
	if err != nil && Definitive(err) && h.end(err) {
		k.forget(h)
		k.obs.Ended(h, err)
		return
	}
	k.queue(h, next)
}

// deferCheckpoint hands h's checkpoint of seq, not sent, to the next scan.
func (k *Keeper) deferCheckpoint(h *Held, seq int64) {
	now := k.clk.Now()
	h.checkpointDone(seq, errCheckpointDeferred, now)
	k.queue(h, now)
}
