package sinktest

// The suite's tests, one per property of the sink contract
// (docs/guides/sink.md).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// orderPerSession: the records of each of several sessions, delivered
// concurrently (a session's goroutine each), reach the destination once
// each, in seq order, each with its tenure's epoch.
func orderPerSession(t *testing.T, f Factory) {
	ctx, s := subject(t, f, ReadBack, Order)
	const sessions, n = 3, 40
	tns := make([]*tenure, sessions)
	errs := make(chan error, sessions)
	var wg sync.WaitGroup
	for i := range tns {
		tn := newTenure(s.Handler, fmt.Sprintf("order-%d", i), int64(3+i))
		tns[i] = tn
		wg.Go(func() {
			for seq := int64(1); seq <= n; seq++ {
				if err := tn.offer(ctx, tn.message(seq)); err != nil {
					errs <- fmt.Errorf("%s seq %d: %w", tn.id, seq, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, tn := range tns {
		tn.flush(ctx, t)
		if got := tn.lastAcked(); got != n {
			t.Fatalf("%s: acknowledged up to %d after its flush, want %d", tn.id, got, n)
		}
	}
	got := bySession(s.Read(ctx, t))
	for _, tn := range tns {
		var seqs []int64
		for _, e := range got[tn.id] {
			if e.LeaseEpoch != tn.epoch {
				t.Fatalf("%s seq %d carries lease_epoch %d, its tenure's is %d", tn.id, e.Seq, e.LeaseEpoch, tn.epoch)
			}
			seqs = append(seqs, e.Seq)
		}
		if want := span(1, n); !slices.Equal(seqs, want) {
			t.Fatalf("%s reached the destination as seqs %v, want %v once each, in order", tn.id, seqs, want)
		}
	}
}

// acknowledgedPrefix: what the sink acknowledged (before any flush) is
// already at the destination, and a flush acknowledges everything, never
// going backwards.
func acknowledgedPrefix(t *testing.T, f Factory) {
	ctx, s := subject(t, f, ReadBack)
	tn := newTenure(s.Handler, "prefix", 2)
	tn.deliver(ctx, t, 1, 10)
	tn.waitAcked(t, 10)
	held := positions(s.Read(ctx, t), tn.id)
	for _, seq := range span(1, 10) {
		if held[seq] == 0 {
			t.Fatalf("seq %d was acknowledged, but the destination does not hold it (holds %v)", seq, keys(held))
		}
	}
	tn.deliver(ctx, t, 11, 25)
	tn.flush(ctx, t)
	if got := tn.lastAcked(); got != 25 {
		t.Fatalf("acknowledged up to %d after the flush, want 25", got)
	}
	for seq, n := range positions(s.Read(ctx, t), tn.id) {
		held[seq] += n
	}
	for _, seq := range span(1, 25) {
		if held[seq] == 0 {
			t.Fatalf("seq %d was acknowledged, but the destination does not hold it (holds %v)", seq, keys(held))
		}
	}
}

// refusal: a message the destination refuses for good is reported refused
// (a permanent error, or Tenure.Refused), is not at the destination, and is
// acknowledged past only when the tenure skips it; otherwise the
// acknowledgments end before it.
func refusal(t *testing.T, f Factory, skip bool) {
	ctx, s := subject(t, f, ReadBack, Refusal)
	tn := newTenure(s.Handler, "refusal", 4)
	tn.skip = skip
	tn.deliver(ctx, t, 1, 2)
	err := tn.offer(ctx, s.Refusable(tn.message(3)))
	if err != nil && !sink.IsPermanent(err) {
		t.Fatalf("the refused seq 3 came back as %v: not a permanent refusal (sink.Permanent)", err)
	}
	// A session goes on after a refusal it skips, or one not reported yet
	// (a pipeline reports it later: Tenure.Refused); the pipeline then
	// refuses the tenure once it gave up on seq 3 without skip.
	if err == nil || skip {
		for seq := int64(4); seq <= 5; seq++ {
			err := tn.offer(ctx, tn.message(seq))
			if err != nil && !skip && ended(err) {
				break
			}
			if err != nil {
				t.Fatalf("seq %d after the refused one: %v", seq, err)
			}
		}
	}
	testwait.Eventually(t, Within, "seq 3 reported refused", func() bool { return slices.Contains(tn.refusedSeqs(), 3) })
	tn.flush(ctx, t)
	want := int64(2)
	if skip {
		want = 5
	}
	if got := tn.lastAcked(); got != want {
		t.Fatalf("skip %v: acknowledged up to %d, want %d (refused: %v)", skip, got, want, tn.refusedSeqs())
	}
	held := positions(s.Read(ctx, t), tn.id)
	if held[3] > 0 {
		t.Fatalf("the destination holds the refused seq 3")
	}
	for _, seq := range span(1, want) {
		if seq != 3 && held[seq] == 0 {
			t.Fatalf("seq %d was acknowledged, but the destination does not hold it (holds %v)", seq, keys(held))
		}
	}
}

// requestsEndByTheDeadline: every request the sink writes for a tenure runs
// under a deadline that ends by the tenure's trust deadline, and is written
// before it.
func requestsEndByTheDeadline(t *testing.T, f Factory) {
	ctx, s := subject(t, f, Trust)
	tn := newTenure(s.Handler, "trust", 5)
	deadline := tn.trustDeadline()
	before := len(s.Requests())
	tn.deliver(ctx, t, 1, 20)
	tn.flush(ctx, t)
	tn.waitAcked(t, 20)
	// A wire may record from another goroutine than the one the sink
	// acknowledges from (Wire.Client: the HTTP transport's writer): wait
	// for the record, do not read once.
	var reqs []Request
	testwait.Eventually(t, Within, "a request recorded for 20 messages acknowledged", func() bool {
		reqs = s.Requests()[before:]
		return len(reqs) > 0
	})
	for i, r := range reqs {
		if r.Deadline.IsZero() || r.Deadline.After(deadline) {
			t.Fatalf("request %d ran under the deadline %v (zero: none), after the trust deadline %v", i, r.Deadline, deadline)
		}
		if r.At.After(deadline) {
			t.Fatalf("request %d written at %v, after the trust deadline %v", i, r.At, deadline)
		}
	}
}

// nothingPastTheDeadline: once the tenure's trust deadline passed, the sink
// writes nothing more for it, acknowledges nothing more, and a call ends
// with the typed error: sink.ErrTenureEnded from a pipeline,
// context.DeadlineExceeded from a handler.
func nothingPastTheDeadline(t *testing.T, f Factory) {
	ctx, s := subject(t, f, Trust, ReadBack)
	tn := newTenure(s.Handler, "fenced", 6)
	tn.deliver(ctx, t, 1, 5)
	tn.flush(ctx, t)
	tn.waitAcked(t, 5)
	end := tn.end()
	_, pipelined := s.Handler.(sink.Pipeline)
	want, seq := error(context.DeadlineExceeded), int64(6)
	err := tn.offer(ctx, tn.message(seq))
	if pipelined {
		want = sink.ErrTenureEnded
		// A pipeline may take a message or two (Submit only queues)
		// before its dispatcher dropped the tenure's queued ones.
		testwait.Eventually(t, Within, "a Submit past the trust deadline refused", func() bool {
			if err == nil {
				seq++
				err = tn.offer(ctx, tn.message(seq))
			}
			return err != nil
		})
	}
	if !errors.Is(err, want) {
		t.Fatalf("a call past the trust deadline returned %v, want %v", err, want)
	}
	tn.flush(ctx, t)
	if got := tn.lastAcked(); got != 5 {
		t.Fatalf("acknowledged up to %d, want 5: nothing after the trust deadline", got)
	}
	for i, r := range s.Requests() {
		if r.At.After(end) {
			t.Fatalf("request %d written %v after the trust deadline", i, r.At.Sub(end))
		}
	}
	held := positions(s.Read(ctx, t), tn.id)
	for got := range held {
		if got > 5 {
			t.Fatalf("the destination holds seq %d, offered after the trust deadline", got)
		}
	}
	for _, seq := range span(1, 5) {
		if held[seq] == 0 {
			t.Fatalf("seq %d was acknowledged, but the destination does not hold it", seq)
		}
	}
}

// epochOnEveryRecord: two tenures of one session in turn; every record read
// back carries the lease_epoch of the tenure that delivered it.
func epochOnEveryRecord(t *testing.T, f Factory) {
	ctx, s := subject(t, f, ReadBack)
	first := newTenure(s.Handler, "epoch", 7)
	first.deliver(ctx, t, 1, 3)
	first.flush(ctx, t)
	second := newTenure(s.Handler, "epoch", 8)
	second.deliver(ctx, t, 4, 6)
	second.flush(ctx, t)
	var seqs []int64
	for _, e := range bySession(s.Read(ctx, t))["epoch"] {
		want := first.epoch
		if e.Seq > 3 {
			want = second.epoch
		}
		if e.LeaseEpoch != want {
			t.Fatalf("seq %d carries lease_epoch %d, its tenure's is %d", e.Seq, e.LeaseEpoch, want)
		}
		if e.WorkerID != WorkerID {
			t.Fatalf("seq %d names worker %q, want %q", e.Seq, e.WorkerID, WorkerID)
		}
		seqs = append(seqs, e.Seq)
	}
	slices.Sort(seqs)
	if want := span(1, 6); !slices.Equal(seqs, want) {
		t.Fatalf("read back seqs %v, want %v", seqs, want)
	}
}

// bySession groups envs by session, in the order read.
func bySession(envs []consume.Envelope) map[string][]consume.Envelope {
	m := map[string][]consume.Envelope{}
	for _, e := range envs {
		m[e.ConnectionID] = append(m[e.ConnectionID], e)
	}
	return m
}

// positions counts the records of session id read back, per seq.
func positions(envs []consume.Envelope, id string) map[int64]int {
	m := map[int64]int{}
	for _, e := range envs {
		if e.ConnectionID == id {
			m[e.Seq]++
		}
	}
	return m
}

func keys(m map[int64]int) []int64 {
	ks := make([]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// span is from..to.
func span(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}
