package notify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// batchRecorder records the batches it is sent; the first waits on gate
// when gate is set, and entries whose connection id is in fail fail.
type batchRecorder struct {
	mu      sync.Mutex
	batches [][]string
	gate    chan struct{}
	entered chan struct{}
	fail    map[string]bool
}

func (r *batchRecorder) PublishBatch(_ context.Context, ns []Notification) []error {
	r.mu.Lock()
	first := len(r.batches) == 0
	ids := make([]string, len(ns))
	for i, n := range ns {
		ids[i] = n.ConnectionID
	}
	r.batches = append(r.batches, ids)
	r.mu.Unlock()
	if first && r.gate != nil {
		close(r.entered)
		<-r.gate
	}
	errs := make([]error, len(ns))
	for i, n := range ns {
		if r.fail[n.ConnectionID] {
			errs[i] = fmt.Errorf("refused %s", n.ConnectionID)
		}
	}
	return errs
}

func start(id string) Notification { return Notification{Type: "start", ConnectionID: id} }

func TestCoalescerSendsALoneCallAtOnce(t *testing.T) {
	r := &batchRecorder{}
	c := NewCoalescer(r, 10, 2)
	if err := c.Publish(context.Background(), start("a")); err != nil {
		t.Fatal(err)
	}
	if len(r.batches) != 1 || len(r.batches[0]) != 1 {
		t.Fatalf("batches %v, want [[a]]", r.batches)
	}
}

// While one batch is in flight (one sender allowed), 25 more calls wait and
// go out in batches of at most 10, each call getting its own outcome.
func TestCoalescerBatchesCallsWaitingForASender(t *testing.T) {
	r := &batchRecorder{gate: make(chan struct{}), entered: make(chan struct{}), fail: map[string]bool{"c7": true}}
	c := NewCoalescer(r, 10, 1)
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { first <- c.Publish(ctx, start("first")) }()
	<-r.entered
	var wg sync.WaitGroup
	errs := make([]error, 25)
	for i := range errs {
		wg.Go(func() { errs[i] = c.Publish(ctx, start(fmt.Sprintf("c%d", i))) })
	}
	// Every call is queued before the gate opens.
	for deadline := time.Now().Add(5 * time.Second); ; {
		c.mu.Lock()
		n := len(c.queue)
		c.mu.Unlock()
		if n == 25 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 25 calls queued", n)
		}
		time.Sleep(time.Millisecond)
	}
	close(r.gate)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if (i == 7) != (err != nil) {
			t.Fatalf("call c%d: %v", i, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sizes := []int{}
	sent := 0
	for _, b := range r.batches {
		sizes = append(sizes, len(b))
		sent += len(b)
	}
	if len(r.batches) != 4 || sent != 26 {
		t.Fatalf("batch sizes %v, want [1 10 10 5]", sizes)
	}
	for _, n := range sizes {
		if n > 10 {
			t.Fatalf("batch sizes %v exceed 10", sizes)
		}
	}
}

func TestCoalescerDoesNotSendForACallerThatGaveUp(t *testing.T) {
	r := &batchRecorder{gate: make(chan struct{}), entered: make(chan struct{})}
	c := NewCoalescer(r, 10, 1)
	first := make(chan error, 1)
	go func() { first <- c.Publish(context.Background(), start("first")) }()
	<-r.entered
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- c.Publish(ctx, start("late")) }()
	for {
		c.mu.Lock()
		n := len(c.queue)
		c.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("gave up with %v", err)
	}
	close(r.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.batches) != 1 {
		t.Fatalf("batches %v: the abandoned call was sent", r.batches)
	}
}
