package memqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/schema"
)

func start(id string) notify.Notification {
	return notify.Notification{Type: schema.NotifyStart, ConnectionID: id, Generation: 1}
}

func ids(ms []notify.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Notification.ConnectionID
	}
	return out
}

// A message not deleted within the visibility timeout is delivered again
// (a new receipt, its receive count up); a delete with the old receipt
// deletes nothing, one with the latest deletes it.
func TestRedeliveredAfterVisibilityTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := New(Config{Visibility: 30 * time.Second, Wait: 5 * time.Second})
		defer q.Close()
		if err := q.Publish(ctx, start("a")); err != nil {
			t.Fatal(err)
		}
		first, err := q.Receive(ctx, 10)
		if err != nil || len(first) != 1 || first[0].ReceiveCount != 1 {
			t.Fatalf("first receive: %v %+v", err, first)
		}
		t0 := time.Now()
		// Invisible: polls come back empty until the timeout passes.
		var again []notify.Message
		for len(again) == 0 {
			if again, err = q.Receive(ctx, 10); err != nil {
				t.Fatal(err)
			}
		}
		if waited := time.Since(t0); waited != 30*time.Second {
			t.Errorf("delivered again after %s, want the visibility timeout (30s)", waited)
		}
		if again[0].ReceiveCount != 2 || again[0].Receipt == first[0].Receipt || again[0].MessageID != first[0].MessageID {
			t.Fatalf("redelivery %+v after %+v", again[0], first[0])
		}
		if err := q.Delete(ctx, first[0]); err != nil || q.Len() != 1 {
			t.Fatalf("a stale receipt: %v, %d left (want no error and nothing deleted)", err, q.Len())
		}
		if err := q.Delete(ctx, again[0]); err != nil || q.Len() != 0 {
			t.Fatalf("the latest receipt: %v, %d left", err, q.Len())
		}
	})
}

// Receives already waiting get the messages, the longest waiting first; a
// requeued message goes to the next waiting receive at once; a poll with
// nothing returns empty after the wait.
func TestWaitingReceivesServedInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := New(Config{Wait: 10 * time.Second})
		got := make([]chan []notify.Message, 3)
		for i := range got {
			got[i] = make(chan []notify.Message, 1)
			go func() {
				ms, err := q.Receive(ctx, 10)
				if err != nil {
					t.Error(err)
				}
				got[i] <- ms
			}()
			synctest.Wait() // receive i waits before receive i+1
		}
		if errs := q.PublishBatch(ctx, []notify.Notification{start("a"), start("b")}); errors.Join(errs...) != nil {
			t.Fatal(errs)
		}
		a, b := <-got[0], <-got[1]
		if len(a) != 1 || len(b) != 1 || ids(a)[0] != "a" || ids(b)[0] != "b" {
			t.Fatalf("first waiter %v, second %v: want a, b", ids(a), ids(b))
		}
		if err := q.Requeue(ctx, a[0], 0); err != nil {
			t.Fatal(err)
		}
		if c := <-got[2]; len(c) != 1 || c[0].MessageID != a[0].MessageID || c[0].ReceiveCount != 2 {
			t.Fatalf("third waiter %+v: want a, requeued", c)
		}
		t0 := time.Now()
		ms, err := q.Receive(ctx, 10)
		if err != nil || len(ms) != 0 || time.Since(t0) != 10*time.Second {
			t.Fatalf("empty poll: %v %v after %s, want none after the 10s wait", ids(ms), err, time.Since(t0))
		}
		q.Close()
		if _, err := q.Receive(ctx, 1); !errors.Is(err, ErrClosed) {
			t.Fatalf("receive after Close: %v", err)
		}
	})
}

