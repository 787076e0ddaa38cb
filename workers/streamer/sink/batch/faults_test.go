package batch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
)

// The regression tests of issue 22's review of the batching layer, one per
// finding.

// Finding 1: seq 2 fails in a request that writes 1, 3 and 4, and waits for
// its retry; the trust deadline passes (2 is dropped), then trust comes back. The
// tenure must never be told past 1: a release would checkpoint past a
// message no one delivered.
func TestDroppedEntryEndsTheAcknowledgedPrefix(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			f := newFake(ordered)
			var once atomic.Bool
			f.fail = func(r batch.Record, _ int) error {
				if r.Seq == 2 && once.CompareAndSwap(false, true) {
					return errors.New("InternalError")
				}
				return nil
			}
			cfg := testConfig()
			cfg.Retry.Base, cfg.Retry.Max = 200*time.Millisecond, 200*time.Millisecond // seq 2's retry waits
			b := batchtest.Start(t, f, cfg)
			tn := newTenure()
			for seq := int64(1); seq <= 4; seq++ { // one request: 2 fails, 1, 3 and 4 are written (a partial failure)
				if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
					t.Fatal(err)
				}
			}
			testwait.Eventually(t, 5*time.Second, "seq 2 refused, 1, 3 and 4 written", func() bool {
				f.mu.Lock()
				defer f.mu.Unlock()
				return b.Stats().EntryErrors == 1 && len(f.accepted["c"]) == 3
			})
			tn.valid.Store(false) // the trust deadline passes before 2's retry
			testwait.Eventually(t, 5*time.Second, "seq 2 dropped", func() bool { return b.Stats().DroppedInvalid >= 1 })
			tn.valid.Store(true) // a late heartbeat: trusted again
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := b.FlushSession(ctx, "c"); err != nil {
				t.Fatal(err)
			}
			if got := tn.last(); got != 1 {
				t.Fatalf("acknowledged up to %d past the dropped seq 2 (written %v)", got, f.accepted["c"])
			}
			if err := b.Submit(context.Background(), msg("c", 5), tn, nil); !errors.Is(err, sink.ErrTenureEnded) {
				t.Fatalf("submit after the drop: %v", err)
			}
		})
	}
}

// trustSender records the deadline of every request and holds each until
// its context ends or release is closed.
type trustSender struct {
	*fakeSender
	release   chan struct{}
	mu        sync.Mutex
	deadlines []time.Time
	ended     []time.Time // when a held request's context ended
}

func (s *trustSender) Send(ctx context.Context, recs []batch.Record) ([]error, error) {
	d, _ := ctx.Deadline()
	s.mu.Lock()
	s.deadlines = append(s.deadlines, d)
	s.mu.Unlock()
	select {
	case <-s.release:
		return s.fakeSender.Send(ctx, recs)
	case <-ctx.Done():
		s.mu.Lock()
		s.ended = append(s.ended, time.Now())
		s.mu.Unlock()
		return nil, ctx.Err()
	}
}

func (s *trustSender) sent() ([]time.Time, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.deadlines...), append([]time.Time(nil), s.ended...)
}

// Finding 2: a request is sent only when its timeout ends by the trust
// deadline of its tenure, and it is cancelled then; entries whose tenure has
// less trust left wait for it to come back.
func TestSinkRequestsStayInsideTheTrustWindow(t *testing.T) {
	s := &trustSender{fakeSender: newFake(true), release: make(chan struct{})}
	cfg := testConfig()
	cfg.RequestTimeout = 300 * time.Millisecond
	b := batchtest.Start(t, s, cfg)
	tn := newTenure()
	deadline := time.Now().Add(100 * time.Millisecond) // less than a request's timeout left
	tn.deadline.Store(&deadline)
	if err := b.Submit(context.Background(), msg("c", 1), tn, nil); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, "held for trust, then dropped at the deadline", func() bool {
		st := b.Stats()
		return st.HeldForTrust > 0 && st.DroppedInvalid == 1
	})
	if d, _ := s.sent(); len(d) != 0 {
		t.Fatalf("%d requests sent with less trust left than their timeout", len(d))
	}

	// A new tenure with trust for one request: the request's deadline is
	// within the tenure's, and a destination that does not answer is cut
	// off by then.
	tn2 := newTenure()
	deadline2 := time.Now().Add(time.Second)
	tn2.deadline.Store(&deadline2)
	if err := b.Submit(context.Background(), msg("c", 2), tn2, nil); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, "the request ended by its deadline", func() bool {
		_, ended := s.sent()
		return len(ended) >= 1
	})
	ds, ended := s.sent()
	if ds[0].IsZero() || ds[0].After(deadline2) {
		t.Fatalf("request deadline %v, tenure's trust deadline %v", ds[0], deadline2)
	}
	if ended[0].Before(ds[0]) {
		t.Fatalf("request cancelled at %v, before its deadline %v", ended[0], ds[0])
	}
	// Trust comes back (a heartbeat): the entry is sent again and written.
	later := time.Now().Add(time.Hour)
	tn2.deadline.Store(&later)
	close(s.release)
	testwait.Eventually(t, 5*time.Second, "written once trust is back", func() bool { return tn2.last() == 2 })
}

