package streamer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// destination is a batch.Sender standing for a remote sink with latency:
// what it accepts is recorded in rec (the destination's content). Every
// 7th seq fails its first attempt (a partial failure), the poisoned seq
// (when not 0) fails every attempt the same way, and a request whose
// context ends (the worker died) records nothing.
type destination struct {
	rec      *recSink
	latency  time.Duration
	poisoned int64

	mu          sync.Mutex
	refused     map[string]bool
	poisonFails int
}

func (d *destination) Encode(m sink.Message) (batch.Record, error) {
	return batch.Record{ConnectionID: m.ConnectionID, Seq: m.Seq, Body: sink.AppendJSON(nil, m)}, nil
}
func (d *destination) Limits() batch.Limits {
	return batch.Limits{MaxCount: 10, MaxBytes: 1 << 20, MaxRecordBytes: 1 << 20}
}
func (d *destination) Ordered() bool           { return true }
func (d *destination) Size(r batch.Record) int { return len(r.Body) }

func (d *destination) Send(ctx context.Context, recs []batch.Record) ([]error, error) {
	t := time.NewTimer(d.latency)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var failed []error
	for i, r := range recs {
		key := fmt.Sprintf("%s:%d", r.ConnectionID, r.Seq)
		if failed == nil && ((r.Seq%7 == 0 && !d.refused[key]) || r.Seq == d.poisoned) {
			failed = make([]error, len(recs))
		}
		if r.Seq == d.poisoned && d.poisoned != 0 {
			d.poisonFails++
			failed[i] = errors.New("InternalError: poisoned")
			continue
		}
		if r.Seq%7 == 0 && !d.refused[key] {
			d.refused[key] = true
			failed[i] = fmt.Errorf("refused %s once", key)
			continue
		}
		var env struct {
			Seq        int64  `json:"seq"`
			LeaseEpoch int64  `json:"lease_epoch"`
			WorkerID   string `json:"worker_id"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil {
			return nil, err
		}
		_ = d.rec.Handle(ctx, sink.Message{ConnectionID: r.ConnectionID, Seq: env.Seq, LeaseEpoch: env.LeaseEpoch, WorkerID: env.WorkerID})
	}
	return failed, nil
}

func (d *destination) poisonFailures() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.poisonFails
}

func (d *destination) refusals() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.refused)
}

// A worker whose sink is batched (requests in flight, partial failures)
// is killed: every message it checkpointed is at the destination, and the
// successor replays exactly from the checkpoint.
func TestCrashMidBatchLosesNothingAcknowledged(t *testing.T) {
	e := newEnv(t)
	dest := &destination{rec: e.sink, latency: 30 * time.Millisecond, refused: map[string]bool{}}
	e.handlerFor = func(workerID string) sink.Handler {
		cfg := batch.DefaultConfig()
		cfg.RequestTimeout = testConfig("x").SafetyMargin / 2
		b, err := batch.New(dest, cfg, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		return b // the worker runs it, and stops it when its Run returns
	}
	a := e.worker(nil)
	id := e.session(nil)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 2*time.Second+slack, "a's first checkpoint", func() bool { return e.item(id).LastSeq != lease.NoSeq })
	b := e.worker(nil)
	testwait.Eventually(t, 5*time.Second, "a refused entry retried", func() bool { return dest.refusals() >= 1 })
	// Mid-batch: a holds messages the destination has not acknowledged.
	testwait.Eventually(t, 5*time.Second, "a message in flight", func() bool {
		ss := a.snapshot()
		return len(ss) == 1 && ss[0].LastSeq() > maxSeq(byWorker(e.sink.get(id), a.ID()))
	})
	a.kill() // the process is gone: its batcher stopped with it, its requests in flight cancelled
	ckpt := e.item(id).LastSeq
	atDest := seqSet(byWorker(e.sink.get(id), a.ID()))
	for seq := int64(1); seq <= ckpt; seq++ {
		if !atDest[seq] {
			t.Fatalf("seq %d checkpointed (checkpoint %d) but not at the destination: acknowledged message lost", seq, ckpt)
		}
	}
	testwait.Eventually(t, testTTL+testHeartbeat/2+slack, "b's messages after the crash", func() bool {
		return len(byWorker(e.sink.get(id), b.ID())) >= 20
	})
	// A refused entry lands after its request's others (b's first record
	// may be such a retry): b's records are contiguous from the checkpoint
	// once its retries are in, with no duplicate.
	testwait.Eventually(t, 5*time.Second, "b's first 20 records contiguous from the checkpoint", func() bool {
		seqs := sortedSeqs(byWorker(e.sink.get(id), b.ID()))
		for i := 1; i < 20; i++ {
			if seqs[i] != seqs[0]+int64(i) {
				return false
			}
		}
		return seqs[0] == ckpt+1
	})
	if seqs := sortedSeqs(byWorker(e.sink.get(id), b.ID())); len(slices.Compact(slices.Clone(seqs))) != len(seqs) {
		t.Fatal("b wrote a record twice")
	}
	t.Logf("checkpoint %d, a's highest at the destination %d, b replayed from %d, %d entries refused once",
		ckpt, maxSeq(byWorker(e.sink.get(id), a.ID())), sortedSeqs(byWorker(e.sink.get(id), b.ID()))[0], dest.refusals())
}

func seqSet(ds []delivery) map[int64]bool {
	m := map[int64]bool{}
	for _, d := range ds {
		m[d.seq] = true
	}
	return m
}

func sortedSeqs(ds []delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.seq
	}
	slices.Sort(out)
	return out
}

func maxSeq(ds []delivery) int64 {
	m := lease.NoSeq
	for _, d := range ds {
		m = max(m, d.seq)
	}
	return m
}
