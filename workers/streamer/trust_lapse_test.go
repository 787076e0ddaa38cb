package streamer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// brownoutDest is an unordered batched destination (a standard SQS queue)
// that, during a brownout, refuses every odd seq (transiently: throttling)
// and takes the others, and records the deadline of every request sent
// meanwhile. A request whose context ended writes nothing.
type brownoutDest struct {
	brownout atomic.Bool
	mu       sync.Mutex
	written  map[string]map[int64]bool
	during   []time.Time // deadlines of the requests sent during the brownout
	noDL     int
}

func (d *brownoutDest) Encode(m sink.Message) (batch.Record, error) {
	return batch.Record{ConnectionID: m.ConnectionID, Seq: m.Seq, Epoch: m.LeaseEpoch, Body: sink.AppendJSON(nil, m)}, nil
}
func (d *brownoutDest) Limits() batch.Limits {
	return batch.Limits{MaxCount: 10, MaxBytes: 1 << 20, MaxRecordBytes: 1 << 20}
}
func (d *brownoutDest) Ordered() bool           { return false }
func (d *brownoutDest) Size(r batch.Record) int { return len(r.Body) }

func (d *brownoutDest) Send(ctx context.Context, recs []batch.Record) ([]error, error) {
	brown := d.brownout.Load()
	dl, ok := ctx.Deadline()
	d.mu.Lock()
	defer d.mu.Unlock()
	if !ok {
		d.noDL++
	}
	if brown {
		d.during = append(d.during, dl)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var failed []error
	for i, r := range recs {
		if brown && r.Seq%2 == 1 {
			if failed == nil {
				failed = make([]error, len(recs))
			}
			// A throttle, as the real sinks mark one (sink.Throttled): a
			// brownout's refusals never count as an entry failing the same
			// way (batch.Config.RepeatFailures), so the entries wait for the
			// trust deadline instead of being refused for good.
			failed[i] = sink.Throttled(fmt.Errorf("ThrottlingException: seq %d", r.Seq))
			continue
		}
		if d.written[r.ConnectionID] == nil {
			d.written[r.ConnectionID] = map[int64]bool{}
		}
		d.written[r.ConnectionID][r.Seq] = true
	}
	return failed, nil
}

// prefix is the end of the contiguous run of seqs from 1 at the destination.
func (d *brownoutDest) prefix(id string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := int64(0)
	for d.written[id][n+1] {
		n++
	}
	return n
}

func (d *brownoutDest) count(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.written[id])
}