// A shutdown that leaves sessions behind waits for the requests in flight.
func TestQuiesceWaitsForRequestsInFlight(t *testing.T) {
	s := &trustSender{fakeSender: newFake(true), release: make(chan struct{})}
	cfg := testConfig()
	cfg.RequestTimeout = 200 * time.Millisecond
	b := batchtest.Start(t, s, cfg)
	tn := newTenure()
	if err := b.Submit(context.Background(), msg("c", 1), tn, nil); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, "a request in flight", func() bool { d, _ := s.sent(); return len(d) == 1 })
	tn.valid.Store(false) // abandoned: nothing more may be sent
	if err := b.Quiesce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ended := s.sent(); len(ended) != 1 {
		t.Fatal("Quiesce returned with the request still in flight")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	tn3 := newTenure()
	if err := b.Submit(context.Background(), msg("d", 1), tn3, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Quiesce(ctx); err == nil {
		t.Fatal("Quiesce returned nil with a valid tenure's entry still to send")
	}
	close(s.release)
}

var errInvalidContents = sink.Permanent(errors.New("InvalidMessageContents"))

// Finding 3: a permanent refusal ends after PermanentAttempts sends. Under
// fail nothing is acknowledged past it and the tenure ends; under skip the
// later messages are acknowledged past it.
func TestPermanentRefusalEnds(t *testing.T) {
	for _, skip := range []bool{false, true} {
		t.Run(fmt.Sprintf("skip=%v", skip), func(t *testing.T) {
			f := newFake(false)
			f.fail = func(r batch.Record, _ int) error {
				if r.Seq == 3 {
					return errInvalidContents
				}
				return nil
			}
			cfg := testConfig()
			cfg.PermanentAttempts = 2
			b := batchtest.Start(t, f, cfg)
			tn := newTenure()
			tn.skip = skip
			for seq := int64(1); seq <= 5; seq++ {
				if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := b.FlushSession(ctx, "c"); err != nil {
				t.Fatalf("flush: %v (a permanent refusal retried forever?)", err)
			}
			f.mu.Lock()
			sent := f.sent["c:3"]
			f.mu.Unlock()
			if sent != 2 {
				t.Fatalf("seq 3 sent %d times, want PermanentAttempts = 2", sent)
			}
			if got := tn.refusedSeqs(); len(got) != 1 || got[0] != 3 {
				t.Fatalf("refused %v, want [3]", got)
			}
			want := int64(2)
			if skip {
				want = 5
			}
			if got := tn.last(); got != want {
				t.Fatalf("acknowledged up to %d, want %d", got, want)
			}
			st := b.Stats()
			if st.Refused != 1 || (st.Skipped == 1) != skip {
				t.Fatalf("stats %+v", st)
			}
			err := b.Submit(context.Background(), msg("c", 6), tn, nil)
			if skip != (err == nil) {
				t.Fatalf("submit after the refusal: %v", err)
			}
		})
	}
}

// A record too large for the sink is refused at once, as permanent.
func TestOversizeRecordIsPermanent(t *testing.T) {
	b := batchtest.Start(t, newFake(true), testConfig())
	err := b.Submit(context.Background(), sink.Message{ConnectionID: "c", Seq: 1, Data: make([]byte, 101)}, newTenure(), nil)
	if !sink.IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent refusal", err)
	}
}

// Finding 4: the worker-wide budget stalls a session's Submit while other
// sessions' records fill it, and lets it in once they are acknowledged.
func TestBufferBudgetStallsEverySession(t *testing.T) {
	f := newFake(true)
	f.gate = make(chan struct{})
	cfg := testConfig()
	cfg.BufferBudget = 100 // the sink's largest record
	b := batchtest.Start(t, f, cfg)
	a := newTenure()
	m := sink.Message{ConnectionID: "a", Seq: 1, Data: make([]byte, 60)}
	if err := b.Submit(context.Background(), m, a, nil); err != nil {
		t.Fatal(err)
	}
	other := newTenure()
	done := make(chan error, 1)
	go func() {
		done <- b.Submit(context.Background(), sink.Message{ConnectionID: "b", Seq: 1, Data: make([]byte, 60)}, other, nil)
	}()
	testwait.Eventually(t, 5*time.Second, "the other session stalled on the budget", func() bool {
		return other.stalls.Load() == 1 && b.Stats().BudgetStalls == 1
	})
	if got := b.Stats().BufferedBytes; got != 60 {
		t.Fatalf("buffered %d bytes, want 60", got)
	}
	close(f.gate)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Submit still stalled after the budget drained")
	}
	testwait.Eventually(t, 5*time.Second, "both acknowledged", func() bool { return a.last() == 1 && other.last() == 1 })
}

