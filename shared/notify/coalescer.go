package notify

import (
	"context"
	"sync"
	"sync/atomic"
)

// Coalescer is a Publisher that sends concurrent Publish calls together,
// as a group commit: a call finding fewer than MaxSenders batches in flight
// sends at once (alone, when nothing else waits: no added latency), and
// the calls arriving meanwhile go out together in the next batch. A worker
// handing off all its sessions at shutdown thus sends tens of requests
// instead of one per session.
type Coalescer struct {
	next       BatchPublisher
	maxBatch   int
	maxSenders int

	mu      sync.Mutex
	queue   []*pending
	senders int
}

type pending struct {
	ctx  context.Context
	n    Notification
	done chan error
}

// NewCoalescer returns a Coalescer on next sending batches of up to
// maxBatch (SQS: 10) with up to maxSenders requests in flight.
func NewCoalescer(next BatchPublisher, maxBatch, maxSenders int) *Coalescer {
	return &Coalescer{next: next, maxBatch: max(maxBatch, 1), maxSenders: max(maxSenders, 1)}
}

// Publish queues n and returns its outcome once its batch was sent (or
// ctx's error when ctx ends first; n may still be sent).
func (c *Coalescer) Publish(ctx context.Context, n Notification) error {
	p := &pending{ctx: ctx, n: n, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	lead := c.senders < c.maxSenders
	if lead {
		c.senders++
	}
	c.mu.Unlock()
	if lead {
		c.send()
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send sends batches until the queue is empty.
func (c *Coalescer) send() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.senders--
			c.mu.Unlock()
			return
		}
		k := min(len(c.queue), c.maxBatch)
		batch := c.queue[:k:k]
		c.queue = c.queue[k:]
		c.mu.Unlock()

		live := batch[:0:0]
		for _, p := range batch {
			if err := p.ctx.Err(); err != nil {
				p.done <- err
				continue
			}
			live = append(live, p)
		}
		if len(live) == 0 {
			continue
		}
		ctx, cancel := batchContext(live)
		ns := make([]Notification, len(live))
		for i, p := range live {
			ns[i] = p.n
		}
		errs := c.next.PublishBatch(ctx, ns)
		cancel()
		for i, p := range live {
			var err error
			if i < len(errs) {
				err = errs[i]
			}
			p.done <- err
		}
	}
}

// batchContext is done when every caller's context in batch is done (the
// batch is still wanted while one caller waits).
func batchContext(batch []*pending) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	var left atomic.Int64
	left.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, p := range batch {
		stops[i] = context.AfterFunc(p.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

var _ Publisher = (*Coalescer)(nil)
