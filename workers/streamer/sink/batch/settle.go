package batch

// A request's outcome: acknowledged prefixes, retries, refusals given up on.

import (
	"context"
	"errors"
	"slices"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// failureKind is what makes two failures "the same way": the error code
// when the error names one (an API error, a rejected entry), else its text.
func failureKind(err error) string {
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) {
		return coded.ErrorCode()
	}
	return err.Error()
}

// repeatedLocked counts e's failure eerr and returns a RepeatedError once
// e failed the same way Config.RepeatFailures times, each while the
// destination took other records: in this request (accepted) or since its
// previous failure. Throttling and timeouts never count. whole: a request
// of several entries failed as a whole, which names none of them: a
// second such failure of one kind with others getting through sends e
// alone from then on, and only its failures alone count.
func (b *Batcher) repeatedLocked(e *entry, eerr error, accepted, whole bool) error {
	records := b.records.Load()
	progress := accepted || records > e.recordsAtFail
	e.recordsAtFail = records
	if sink.IsThrottled(eerr) || errors.Is(eerr, context.DeadlineExceeded) || errors.Is(eerr, context.Canceled) {
		e.kind, e.repeats, e.sameRuns = "", 0, 0
		return nil
	}
	if kind := failureKind(eerr); kind != e.kind {
		e.kind, e.repeats, e.sameRuns = kind, 0, 0
	}
	if !progress {
		return nil // every request may be failing: an outage, not this entry
	}
	if whole {
		if e.sameRuns++; e.sameRuns >= 2 {
			e.alone = true
		}
		return nil
	}
	if e.repeats++; e.repeats < b.cfg.RepeatFailures {
		return nil
	}
	return &RepeatedError{Failures: e.repeats, Err: eerr}
}

// giveUpLocked ends e after its permanent refusals: its tenure skips it
// (the later entries may be acknowledged past it) or ends with it.
func (b *Batcher) giveUpLocked(st *stream, e *entry, err error) {
	b.refused.Add(1)
	if st.cut != e.t && st.dead != e.t && e.t.Refused(e.rec.Seq, e.rec.Sub, err) {
		e.skipped = true
		b.skipped.Add(1)
		return
	}
	e.dropped = true
	if st.dead != e.t {
		b.endTenureLocked(st, e.t)
	}
}

// requeueLocked puts a failed entry back in st's queue, in submission order
// (which keeps the (seq, sub) order of the messages that share a seq).
func (b *Batcher) requeueLocked(st *stream, e *entry) {
	b.activateLocked(st)
	i, _ := slices.BinarySearchFunc(st.queue, e.ord, func(x *entry, ord uint64) int {
		switch {
		case x.ord < ord:
			return -1
		case x.ord > ord:
			return 1
		}
		return 0
	})
	st.queue = slices.Insert(st.queue, i, e)
	b.countQueuedLocked(e, 1)
}

// settleLocked acknowledges st's leading acknowledged entries to their
// tenures, frees their bytes, and forgets st once it holds nothing. A
// dropped entry ends its tenure's acknowledged prefix: the tenure's later
// entries are freed when they settle, never acknowledged.
func (b *Batcher) settleLocked(st *stream) {
	n, freed := 0, 0
	for n < len(st.entries) {
		e := st.entries[n]
		if !e.acked && !e.dropped && !e.skipped {
			break
		}
		switch {
		case e.dropped:
			st.cut = e.t
		case (e.acked || e.skipped) && e.t != st.cut:
			// A skipped entry passes like an acknowledged one: the
			// session chose to go on without it.
			e.t.Acked(e.rec.Seq)
		}
		freed += e.size
		n++
	}
	if n == 0 {
		return
	}
	clear(st.entries[:n])
	st.entries = st.entries[n:]
	st.bytes -= freed
	b.buffered -= int64(freed)
	if st.space != nil {
		close(st.space)
		st.space = nil
	}
	if b.budget != nil {
		close(b.budget)
		b.budget = nil
	}
	if len(st.entries) == 0 {
		if st.empty != nil {
			close(st.empty)
			st.empty = nil
		}
		if st.dead == nil && st.inflight == 0 && len(st.queue) == 0 {
			delete(b.streams, st.id)
		}
	}
}
