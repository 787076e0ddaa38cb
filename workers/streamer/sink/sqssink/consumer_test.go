package sqssink

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// sendOne sends m in a SendMessageBatch of its own, as the sink does.
func sendOne(ctx context.Context, t *testing.T, s *Sink, m sink.Message) {
	t.Helper()
	r, err := s.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	failed, err := s.Send(ctx, []batch.Record{r})
	if err != nil || failed != nil {
		t.Fatalf("send %+v: failed %v, err %v", m, failed, err)
	}
}

// Finding 4 of issue 35. Epoch 1's request for seq 10 was fenced (the
// worker gave up on it) but SQS applied it late, after a record of epoch 2
// had reached the queue; epoch 2 then sends its own seq 10, SQS reports
// success, and epoch 2 checkpoints it. The consumer rule drops epoch 1's
// late copy; so epoch 2's copy must reach the consumer, not be dropped by
// SQS as a duplicate of epoch 1's (it was, when the deduplication id was
// connection_id:seq). Through the sink's own SendMessageBatch requests on a
// FIFO queue of fauxqs, which drops a repeated MessageDeduplicationId within
// 5 minutes as SQS does (node_modules/fauxqs/dist/sqs/sqsStore.js,
// DEDUP_WINDOW_MS) and answers it with success.
func TestLateOlderTenureLosesNothingOnFauxqs(t *testing.T) {
	ctx, client := fauxqsClient(t)
	msg := func(seq, sub, epoch int64) sink.Message {
		return sink.Message{ConnectionID: "c", Seq: seq, Sub: sub, LeaseEpoch: epoch, Data: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}
	}
	for _, c := range []struct {
		name string
		// first is what reaches the queue before epoch 1's late seq 10:
		// epoch 1's acknowledged seqs, then epoch 2's first records.
		first []sink.Message
		want  []int64 // the seqs the consumer must take, in order
	}{
		{
			// The finding's case: epoch 2 resumes from checkpoint 8 and
			// sends seq 9 again. Epoch 1 sent its seq 9 more than 5 minutes
			// before (a slow source), so SQS no longer holds its id: that is
			// modelled by leaving epoch 1's seq 9 out (fauxqs's window
			// cannot be aged from a test).
			name:  "epoch 2's seq 9",
			first: []sink.Message{msg(7, 0, 1), msg(8, 0, 1), msg(9, 0, 2)},
			want:  []int64{7, 8, 9, 10, 11},
		},
		{
			// All real: epoch 1 checkpointed 9; epoch 2 resumes at 10 and
			// first delivers a message without a seq (on_missing_seq
			// deliver: seq 9, sub 1), whose id always named its epoch.
			name:  "epoch 2's unsequenced message",
			first: []sink.Message{msg(8, 0, 1), msg(9, 0, 1), msg(9, 1, 2)},
			want:  []int64{8, 9, 9, 10, 11},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("late-%d.fifo", time.Now().UnixNano())
			q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: map[string]string{"FifoQueue": "true"}})
			if err != nil {
				t.Fatal(err)
			}
			s := New(client, aws.ToString(q.QueueUrl))
			for _, m := range c.first {
				sendOne(ctx, t, s, m)
			}
			sendOne(ctx, t, s, msg(10, 0, 1)) // epoch 1's fenced request, applied late
			sendOne(ctx, t, s, msg(10, 0, 2)) // acknowledged: epoch 2 checkpoints 10
			sendOne(ctx, t, s, msg(11, 0, 2))

			// The consumer rule of README.md ("Every record carries
			// lease_epoch") and docs/worker.md (Sinks, sqs): consume.Filter.
			var f consume.Filter
			envs, _ := receiveAll(ctx, t, client, q.QueueUrl)
			var got []int64
			for _, e := range envs {
				if f.Keep(e) {
					got = append(got, e.Seq)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("the consumer took seqs %v, want %v (an acknowledged message lost)", got, c.want)
			}
		})
	}
}
