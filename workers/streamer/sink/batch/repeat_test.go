package batch_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
)

// The regression tests of issue 35's finding 1, third layer: a record that
// keeps failing the same way while the destination takes others is refused
// after RepeatFailures, whatever the destination calls the failure, so that
// no message holds its session in a retry loop.

// submitAndFlush submits seqs 1..n of session id to b and flushes it.
func submitAndFlush(t *testing.T, b *batch.Batcher, tn sink.Tenure, id string, n int64) {
	t.Helper()
	for seq := int64(1); seq <= n; seq++ {
		if err := b.Submit(context.Background(), msg(id, seq), tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, b, id)
}

func flush(t *testing.T, b *batch.Batcher, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.FlushSession(ctx, id); err != nil {
		t.Fatalf("flush: %v (stats %+v: a message retried forever?)", err, b.Stats())
	}
}

// streamUntil submits seqs 1, 2, … of session id (tenure tn) to b, one
// every millisecond, as a session reading its socket does, until watched
// refused a message (or tn's tenure ended, or its buffer stayed full) or
// 5 s passed; it returns the last seq submitted.
func streamUntil(t *testing.T, b *batch.Batcher, tn, watched *tenure, id string) int64 {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	seq := int64(0)
	for len(watched.refusedSeqs()) == 0 && ctx.Err() == nil {
		if err := b.Submit(ctx, msg(id, seq+1), tn, nil); err != nil {
			break // the tenure ended at the refusal (fail), or the buffer stayed full
		}
		seq++
		<-tick.C
	}
	return seq
}

// An entry the destination fails each time (a transient code, as SQS's
// InternalError for one entry) while it writes the others is refused after
// RepeatFailures sends: under skip the later messages are acknowledged past
// it, under fail nothing is.
func TestEntryFailingTheSameWayIsRefused(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		for _, skip := range []bool{false, true} {
			t.Run(fmt.Sprintf("ordered=%v,skip=%v", ordered, skip), func(t *testing.T) {
				f := newFake(ordered)
				f.fail = func(r batch.Record, _ int) error {
					if r.Seq == 3 {
						return errors.New("InternalError: try again")
					}
					return nil
				}
				cfg := testConfig()
				cfg.RepeatFailures = 3
				b := batchtest.Start(t, f, cfg)
				tn := newTenure()
				tn.skip = skip
				last := streamUntil(t, b, tn, tn, "c")
				flush(t, b, "c")
				f.mu.Lock()
				sent := f.sent["c:3"]
				f.mu.Unlock()
				if got := tn.refusedSeqs(); len(got) != 1 || got[0] != 3 || sent != 3 {
					t.Fatalf("refused %v after %d sends, want [3] after RepeatFailures = 3", got, sent)
				}
				want := int64(2)
				if skip {
					want = last
				}
				if got := tn.last(); got != want {
					t.Fatalf("acknowledged up to %d, want %d", got, want)
				}
			})
		}
	}
}

// A whole request that keeps failing (transiently) because of one entry,
// while other requests get through, is split; only the entry failing alone
// is refused, and innocent entries that shared its requests are not.
func TestWholeRequestFailingTheSameWayBlamesOnlyTheEntryAlone(t *testing.T) {
	r := &requestRefuser{fakeSender: newFake(true), poisoned: 3, err: errors.New("message checksum validation failed")}
	cfg := testConfig()
	cfg.RepeatFailures = 3
	b := batchtest.Start(t, r, cfg)
	tn, other := newTenure(), newTenure()
	tn.skip = true
	for seq := int64(1); seq <= 5; seq++ {
		if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	last := streamUntil(t, b, other, tn, "d") // the other session's traffic gets through meanwhile
	testwait.Eventually(t, 5*time.Second, "c's seq 3 refused", func() bool { return len(tn.refusedSeqs()) > 0 })
	flush(t, b, "c")
	flush(t, b, "d")
	if got := tn.refusedSeqs(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("c refused %v, want only the poisoned [3]", got)
	}
	if got := other.refusedSeqs(); len(got) != 0 {
		t.Fatalf("d refused %v: innocent entries blamed", got)
	}
	if tn.last() != 5 || other.last() != last {
		t.Fatalf("acked c %d, d %d, want 5 and %d", tn.last(), other.last(), last)
	}
}

// An outage fails every request: nothing is written meanwhile, so no
// failure counts against an entry, however many there are; throttling
// never counts either. Both are retried until the destination takes them.
func TestOutageAndThrottlingAreNotRefusals(t *testing.T) {
	for name, fail := range map[string]func(r batch.Record, n int64) error{
		"outage": func(_ batch.Record, n int64) error {
			if n <= 40 {
				return errors.New("InternalError")
			}
			return nil
		},
		"throttled entry": func(r batch.Record, n int64) error {
			if r.Seq == 3 && n <= 40 {
				return sink.Throttled(errors.New("ThrottlingException"))
			}
			return nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(true)
			var n atomic.Int64
			f.fail = func(r batch.Record, _ int) error { return fail(r, n.Add(1)) }
			cfg := testConfig()
			cfg.RepeatFailures = 2
			b := batchtest.Start(t, f, cfg)
			tn := newTenure()
			submitAndFlush(t, b, tn, "c", 5)
			if got := tn.refusedSeqs(); len(got) != 0 || tn.last() != 5 {
				t.Fatalf("refused %v, acknowledged up to %d (after %d sends)", got, tn.last(), n.Load())
			}
		})
	}
}
