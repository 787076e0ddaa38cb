package sqsnotify_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/shared/enginetest"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/shared/notify/sqsnotify"
)

func TestMain(m *testing.M) { os.Exit(enginetest.Main(m, enginetest.Needs{SQS: true})) }

func TestPublishReceiveRequeueDelete(t *testing.T) {
	enginetest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := awsconfig.Load(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	client := sqs.NewFromConfig(cfg)
	qs, err := sqsnotify.CreateQueues(ctx, client, "notify-test", 30, 3)
	if err != nil {
		t.Fatal(err)
	}
	q := sqsnotify.New(client, qs.WorkURL, 1)
	n := notify.Notification{Type: "start", ConnectionID: "c-1", Generation: 2, SentAtMs: 123}
	if err := q.Publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	// A body that is not a notification is delivered with Err set.
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &qs.WorkURL, MessageBody: aws.String("garbage")}); err != nil {
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
	if err := q.Requeue(ctx, good); err != nil {
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
