package batch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/backoff"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
)

// fakeSender records what it is sent. fail decides an entry's error (nil:
// accepted); gate, when set, holds every request until it is closed.
type fakeSender struct {
	limits  batch.Limits
	ordered bool
	gate    chan struct{}

	mu       sync.Mutex
	requests [][]batch.Record
	accepted map[string][]int64 // per session, in the order accepted
	written  []batch.Record     // every accepted record, in the order accepted
	sent     map[string]int     // times each "id:seq" was sent
	fail     func(r batch.Record, attempt int) error
	inFlight map[string]int // per session, requests in flight now
	overlap  bool           // an ordered session had two requests in flight
}

func newFake(ordered bool) *fakeSender {
	return &fakeSender{
		limits: batch.Limits{MaxCount: 10, MaxBytes: 1000, MaxRecordBytes: 100}, ordered: ordered,
		accepted: map[string][]int64{}, sent: map[string]int{}, inFlight: map[string]int{},
	}
}

func (f *fakeSender) Encode(m sink.Message) (batch.Record, error) {
	return batch.Record{ConnectionID: m.ConnectionID, Seq: m.Seq, Sub: m.Sub, Epoch: m.LeaseEpoch, Body: append([]byte(nil), m.Data...)}, nil
}
func (f *fakeSender) Limits() batch.Limits    { return f.limits }
func (f *fakeSender) Ordered() bool           { return f.ordered }
func (f *fakeSender) Size(r batch.Record) int { return len(r.Body) }

func (f *fakeSender) Send(ctx context.Context, recs []batch.Record) ([]error, error) {
	f.mu.Lock()
	f.requests = append(f.requests, recs)
	seen := map[string]bool{}
	for _, r := range recs {
		if !seen[r.ConnectionID] {
			seen[r.ConnectionID] = true
			f.inFlight[r.ConnectionID]++
			if f.ordered && f.inFlight[r.ConnectionID] > 1 {
				f.overlap = true
			}
		}
	}
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range seen {
		f.inFlight[id]--
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var failed []error
	for i, r := range recs {
		key := fmt.Sprintf("%s:%d", r.ConnectionID, r.Seq)
		f.sent[key]++
		var err error
		if f.fail != nil {
			err = f.fail(r, f.sent[key])
		}
		if err != nil {
			if failed == nil {
				failed = make([]error, len(recs))
			}
			failed[i] = err
			continue
		}
		f.accepted[r.ConnectionID] = append(f.accepted[r.ConnectionID], r.Seq)
		f.written = append(f.written, r)
	}
	return failed, nil
}

func (f *fakeSender) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// tenure records what the batcher acknowledged for one session. It may
// deliver while valid, until its deadline (zero: none); skip is its
// on_sink_refusal.
type tenure struct {
	valid    atomic.Bool
	deadline atomic.Pointer[time.Time]
	skip     bool
	stalls   atomic.Int64
	mu       sync.Mutex
	acks     []int64
	refused  []int64
	failed   string
}

func newTenure() *tenure { t := &tenure{}; t.valid.Store(true); return t }

func (t *tenure) Remaining() time.Duration {
	if !t.valid.Load() {
		return 0
	}
	if d := t.deadline.Load(); d != nil {
		return time.Until(*d)
	}
	return time.Hour
}
func (t *tenure) Stalled() { t.stalls.Add(1) }
func (t *tenure) Refused(seq, _ int64, _ error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refused = append(t.refused, seq)
	return t.skip
}
func (t *tenure) refusedSeqs() []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.refused)
}
func (t *tenure) Acked(seq int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.acks); n > 0 && seq <= t.acks[n-1] {
		t.failed = fmt.Sprintf("ack %d after %d", seq, t.acks[n-1])
	}
	t.acks = append(t.acks, seq)
}
func (t *tenure) last() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.acks) == 0 {
		return 0
	}
	return t.acks[len(t.acks)-1]
}

func testConfig() batch.Config {
	c := batch.DefaultConfig()
	c.MaxDelay = 5 * time.Millisecond
	c.MaxInFlight = 4
	c.SessionBufferBytes = 500
	c.Retry = backoff.Policy{Base: time.Millisecond, Max: 5 * time.Millisecond}
	return c
}