// Finding 5: a requeue keeps the (seq, sub) order of messages sharing a seq.
func TestRequeueKeepsSubOrder(t *testing.T) {
	f := newFake(true)
	var failed sync.Map
	f.fail = func(r batch.Record, _ int) error {
		if _, again := failed.LoadOrStore(fmt.Sprint(r.Seq, ".", r.Sub), true); !again {
			return errors.New("ThrottlingException")
		}
		return nil
	}
	b := batchtest.Start(t, f, testConfig())
	tn := newTenure()
	for sub := int64(0); sub <= 2; sub++ {
		m := msg("c", 5)
		m.Sub = sub
		if err := b.Submit(context.Background(), m, tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Eventually(t, 5*time.Second, "all three written", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.written) == 3
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.written {
		if r.Seq != 5 || r.Sub != int64(i) {
			t.Fatalf("written in the order %v, want 5.0, 5.1, 5.2", f.written)
		}
	}
}

// Handle (the batcher as a plain sink.Handler) gives up by its context's
// deadline and reports a permanent refusal as one.
func TestHandleKeepsItsDeadlineAndRefusals(t *testing.T) {
	f := newFake(true)
	f.fail = func(r batch.Record, _ int) error { return errInvalidContents }
	cfg := testConfig()
	cfg.PermanentAttempts = 1
	b := batchtest.Start(t, f, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Handle(ctx, msg("c", 1)); !sink.IsPermanent(err) {
		t.Fatalf("Handle of a refused message: %v", err)
	}
}

// requestRefuser refuses a whole request when it holds the poisoned seq of
// session c: with err, or permanently (a Kinesis ValidationException names
// no record) when err is nil.
type requestRefuser struct {
	*fakeSender
	poisoned int64
	err      error
}

func (r *requestRefuser) Send(ctx context.Context, recs []batch.Record) ([]error, error) {
	for _, rec := range recs {
		if rec.ConnectionID == "c" && rec.Seq == r.poisoned {
			if r.err != nil {
				return nil, r.err
			}
			return nil, sink.Permanent(errors.New("ValidationException"))
		}
	}
	return r.fakeSender.Send(ctx, recs)
}

// A request refused permanently as a whole does not count against the
// entries that merely shared it: they are sent again alone, and only the
// entry refused alone is given up on.
func TestWholeRequestRefusalBlamesOnlyTheEntryRefusedAlone(t *testing.T) {
	r := &requestRefuser{fakeSender: newFake(true), poisoned: 3}
	cfg := testConfig()
	cfg.PermanentAttempts = 2
	b := batchtest.Start(t, r, cfg)
	tn := newTenure()
	tn.skip = true
	other := newTenure()
	for seq := int64(1); seq <= 5; seq++ {
		if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Submit(context.Background(), msg("d", seq), other, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range []string{"c", "d"} {
		if err := b.FlushSession(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := tn.refusedSeqs(); len(got) != 1 || got[0] != 3 {
		t.Fatalf("c refused %v, want only the poisoned [3]", got)
	}
	if got := other.refusedSeqs(); len(got) != 0 {
		t.Fatalf("d refused %v: innocent entries blamed", got)
	}
	if tn.last() != 5 || other.last() != 5 {
		t.Fatalf("acked c %d, d %d, want 5 and 5", tn.last(), other.last())
	}
}

// Skipped messages move the checkpoint like acknowledged ones: a session
// whose every message is refused for good under skip still checkpoints past
// them (else its next owner would resume before them, or from nothing).
func TestSkippedMessagesAdvanceTheCheckpoint(t *testing.T) {
	f := newFake(true)
	f.fail = func(batch.Record, int) error { return errInvalidContents }
	cfg := testConfig()
	cfg.PermanentAttempts = 1
	b := batchtest.Start(t, f, cfg)
	tn := newTenure()
	tn.skip = true
	for seq := int64(1); seq <= 4; seq++ {
		if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.FlushSession(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if got := tn.last(); got != 4 || len(tn.refusedSeqs()) != 4 {
		t.Fatalf("acked %d with %v skipped, want 4 past all four", got, tn.refusedSeqs())
	}
}