// Issue 22, findings 1 and 2 on the real engines: during a sink brownout
// (odd seqs refused, even ones written) the worker's DynamoDB path freezes,
// its trust lapses (the refused entries are dropped) and comes back. No
// sink request sent meanwhile may run past the trust deadline, no
// checkpoint or release may pass a seq missing at the destination, and the
// session, once stopped, has everything up to its release_seq at the
// destination: nothing acknowledged is lost.
func TestTrustLapseNeverCheckpointsPastAMissingSeq(t *testing.T) {
	e := newEnv(t)
	proxy := e.tableProxy()
	dest := &brownoutDest{written: map[string]map[int64]bool{}}
	cfg := testConfig("x")
	var batcher *batch.Batcher
	e.handlerFor = func(string) sink.Handler {
		bc := batch.DefaultConfig()
		bc.RequestTimeout = cfg.SafetyMargin / 2
		bc.Retry.Base, bc.Retry.Max = 100*time.Millisecond, 100*time.Millisecond
		b, err := batch.New(dest, bc, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		batcher = b
		return b // the worker runs it
	}
	a := e.worker(nil)
	id := e.session(nil)
	e.notify(schema.NotifyStart, id)
	testwait.Eventually(t, 5*time.Second+slack, "streaming and checkpointed", func() bool {
		return dest.count(id) >= 20 && e.item(id).LastSeq != lease.NoSeq
	})

	// Every checkpoint the table holds, sampled, is compared with the
	// destination's contiguous prefix at the end (the destination only grows).
	var mu sync.Mutex
	var ckpts []int64
	sample, stopSampling := context.WithCancel(context.Background())
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-sample.Done():
				return
			case <-tk.C:
				if it, err := dynamostoreGet(e, id); err == nil {
					mu.Lock()
					ckpts = append(ckpts, it.LastSeq, it.ReleaseSeq)
					mu.Unlock()
				}
			}
		}
	})

	dest.brownout.Store(true)
	frozen := time.Now()
	proxy.Freeze()
	// a's last successful heartbeat was sent before the freeze.
	fence := frozen.Add(cfg.LeaseTTL - cfg.SafetyMargin)
	testwait.Eventually(t, cfg.LeaseTTL+slack, "the refused entries dropped once trust lapsed", func() bool {
		return batcher.Stats().DroppedInvalid > 0
	})
	proxy.Thaw()
	dest.brownout.Store(false)
	// Trust comes back (a's heartbeats reach the table again); its audit
	// takes the session back and streams on from the last checkpoint.
	testwait.Eventually(t, 10*time.Second+slack, "a streams again", func() bool {
		return a.owns(id) && dest.prefix(id) >= 40
	})
	e.stop(id)
	testwait.Eventually(t, 5*time.Second+slack, "the session released", func() bool {
		return e.item(id).Owner == "" && !a.owns(id)
	})
	stopSampling()
	sampler.Wait()

	final := e.item(id)
	prefix := dest.prefix(id)
	if final.LastSeq > prefix || final.ReleaseSeq > prefix {
		t.Fatalf("released with last_seq %d / release_seq %d past seq %d, missing at the destination", final.LastSeq, final.ReleaseSeq, prefix+1)
	}
	mu.Lock()
	for _, c := range ckpts {
		if c > prefix {
			t.Errorf("a checkpoint of %d was stored while seq %d is missing at the destination", c, prefix+1)
			break
		}
	}
	mu.Unlock()
	dest.mu.Lock()
	defer dest.mu.Unlock()
	if dest.noDL > 0 {
		t.Fatalf("%d sink requests without a deadline", dest.noDL)
	}
	late := slices.IndexFunc(dest.during, func(dl time.Time) bool { return dl.After(fence) })
	if late >= 0 {
		t.Fatalf("a sink request sent during the outage had its deadline %v, %s after the trust deadline", dest.during[late], dest.during[late].Sub(fence))
	}
	t.Logf("release_seq %d, destination prefix %d, %d requests during the brownout, %d entries dropped",
		final.ReleaseSeq, prefix, len(dest.during), batcher.Stats().DroppedInvalid)
}

func dynamostoreGet(e *env, id string) (lease.Item, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return dynamostore.New(e.db, e.table).Get(ctx, id)
}

// A worker whose trust lapsed (its DynamoDB path frozen past TTL − margin,
// nobody to declare it dead) closes its sessions and leaves them in the
// table under its name. The first heartbeat that succeeds once the path
// heals claims them back at once (the audit, kicked), not at the next
// reconcile pass: with a pass a minute, they stream again within a
// heartbeat, a store call and a claim.
func TestTrustBackClaimsItsSessionsAtOnce(t *testing.T) {
	e := newEnv(t)
	proxy := e.tableProxy()
	a := e.worker(func(c *Config) { c.ReconcileEvery = time.Minute })
	e.workerDB = nil
	ids := e.streamOn(a, 3, 3)
	epochs := map[string]int64{}
	for _, id := range ids {
		epochs[id] = e.item(id).Epoch
	}
	cfg := testConfig("x")
	proxy.Freeze()
	testwait.Eventually(t, cfg.LeaseTTL+slack, "a closed all 3 (fenced)", func() bool {
		for _, id := range ids {
			if a.owns(id) {
				return false
			}
		}
		return true
	})
	counts := map[string]int{}
	for _, id := range ids {
		counts[id] = e.sink.count(id)
	}
	passes := a.recon.Passes()
	proxy.Thaw()
	thawed := time.Now()
	testwait.Eventually(t, cfg.HeartbeatEvery+2*testRPC+slack, "a streams all 3 again", func() bool {
		for _, id := range ids {
			if !a.owns(id) || e.sink.count(id) < counts[id]+3 {
				return false
			}
		}
		return true
	})
	t.Logf("all 3 streaming again %s after the path healed (reconcile passes meanwhile: %d)",
		time.Since(thawed).Round(time.Millisecond), a.recon.Passes()-passes)
	for _, id := range ids {
		it := e.item(id)
		if it.Owner != a.ID() || it.Epoch <= epochs[id] {
			t.Errorf("%s: owner %q at epoch %d after the lapse, want %s above epoch %d", id, it.Owner, it.Epoch, a.ID(), epochs[id])
		}
	}
}
