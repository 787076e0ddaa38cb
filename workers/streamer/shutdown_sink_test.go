package streamer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// hangingDest never answers: each request holds until its context ends.
type hangingDest struct {
	inflight, requests atomic.Int64
	noDeadline         atomic.Int64
}

func (d *hangingDest) Encode(m sink.Message) (batch.Record, error) {
	return batch.Record{ConnectionID: m.ConnectionID, Seq: m.Seq, Body: sink.AppendJSON(nil, m)}, nil
}
func (d *hangingDest) Limits() batch.Limits {
	return batch.Limits{MaxCount: 10, MaxBytes: 1 << 20, MaxRecordBytes: 1 << 20}
}
func (d *hangingDest) Ordered() bool           { return true }
func (d *hangingDest) Size(r batch.Record) int { return len(r.Body) }
func (d *hangingDest) Send(ctx context.Context, _ []batch.Record) ([]error, error) {
	if _, ok := ctx.Deadline(); !ok {
		d.noDeadline.Add(1)
	}
	d.requests.Add(1)
	d.inflight.Add(1)
	defer d.inflight.Add(-1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// Issue 22, finding 2 at shutdown: the flush of a session whose sink hangs
// times out and the session is abandoned; the worker marks itself LEFT
// (which lets others take the session at once) only once no sink request
// of its own is in flight.
func TestShutdownLeavesOnlyWithNoSinkRequestInFlight(t *testing.T) {
	dest := &hangingDest{}
	bc := batch.DefaultConfig()
	bc.RequestTimeout = testConfig("x").SafetyMargin / 2
	bc.Retry.Base, bc.Retry.Max = time.Millisecond, time.Millisecond // requests back to back
	b, err := batch.New(dest, bc, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	m := startMem(t, 1, nil, b) // the worker runs the batcher
	testwait.Eventually(t, 5*time.Second, "sink requests in flight", func() bool { return dest.requests.Load() >= 3 })
	var leaveSeen, inflightAtLeave atomic.Int64
	leaveSeen.Store(-1)
	m.store.SetFail(func(op string) (error, bool) {
		if op == "leave" {
			leaveSeen.Store(1)
			inflightAtLeave.Store(dest.inflight.Load())
		}
		return nil, false
	})
	m.cancel()
	err = <-m.done
	m.done <- err // for the cleanup
	if leaveSeen.Load() != 1 {
		t.Fatalf("the worker never marked itself LEFT (Run: %v)", err)
	}
	if n := inflightAtLeave.Load(); n != 0 {
		t.Fatalf("LEFT written with %d sink requests in flight", n)
	}
	if n := dest.noDeadline.Load(); n != 0 {
		t.Fatalf("%d sink requests without a deadline", n)
	}
}
