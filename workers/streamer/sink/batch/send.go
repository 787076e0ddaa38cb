package batch

// A request sent: its wire records, under the trust deadline of every tenure
// in it.

import (
	"context"
	"slices"
	"time"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// send runs one request under its deadline and applies its outcome to
// every message of its wire records.
func (b *Batcher) send(ctx context.Context, r request) {
	packs, withheld, unfit := b.buildWire(r.packs)
	var failed []error
	var err error
	entries := 0
	for _, p := range packs {
		entries += len(p.entries)
	}
	if len(packs) > 0 {
		recs := make([]Record, len(packs))
		for i, p := range packs {
			recs[i] = *p.wire
		}
		ctx, cancel := context.WithDeadline(ctx, r.deadline)
		failed, err = b.snd.Send(ctx, recs)
		cancel()
		b.requests.Add(1)
		if err != nil {
			b.requestErrors.Add(1)
			if b.requestErrors.Load()%100 == 1 {
				b.log.Warn().Err(err).Int("entries", entries).Msg("sink request failed: retrying its entries")
			}
		}
	}
	now := time.Now()
	b.mu.Lock()
	touched := map[*stream]struct{}{}
	touch := func(e *entry) *stream {
		st := b.streams[e.rec.ConnectionID]
		if _, ok := touched[st]; !ok {
			touched[st] = struct{}{}
			st.inflight--
		}
		return st
	}
	for _, p := range unfit {
		for _, e := range p.entries {
			e.pinned, e.unpacked = nil, true
		}
	}
	for _, p := range withheld { // never sent: queued again as they were
		for _, e := range p.entries {
			b.requeueLocked(touch(e), e)
		}
	}
	var firstErr error
	// accepted: the destination took records of this request (then an
	// entry it failed was failed for itself).
	accepted := err == nil && len(failed) == 0
	if err == nil && failed != nil {
		for _, f := range failed {
			accepted = accepted || f == nil
		}
	}
	for i, p := range packs {
		var perr error
		if err != nil {
			perr = err
		} else if failed != nil {
			perr = failed[i]
		}
		if perr == nil {
			b.wireRecords.Add(1)
		}
		// shared: the failure names several messages, none of them in
		// particular (a whole request, or a pack).
		shared := (err != nil && entries > 1) || (err == nil && len(p.entries) > 1)
		for _, e := range p.entries {
			st := touch(e)
			if perr == nil {
				e.acked = true
				b.records.Add(1)
				continue
			}
			if err == nil {
				b.entryErrors.Add(1)
				if firstErr == nil {
					firstErr = perr
				}
			}
			if rerr := b.repeatedLocked(e, perr, accepted, shared); rerr != nil {
				b.giveUpLocked(st, e, rerr)
				continue
			}
			switch {
			case err == nil && sink.IsFinal(perr):
				// The destination applied the wire record, altered: every
				// message in it was written, so none is ever sent again
				// (a pack's: which one was altered is unknown); each
				// message's tenure decides (Tenure.Refused).
				b.giveUpLocked(st, e, perr)
				continue
			case shared && sink.IsPermanent(perr):
				e.alone = true // which message the destination refused is unknown
			case sink.IsPermanent(perr):
				e.permanent++
				if e.permanent >= b.cfg.PermanentAttempts || sink.IsFinal(perr) {
					b.giveUpLocked(st, e, perr)
					continue
				}
			}
			e.notBefore = now.Add(b.cfg.Retry.Next(e.attempts, nil))
			e.attempts++
			b.requeueLocked(st, e)
		}
		if perr != nil && !p.plain && len(p.sessions()) == 1 {
			b.pinLocked(p)
		}
	}
	for st := range touched {
		b.settleLocked(st)
	}
	b.inflight--
	b.mu.Unlock()
	if firstErr != nil && b.entryErrors.Load()%100 == 1 {
		b.log.Warn().Err(firstErr).Msg("sink refused entries of a request: retrying them")
	}
	b.wake()
}

// buildWire builds the wire record of every pack of a request. A pack that
// cannot be built within its bound (unfit) is withheld with every later
// pack of each of its sessions (they must not pass it), and so on for the
// sessions of those: its entries go out as plain records, the withheld
// ones as they are queued again.
func (b *Batcher) buildWire(all []*pack) (packs, withheld, unfit []*pack) {
	var stopped map[string]bool
	stop := func(p *pack) {
		if stopped == nil {
			stopped = map[string]bool{}
		}
		for _, id := range p.sessions() {
			stopped[id] = true
		}
		withheld = append(withheld, p)
	}
	for _, p := range all {
		if stopped != nil && slices.ContainsFunc(p.sessions(), func(id string) bool { return stopped[id] }) {
			stop(p)
			continue
		}
		r, err := b.wireRecord(p)
		if err != nil {
			b.packFallbacks.Add(1)
			b.log.Warn().Err(err).Strs("connection_ids", p.sessions()).Int("messages", len(p.entries)).Msg("pack over its bound: sending its messages as plain records")
			unfit = append(unfit, p)
			stop(p)
			continue
		}
		if !p.plain && len(p.entries) > 1 {
			b.packs.Add(1)
		}
		p.wire = &r
		packs = append(packs, p)
	}
	return packs, withheld, unfit
}

// pinLocked keeps the entries of a pack of one session that failed
// together, so that its retry is a copy of the same wire record (a
// destination that deduplicates sees the same record), unless any of them
// is now sent alone or settled: then none is pinned and they go out as
// plain records.
func (b *Batcher) pinLocked(p *pack) {
	keep := true
	for _, e := range p.entries {
		keep = keep && !e.alone && !e.acked && !e.dropped && !e.skipped
	}
	var at time.Time
	for _, e := range p.entries {
		if !keep {
			e.pinned, e.alone = nil, e.alone || len(p.entries) > 1 && !e.acked && !e.dropped && !e.skipped
			continue
		}
		e.pinned = p
		if e.notBefore.After(at) {
			at = e.notBefore
		}
	}
	if keep {
		for _, e := range p.entries {
			e.notBefore = at // the pack is sent again once, whole
		}
	}
}
