package session

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// The anchor comes before the first delivery: while the table throttles
// every checkpoint, a resumable session without one is connected and
// delivers nothing; once the anchor lands it delivers from the first seq
// its connection got (the message waited, nothing was dropped), and the
// table holds the seq before it. A session ending while its anchor waits
// ends at once, having delivered nothing; a reconnect after the anchor
// resumes from the first seq.
func TestAnchorComesBeforeTheFirstDelivery(t *testing.T) {
	f := newFeed(t, feed.Config{Rate: 50})
	h := newHarness(t, testConfig())
	h.env.Anchor = h.keeper.Anchor
	var throttled atomic.Bool
	throttled.Store(true)
	h.store.SetFail(func(op string) (error, bool) {
		if op == "checkpoint" && throttled.Load() {
			return fmt.Errorf("checkpoint: %w", lease.ErrThrottled), false
		}
		return nil, false
	})
	h.put("s1", f.URL("s1"), nil)
	s, done := h.start("s1")
	testwait.Eventually(t, 5*time.Second, "s1 connected", func() bool { return s.Status().Connected })
	testwait.Holds(t, time.Second, "nothing delivered while the anchor is throttled", func() bool { return h.rec.count() == 0 })
	throttled.Store(false)
	testwait.Eventually(t, 5*time.Second, "deliveries once the anchor landed", func() bool { return h.rec.count() >= 20 })
	seqs := h.rec.seqs()
	contiguous(t, seqs)
	if recs := f.Records("s1"); len(recs) != 1 || seqs[0] != recs[0].FirstSeq {
		t.Fatalf("first delivered %d, connection %+v: want its first seq", seqs[0], recs)
	}
	if it, _ := h.store.Get(context.Background(), "s1"); it.LastSeq != seqs[0]-1 {
		t.Fatalf("stored last_seq %d, want the anchor %d", it.LastSeq, seqs[0]-1)
	}
	f.Drop("s1", 0)
	testwait.Eventually(t, 5*time.Second, "a reconnect", func() bool { return len(f.Records("s1")) >= 2 })
	if from := f.Records("s1")[1].From; from < seqs[0] {
		t.Fatalf("reconnected from %d, want at least the first seq %d", from, seqs[0])
	}
	s.Interrupt(ErrShutdown)
	_ = wait(t, done, 5*time.Second)

	// Ended while the anchor waits.
	throttled.Store(true)
	h.put("s2", f.URL("s2"), nil)
	s2, done2 := h.start("s2")
	testwait.Eventually(t, 5*time.Second, "s2 connected and past its first message", func() bool {
		recs := f.Records("s2")
		return s2.Status().Connected && len(recs) == 1 && recs[0].LastSeq >= recs[0].FirstSeq
	})
	before := h.rec.count()
	stopped := time.Now()
	s2.Interrupt(ErrStopRequested)
	if err := wait(t, done2, 2*time.Second); !errors.Is(err, ErrStopRequested) {
		t.Fatalf("Run = %v, want the stop", err)
	}
	if took := time.Since(stopped); took > time.Second || h.rec.count() != before {
		t.Fatalf("s2 ended %s after its stop, %d delivered: want at once, nothing", took, h.rec.count()-before)
	}
}
