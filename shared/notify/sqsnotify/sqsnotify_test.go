package sqsnotify_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

func TestMain(m *testing.M) { os.Exit(enginetest.Main(m, enginetest.Needs{SQS: true})) }

func TestPublishReceiveRequeueDelete(t *testing.T) {
	ctx, client, workURL, q := newQueue(t, "notify-test")
	n := notify.Notification{Type: "start", ConnectionID: "c-1", Generation: 2, SentAtMs: 123}
	if err := q.Publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	// A body that is not a notification is delivered with Err set.
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &workURL, MessageBody: aws.String("garbage")}); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, ctx, q, 2)
	var good notify.Message
	bad := 0
	for _, m := range got {
		if m.Err != nil {
			bad++
			if err := q.Delete(ctx, m); err != nil {
				t.Fatal(err)
			}
			continue
		}
		good = m
	}
	if bad != 1 || good.Notification != n || good.ReceiveCount != 1 {
		t.Fatalf("received %+v", got)
	}
	// Requeue makes it visible again at once (visibility timeout is 30 s).
	if err := q.Requeue(ctx, good, 0); err != nil {
		t.Fatal(err)
	}
	again := receiveAll(t, ctx, q, 1)
	if again[0].Notification != n || again[0].ReceiveCount != 2 {
		t.Fatalf("after requeue: %+v", again[0])
	}
	if err := q.Delete(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	if left, err := q.Receive(ctx, 10); err != nil || len(left) != 0 {
		t.Fatalf("queue not empty after delete: %v %v", left, err)
	}
}

// newQueue creates the queue name (and its DLQ) on the engine: the test's
// context (ended at cleanup), the client, the work queue's URL and a Queue on
// it with a 1 s long poll.
func newQueue(t *testing.T, name string) (context.Context, *sqs.Client, string, *sqsnotify.Queue) {
	t.Helper()
	enginetest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cfg, err := awsconfig.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg)
	qs, err := sqsnotify.CreateQueues(ctx, client, name, 30, 3)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, client, qs.WorkURL, sqsnotify.New(client, qs.WorkURL, 1)
}

func receiveAll(t *testing.T, ctx context.Context, q *sqsnotify.Queue, want int) []notify.Message {
	t.Helper()
	var got []notify.Message
	for deadline := time.Now().Add(10 * time.Second); len(got) < want && time.Now().Before(deadline); {
		ms, err := q.Receive(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ms...)
	}
	if len(got) != want {
		t.Fatalf("received %d messages, want %d", len(got), want)
	}
	return got
}

// A coalesced burst goes out through SendMessageBatch and comes back
// whole; batch deletes of up to and over ten messages empty the queue.
func TestBatchPublishAndBatchDelete(t *testing.T) {
	ctx, _, _, q := newQueue(t, "notify-batch-test")
	ns := make([]notify.Notification, 10)
	for i := range ns {
		ns[i] = notify.Notification{Type: "start", ConnectionID: fmt.Sprintf("b-%d", i), Generation: 1, SentAtMs: int64(i)}
	}
	for i, err := range q.PublishBatch(ctx, ns) {
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	if errs := q.PublishBatch(ctx, make([]notify.Notification, 11)); len(errs) != 11 || errs[0] == nil {
		t.Fatalf("a batch of 11 was not refused: %v", errs)
	}
	c := notify.NewCoalescer(q, sqsnotify.MaxBatch, 2)
	var wg sync.WaitGroup
	for i := 10; i < 25; i++ {
		wg.Go(func() {
			if err := c.Publish(ctx, notify.Notification{Type: "start", ConnectionID: fmt.Sprintf("b-%d", i), Generation: 1}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got := receiveAll(t, ctx, q, 25)
	seen := map[string]bool{}
	for _, m := range got {
		if m.Err != nil {
			t.Fatalf("undecodable: %+v", m)
		}
		seen[m.Notification.ConnectionID] = true
	}
	if len(seen) != 25 {
		t.Fatalf("%d distinct notifications of 25", len(seen))
	}
	// fauxqs 1.9.2 accepts any receipt in DeleteMessageBatch, so the
	// failed-entry mapping is tested against a fake (failures_test.go).
	if err := q.Delete(ctx, got[:3]...); err != nil {
		t.Fatal(err)
	}
	if err := q.Delete(ctx, got[3:]...); err != nil {
		t.Fatal(err)
	}
	if left, err := q.Receive(ctx, 10); err != nil || len(left) != 0 {
		t.Fatalf("queue not empty after the batch deletes: %d %v", len(left), err)
	}
}
