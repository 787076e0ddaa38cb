//go:build fleetsim

package fleetsim

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/wsfleet/wsfleet/shared/draw"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/testkit/memqueue"
)

// defaultQueue is the fleet's work queue: the infra's visibility timeout
// (30 s, infra/stacks WorkQueueVisible), the worker's long-poll wait
// (WSFLEET_QUEUE_WAIT, 10 s), and a latency per call of 5 to 20 ms drawn
// from the seed.
func defaultQueue(seed uint64) memqueue.Config {
	return memqueue.Config{
		Visibility: 30 * time.Second, Wait: 10 * time.Second,
		LatencyMin: 5 * time.Millisecond, LatencyMax: 20 * time.Millisecond, Seed: seed,
	}
}

// memberQueue is one worker's view of the fleet's work queue (its
// Deps.Queue): cut off at once by a kill -9, as its table is (a message it
// had received stays invisible until the visibility timeout, as one a
// crashed process took does).
type memberQueue struct {
	q   *memqueue.Queue
	cut atomic.Bool
	// lat draws each call's latency in [latMin, latMax] from the worker's
	// own stream (the seed and its id), not from the queue's one stream:
	// the draws of one worker do not depend on how the workers' calls
	// interleave at one virtual instant.
	lat            *draw.Stream
	latMin, latMax time.Duration
	// who is the worker; watch, when set, notes its calls on the watched
	// sessions (watch.go).
	who   string
	watch *watcher
}

// noted is err of call on n's session, noted when it is watched.
func (m *memberQueue) noted(call string, n notify.Notification, err error) error {
	m.watch.note(n.ConnectionID, m.who, call, err, "%s gen %d prev %s@%d", n.Type, n.Generation, n.PrevOwner, n.PrevEpoch)
	return err
}

// latency waits one call's latency (none when latMax is 0).
func (m *memberQueue) latency(ctx context.Context) error {
	if m.latMax <= 0 {
		return ctx.Err()
	}
	d := m.latMin + time.Duration(m.lat.Int64N(int64(m.latMax-m.latMin)+1))
	t := time.NewTimer(d) // the bubble's clock: virtual
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var (
	_ notify.Consumer       = (*memberQueue)(nil)
	_ notify.BatchPublisher = (*memberQueue)(nil)
)

func (m *memberQueue) Publish(ctx context.Context, n notify.Notification) error {
	if err := m.latency(ctx); err != nil {
		return err
	}
	if m.cut.Load() {
		return errKilled
	}
	return m.noted("publish", n, m.q.Publish(ctx, n))
}

func (m *memberQueue) PublishBatch(ctx context.Context, ns []notify.Notification) []error {
	if err := m.latency(ctx); err != nil {
		errs := make([]error, len(ns))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if m.cut.Load() {
		errs := make([]error, len(ns))
		for i := range errs {
			errs[i] = errKilled
		}
		return errs
	}
	errs := m.q.PublishBatch(ctx, ns)
	if m.watch != nil {
		for i, n := range ns {
			m.noted("publish", n, errs[i])
		}
	}
	return errs
}

func (m *memberQueue) Receive(ctx context.Context, n int) ([]notify.Message, error) {
	if err := m.latency(ctx); err != nil {
		return nil, err
	}
	if m.cut.Load() {
		return nil, errKilled
	}
	msgs, err := m.q.Receive(ctx, n)
	if m.watch != nil {
		for _, msg := range msgs {
			m.noted(fmt.Sprintf("receive (count %d)", msg.ReceiveCount), msg.Notification, msg.Err)
		}
	}
	return msgs, err
}

func (m *memberQueue) Delete(ctx context.Context, ms ...notify.Message) error {
	if err := m.latency(ctx); err != nil {
		return err
	}
	if m.cut.Load() {
		return errKilled
	}
	err := m.q.Delete(ctx, ms...)
	if m.watch != nil {
		for _, msg := range ms {
			m.noted("delete", msg.Notification, err)
		}
	}
	return err
}

func (m *memberQueue) Requeue(ctx context.Context, msg notify.Message, after time.Duration) error {
	if err := m.latency(ctx); err != nil {
		return err
	}
	if m.cut.Load() {
		return errKilled
	}
	err := m.q.Requeue(ctx, msg, after)
	if m.watch != nil {
		m.noted("requeue after "+after.String(), msg.Notification, err)
	}
	return err
}

// announce publishes a start notification per id, as ingest does after it
// writes a session (functions/ingest's publish: type, id, generation, the
// time sent), in batches of notify.MaxBatch. A notification is a hint: one
// not sent is found by reconciliation, so a failure is returned, not
// retried.
func (fl *Fleet) announce(typ string, ids []string, generation int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), notify.MaxBatch)]
		ids = ids[len(chunk):]
		ns := make([]notify.Notification, len(chunk))
		for i, id := range chunk {
			ns[i] = notify.Notification{Type: typ, ConnectionID: id, Generation: generation, SentAtMs: time.Now().UnixMilli()}
		}
		for i, err := range fl.queue.PublishBatch(ctx, ns) {
			if err != nil {
				return fmt.Errorf("fleetsim: %s notification of %s: %w", typ, chunk[i], err)
			}
		}
	}
	return nil
}

// QueueStats are the work queue's counts so far.
func (fl *Fleet) QueueStats() memqueue.Stats { return fl.queue.Stats() }
