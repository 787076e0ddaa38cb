package batch

// The loop: which entries go next, when, and within whose trust.

import (
	"context"
	"sync"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// request is one request's wire records and the deadline it runs under.
type request struct {
	packs    []*pack
	deadline time.Time
}

// Run dispatches batches until ctx ends, then waits for the requests in
// flight (cancelled with ctx) and returns. Messages still queued then are
// not acknowledged: their sessions' checkpoints stay before them.
func (b *Batcher) Run(ctx context.Context) {
	sendCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		b.mu.Lock()
		var reqs []request
		for b.inflight < b.cfg.MaxInFlight {
			batch := b.nextLocked(now)
			if batch == nil {
				break
			}
			b.inflight++
			// Every tenure in it had at least RequestTimeout of trust
			// left at now (nextLocked).
			reqs = append(reqs, request{packs: batch, deadline: now.Add(b.cfg.RequestTimeout)})
		}
		wait := b.nextWakeLocked(now)
		b.mu.Unlock()
		for _, r := range reqs {
			wg.Go(func() { b.send(sendCtx, r) })
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if wait > 0 {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-b.kick:
		case <-timer.C:
		}
	}
}

// sendable reports whether st may add entries to a request now.
func (b *Batcher) sendable(st *stream, now time.Time) bool {
	return len(st.queue) > 0 && !st.queue[0].notBefore.After(now) && (!b.snd.Ordered() || st.inflight == 0)
}

// trustPoll is how often entries held for trust look again (a heartbeat may
// have extended it).
const trustPoll = 20 * time.Millisecond

// admitLocked decides whether st's head tenure may send now: false after it
// dropped the tenure (no trust left; look at st again) or held st back (too
// little trust left for a request's timeout).
func (b *Batcher) admitLocked(st *stream, now time.Time) (ok, dropped bool) {
	rem := st.queue[0].t.Remaining()
	switch {
	case rem <= 0:
		b.endTenureLocked(st, st.queue[0].t)
		return false, true
	case rem < b.cfg.RequestTimeout:
		b.heldForTrust.Add(1)
		st.queue[0].notBefore = now.Add(min(rem, trustPoll))
		return false, false
	}
	return true, false
}

// countQueuedLocked counts e into (sign 1) or out of (sign -1) the queued
// entries.
func (b *Batcher) countQueuedLocked(e *entry, sign int) {
	b.queued += sign
	b.queuedBytes += sign * e.size
	b.countGroupLocked(e, sign)
}

// fullLocked reports whether the queued entries fill a request: its bytes,
// or its count of wire records (with packing, of the packs they would
// make: queued messages of one group wait to share a pack).
func (b *Batcher) fullLocked() bool {
	if b.packer != nil {
		return b.queuedBytes >= b.cfg.MaxBytes || b.queuedPacks >= b.cfg.MaxCount
	}
	return b.queuedBytes >= b.cfg.MaxBytes || b.queued >= b.cfg.MaxCount
}

// nextLocked takes the next request's wire records when a request is due:
// full (fullLocked), its oldest entry waited MaxDelay, or a flush waits.
// Packing groups what is queued (it waits for nothing more): an entry joins
// the open pack of its group, which another session may have begun, else
// begins one. It visits only the streams it takes from (and those it
// skips), so that a request costs the same with 10 or 10,000 sessions
// queued.
func (b *Batcher) nextLocked(now time.Time) []*pack {
	if b.queued == 0 {
		return nil
	}
	if !b.fullLocked() && b.flushing == 0 {
		due := b.earliestDueLocked(now)
		if due.IsZero() || (now.Before(due) && !b.packReadyLocked(now)) {
			return nil
		}
	}
	var batch []*pack
	// skipped: the streams visited that keep queued entries; open: per
	// group, the pack its next entries may join.
	skipped, open := b.scratch[:0], b.open
	defer clear(open)
	bytes, i := 0, 0
	// Once the request holds MaxCount wire records, sessions may still
	// join its open packs.
	for i < len(b.active) && (len(batch) < b.cfg.MaxCount || len(open) > 0) && bytes < b.cfg.MaxBytes && !(len(batch) == 1 && batch[0].entries[0].alone) {
		st := b.active[i]
		if len(st.queue) == 0 {
			st.inActive = false
			i++
			continue
		}
		if !b.sendable(st, now) {
			skipped = append(skipped, st)
			i++
			continue
		}
		if ok, dropped := b.admitLocked(st, now); !ok {
			if !dropped {
				skipped = append(skipped, st)
				i++
			}
			continue // a drop: look at st again
		}
		took := 0
		var mine *pack // the wire record st's last entry taken went to
		for took < len(st.queue) {
			e := st.queue[took]
			if e.notBefore.After(now) || e.t != st.queue[0].t || (e.alone && len(batch) > 0) {
				break
			}
			if p := b.joinable(open[e.group], mine); p != nil {
				if grew, ok := b.growPackLocked(p, e, b.cfg.MaxBytes-bytes); ok {
					bytes += grew
					took++
					mine = p
					continue
				}
			}
			if len(batch) >= b.cfg.MaxCount || (took > 0 && b.onePack) {
				break
			}
			if e.pinned != nil {
				if p, ok := pinnedAt(st.queue[took:]); ok {
					if bytes+p.size > b.cfg.MaxBytes {
						break
					}
					p.at = len(batch)
					batch = append(batch, p)
					bytes += p.size
					took += len(p.entries)
					mine = p
					continue
				}
			}
			p := b.startPackLocked(e)
			if bytes+p.size > b.cfg.MaxBytes {
				break
			}
			p.at = len(batch)
			batch = append(batch, p)
			bytes += p.size
			took++
			mine = p
			if !p.plain {
				open[e.group] = p
			}
			if e.alone {
				break
			}
		}
		if took == 0 && len(batch) > 0 {
			break // st stays first for the next request
		}
		i++
		if took > 0 {
			for _, e := range st.queue[:took] {
				b.countQueuedLocked(e, -1)
			}
			st.queue = st.queue[took:]
			st.inflight++
		}
		if len(st.queue) == 0 {
			st.inActive = false
			continue
		}
		// What is left of st (it did not fit, or may not go in this
		// request: one wire record of a session on an ordered sink, another
		// tenure, a retry not yet due) waits behind the other sessions,
		// which the request goes on with while it has room.
		skipped = append(skipped, st)
	}
	// The streams visited go to the back: the next request starts with
	// another session.
	b.active = append(b.active[i:], skipped...)
	clear(skipped)
	b.scratch = skipped[:0]
	return batch
}

// earliestDueLocked is the earliest due time of the entries that may be
// sent now (zero: none).
func (b *Batcher) earliestDueLocked(now time.Time) time.Time {
	var due time.Time
	for _, st := range b.active {
		if b.sendable(st, now) && (due.IsZero() || st.queue[0].due.Before(due)) {
			due = st.queue[0].due
		}
	}
	return due
}

// activateLocked puts st among the streams with entries to send.
func (b *Batcher) activateLocked(st *stream) {
	if !st.inActive {
		st.inActive = true
		b.active = append(b.active, st)
	}
}

// endTenureLocked drops st's queued entries of tenure t, which may deliver
// nothing more. Submit refuses t from then on, and its acknowledgments end
// before its first dropped entry (settleLocked), so no later message of it
// is acknowledged past one the destination does not have.
func (b *Batcher) endTenureLocked(st *stream, t sink.Tenure) {
	st.dead = t
	kept := st.queue[:0]
	for _, e := range st.queue {
		if e.t == t {
			e.dropped = true
			b.dropped.Add(1)
			b.countQueuedLocked(e, -1)
			continue
		}
		kept = append(kept, e)
	}
	clear(st.queue[len(kept):])
	st.queue = kept
	b.settleLocked(st)
}

// nextWakeLocked is how long until a request may be due (0: nothing to
// wait for but a wake-up: nothing queued, or every request slot busy, whose
// completion wakes the dispatcher).
func (b *Batcher) nextWakeLocked(now time.Time) time.Duration {
	if b.inflight >= b.cfg.MaxInFlight {
		return 0
	}
	var next time.Time
	for _, st := range b.active {
		if len(st.queue) == 0 || (b.snd.Ordered() && st.inflight > 0) {
			continue
		}
		e := st.queue[0]
		at := e.due
		if e.notBefore.After(at) {
			at = e.notBefore
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(now), time.Millisecond)
}