func msg(id string, seq int64) sink.Message {
	return sink.Message{ConnectionID: id, Seq: seq, LeaseEpoch: 1, Data: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}
}

func TestGroupCommitKeepsPerSessionOrderAndAcksEverything(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			f := newFake(ordered)
			b := batchtest.Start(t, f, testConfig())
			const sessions, perSession = 20, 200
			tenures := make([]*tenure, sessions)
			var wg sync.WaitGroup
			for s := range sessions {
				tenures[s] = newTenure()
				wg.Go(func() {
					for seq := int64(1); seq <= perSession; seq++ {
						if err := b.Submit(context.Background(), msg(fmt.Sprintf("s%d", s), seq), tenures[s], nil); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			testwait.Eventually(t, 10*time.Second, "every message acknowledged", func() bool {
				for _, tn := range tenures {
					if tn.last() != perSession {
						return false
					}
				}
				return true
			})
			f.mu.Lock()
			defer f.mu.Unlock()
			for s, tn := range tenures {
				if tn.failed != "" {
					t.Fatalf("session %d: %s", s, tn.failed)
				}
				got := f.accepted[fmt.Sprintf("s%d", s)]
				if len(got) != perSession {
					t.Fatalf("session %d: %d accepted, want %d", s, len(got), perSession)
				}
				if !ordered { // concurrent requests of a session may land in any order
					got = slices.Sorted(slices.Values(got))
				}
				for i, seq := range got {
					if seq != int64(i+1) {
						t.Fatalf("session %d: accepted out of order at %d: %v", s, i, got[:i+1])
					}
				}
			}
			if f.overlap {
				t.Fatal("an ordered sink got two requests of one session in flight")
			}
			total := sessions * perSession
			if n := len(f.requests); n > total/5 {
				t.Fatalf("%d requests for %d messages: not batched", n, total)
			}
			for _, r := range f.requests {
				if len(r) > f.limits.MaxCount {
					t.Fatalf("request of %d entries, limit %d", len(r), f.limits.MaxCount)
				}
			}
		})
	}
}

func TestPartialFailureRetriesOnlyFailedEntries(t *testing.T) {
	f := newFake(true)
	throttled := errors.New("ProvisionedThroughputExceededException")
	f.fail = func(r batch.Record, attempt int) error {
		if r.Seq%3 == 0 && attempt <= 2 {
			return throttled
		}
		return nil
	}
	b := batchtest.Start(t, f, testConfig())
	tn := newTenure()
	for seq := int64(1); seq <= 30; seq++ {
		if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Eventually(t, 10*time.Second, "all acknowledged", func() bool { return tn.last() == 30 })
	f.mu.Lock()
	defer f.mu.Unlock()
	for seq := int64(1); seq <= 30; seq++ {
		want := 1
		if seq%3 == 0 {
			want = 3
		}
		if n := f.sent[fmt.Sprintf("c:%d", seq)]; n != want {
			t.Errorf("seq %d sent %d times, want %d", seq, n, want)
		}
	}
	if tn.failed != "" {
		t.Fatal(tn.failed)
	}
	// An ack never passes a message not yet accepted: every ack's seq is
	// accepted, and so is everything before it.
	accepted := map[int64]bool{}
	for _, s := range f.accepted["c"] {
		accepted[s] = true
	}
	for s := int64(1); s <= 30; s++ {
		if !accepted[s] {
			t.Fatalf("seq %d never accepted", s)
		}
	}
	if st := b.Stats(); st.EntryErrors != 20 || st.Records != 30 {
		t.Fatalf("stats %+v: want 20 entry errors, 30 records", st)
	}
}

func TestAckStopsBeforeAnUnacceptedMessage(t *testing.T) {
	f := newFake(false)
	var release atomic.Bool
	f.fail = func(r batch.Record, _ int) error {
		if r.Seq == 5 && !release.Load() {
			return errors.New("InternalFailure")
		}
		return nil
	}
	b := batchtest.Start(t, f, testConfig())
	tn := newTenure()
	for seq := int64(1); seq <= 20; seq++ {
		if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Eventually(t, 5*time.Second, "acks up to 4", func() bool { return tn.last() == 4 })
	testwait.Eventually(t, 5*time.Second, "seq 5 retried", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.sent["c:5"] >= 3
	})
	if got := tn.last(); got != 4 {
		t.Fatalf("acked %d past the refused seq 5", got)
	}
	release.Store(true)
	testwait.Eventually(t, 5*time.Second, "all acked once 5 is accepted", func() bool { return tn.last() == 20 })
}

func TestFullBufferStallsUntilAcknowledged(t *testing.T) {
	f := newFake(true)
	f.gate = make(chan struct{})
	cfg := testConfig()
	cfg.SessionBufferBytes = 100 // ten 10-byte messages
	b := batchtest.Start(t, f, cfg)
	tn := newTenure()
	body := func(seq int64) sink.Message {
		return sink.Message{ConnectionID: "c", Seq: seq, Data: []byte("0123456789")}
	}
	for seq := int64(1); seq <= 10; seq++ {
		if err := b.Submit(context.Background(), body(seq), tn, nil); err != nil || tn.stalls.Load() != 0 {
			t.Fatalf("seq %d: %d stalls, %v", seq, tn.stalls.Load(), err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- b.Submit(context.Background(), body(11), tn, nil) }()
	testwait.Eventually(t, 5*time.Second, "the stall reported as it starts", func() bool { return tn.stalls.Load() == 1 })
	testwait.Eventually(t, 5*time.Second, "a request in flight", func() bool { return f.requestCount() == 1 })
	select {
	case err := <-done:
		t.Fatalf("Submit returned with a full buffer: %v", err)
	case <-time.After(50 * time.Millisecond): // a return now would be the bug
	}
	close(f.gate)
	select {
	case err := <-done:
		if err != nil || tn.stalls.Load() != 1 {
			t.Fatalf("after the ack: %v, %d stalls, want queued after one stall", err, tn.stalls.Load())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Submit still blocked after the buffer drained")
	}
	testwait.Eventually(t, 5*time.Second, "seq 11 acked", func() bool { return tn.last() == 11 })
}

func TestStalledSubmitEndsWithTheSession(t *testing.T) {
	f := newFake(true)
	f.gate = make(chan struct{})
	defer close(f.gate)
	cfg := testConfig()
	cfg.SessionBufferBytes = 100
	b := batchtest.Start(t, f, cfg)
	tn := newTenure()
	m := sink.Message{ConnectionID: "c", Data: make([]byte, 100)}
	m.Seq = 1
	if err := b.Submit(context.Background(), m, tn, nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	m.Seq = 2
	go func() { done <- b.Submit(context.Background(), m, tn, stop) }()
	close(stop)
	select {
	case err := <-done:
		if !errors.Is(err, batch.ErrStopped) {
			t.Fatalf("err = %v, want batch.ErrStopped", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a stalled Submit ignored stop")
	}
}

func TestFlushSessionIsBounded(t *testing.T) {
	f := newFake(true)
	f.gate = make(chan struct{})
	cfg := testConfig()
	cfg.MaxDelay = time.Hour // only a flush sends a partial batch
	b := batchtest.Start(t, f, cfg)
	tn := newTenure()
	for seq := int64(1); seq <= 3; seq++ {
		if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	if err := b.FlushSession(ctx, "c"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("flush of an unacknowledged session: %v", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("flush took %s past its bound", d)
	}
	if tn.last() != 0 {
		t.Fatal("acked while the sink held the request")
	}
	close(f.gate)
	if err := b.FlushSession(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	if tn.last() != 3 {
		t.Fatalf("after flush acked %d, want 3", tn.last())
	}
	if err := b.FlushSession(context.Background(), "unknown"); err != nil {
		t.Fatal(err)
	}
}

func TestMaxDelaySendsAPartialBatch(t *testing.T) {
	f := newFake(true)
	b := batchtest.Start(t, f, testConfig())
	tn := newTenure()
	if err := b.Submit(context.Background(), msg("c", 1), tn, nil); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, "a lone message sent after MaxDelay", func() bool { return tn.last() == 1 })
}

func TestInvalidTenureIsDroppedAndRefused(t *testing.T) {
	f := newFake(true)
	f.gate = make(chan struct{})
	b := batchtest.Start(t, f, testConfig())
	tn := newTenure()
	for seq := int64(1); seq <= 10; seq++ { // one full request, held by the gate
		if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Eventually(t, 5*time.Second, "first request in flight", func() bool { return f.requestCount() == 1 })
	for seq := int64(11); seq <= 15; seq++ {
		if err := b.Submit(context.Background(), msg("c", seq), tn, nil); err != nil {
			t.Fatal(err)
		}
	}
	tn.valid.Store(false)
	close(f.gate)
	testwait.Eventually(t, 5*time.Second, "in-flight request acked, the rest dropped", func() bool {
		return tn.last() == 10 && b.Stats().DroppedInvalid == 5
	})
	tn.valid.Store(true) // trust came back: the tenure stays refused
	if err := b.Submit(context.Background(), msg("c", 16), tn, nil); !errors.Is(err, sink.ErrTenureEnded) {
		t.Fatalf("submit after a drop: %v", err)
	}
	if tn.last() != 10 || f.requestCount() != 1 {
		t.Fatalf("last ack %d, %d requests: dropped entries were sent", tn.last(), f.requestCount())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.FlushSession(ctx, "c"); err != nil {
		t.Fatalf("flush of a session with nothing left: %v", err)
	}
	// A new tenure of the same session is accepted.
	next := newTenure()
	if err := b.Submit(context.Background(), msg("c", 11), next, nil); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, "new tenure acked", func() bool { return next.last() == 11 })
}

func TestHandleWaitsForTheAck(t *testing.T) {
	f := newFake(true)
	b := batchtest.Start(t, f, testConfig())
	if err := b.Handle(context.Background(), msg("c", 1)); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.accepted["c"]) != 1 {
		t.Fatal("Handle returned before the sink accepted")
	}
}

func TestRecordOverTheLimitIsRefused(t *testing.T) {
	b := batchtest.Start(t, newFake(true), testConfig())
	err := b.Submit(context.Background(), sink.Message{ConnectionID: "c", Seq: 1, Data: make([]byte, 101)}, newTenure(), nil)
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("err = %v", err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	l := batch.Limits{MaxCount: 10, MaxBytes: 1000, MaxRecordBytes: 100}
	if err := batch.DefaultConfig().Validate(l); err != nil {
		t.Fatal(err)
	}
	bad := batch.Config{MaxCount: 11, MaxBytes: 50, MaxDelay: -1, SessionBufferBytes: 10}
	err := bad.Validate(l)
	if err == nil {
		t.Fatal("no error")
	}
	bad.BufferBudget, bad.PermanentAttempts = 50, 0
	err = bad.Validate(l)
	for _, want := range []string{"max count", "max bytes", "max delay", "in flight", "session buffer", "buffer budget", "request timeout", "permanent attempts", "retry"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q missing from %v", want, err)
		}
	}
}

// Owed is how long the batcher has held a session's oldest unacknowledged
// message: it grows while the destination holds the request, is 0 for a
// session it holds nothing of, and 0 again once everything is
// acknowledged (the rebalancer moves no session its sink owes long).
func TestOwedGrowsWhileTheDestinationHoldsTheRequest(t *testing.T) {
	f := newFake(true)
	f.gate = make(chan struct{})
	b := batchtest.Start(t, f, testConfig())
	tn := newTenure()
	if err := b.Submit(context.Background(), sink.Message{ConnectionID: "c", Seq: 1, Data: []byte("x")}, tn, nil); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, "owed for 300 ms while the request is held", func() bool { return b.Owed("c") >= 300*time.Millisecond })
	if got := b.Owed("other"); got != 0 {
		t.Fatalf("owed %s for a session the batcher holds nothing of", got)
	}
	close(f.gate)
	testwait.Eventually(t, 5*time.Second, "nothing owed once acknowledged", func() bool { return tn.last() == 1 && b.Owed("c") == 0 })
}