// A message handed back with a delay stays invisible for it, and a receive
// waiting meanwhile gets it when it becomes visible (not at its poll's end).
func TestRequeueAfterADelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := New(Config{Wait: 10 * time.Second})
		if err := q.Publish(ctx, start("a")); err != nil {
			t.Fatal(err)
		}
		ms, err := q.Receive(ctx, 10)
		if err != nil || len(ms) != 1 {
			t.Fatalf("receive: %v %v", ids(ms), err)
		}
		t0 := time.Now()
		if err := q.Requeue(ctx, ms[0], 3*time.Second); err != nil {
			t.Fatal(err)
		}
		again, err := q.Receive(ctx, 10)
		if err != nil || len(again) != 1 || again[0].MessageID != ms[0].MessageID {
			t.Fatalf("receive after the hand-back: %v %v", ids(again), err)
		}
		if d := time.Since(t0); d != 3*time.Second {
			t.Fatalf("visible again after %s, want 3s", d)
		}
		q.Close()
	})
}

// Deletes in any order, past the compaction of the deleted ones, leave the
// others in the order sent: a requeue makes them visible again and they
// come back first to last; a delete with a receipt of a message already
// deleted, and one with a receipt older than the latest, delete nothing.
func TestDeletesInAnyOrderKeepTheRestInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := New(Config{Wait: -1})
		defer q.Close()
		const n = 1000
		for i := 0; i < n; i += notify.MaxBatch {
			batch := make([]notify.Notification, notify.MaxBatch)
			for j := range batch {
				batch[j] = start(fmt.Sprintf("s-%04d", i+j))
			}
			for _, err := range q.PublishBatch(ctx, batch) {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		var got []notify.Message
		for len(got) < n {
			ms, err := q.Receive(ctx, notify.MaxBatch)
			if err != nil || len(ms) == 0 {
				t.Fatalf("receive after %d: %d messages, %v", len(got), len(ms), err)
			}
			got = append(got, ms...)
		}
		// Delete every message whose index is not a multiple of 7, from
		// the last to the first, then the multiples of 7 below 350 from
		// the first: the gone ones outnumber the rest many times over.
		var kept []string
		for i := n - 1; i >= 0; i-- {
			if i%7 != 0 {
				if err := q.Delete(ctx, got[i]); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i := 0; i < n; i += 7 {
			if i < 350 {
				if err := q.Delete(ctx, got[i]); err != nil {
					t.Fatal(err)
				}
				continue
			}
			kept = append(kept, got[i].Notification.ConnectionID)
		}
		if q.Len() != len(kept) {
			t.Fatalf("%d left, want %d", q.Len(), len(kept))
		}
		if err := q.Delete(ctx, got[1]); err != nil || q.Len() != len(kept) {
			t.Fatalf("a deleted message's receipt again: %v, %d left, want %d", err, q.Len(), len(kept))
		}
		for i := 350; i < n; i += 7 {
			if err := q.Requeue(ctx, got[i], 0); err != nil {
				t.Fatal(err)
			}
		}
		var again []notify.Message
		for len(again) < len(kept) {
			ms, err := q.Receive(ctx, notify.MaxBatch)
			if err != nil || len(ms) == 0 {
				t.Fatalf("receive again after %d: %d messages, %v", len(again), len(ms), err)
			}
			again = append(again, ms...)
		}
		if g := ids(again); !slices.Equal(g, kept) {
			t.Fatalf("after the deletes: %v…, want %v…", g[:5], kept[:5])
		}
		// got[350] was received again: its first receipt is stale.
		if err := q.Delete(ctx, got[350]); err != nil || q.Len() != len(kept) {
			t.Fatalf("a stale receipt: %v, %d left, want %d", err, q.Len(), len(kept))
		}
		if err := q.Delete(ctx, again...); err != nil || q.Len() != 0 {
			t.Fatalf("the latest receipts: %v, %d left", err, q.Len())
		}
		// What the deleted messages left in the queue goes once their
		// visibility timeouts have passed and a receive looked.
		time.Sleep(31 * time.Second)
		if ms, err := q.Receive(ctx, 1); err != nil || len(ms) != 0 {
			t.Fatalf("a receive of an empty queue: %d messages, %v", len(ms), err)
		}
		if n := len(q.visible) + len(q.hidden); n != 0 {
			t.Fatalf("%d entries left of deleted messages", n)
		}
	})
}
