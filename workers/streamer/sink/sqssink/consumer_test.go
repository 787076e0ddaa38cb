package sqssink

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// envelope is the part of a sink record the consumer rule reads.
type envelope struct {
	ConnectionID string `json:"connection_id"`
	Seq          int64  `json:"seq"`
	Sub          int64  `json:"sub"`
	LeaseEpoch   int64  `json:"lease_epoch"`
}

// consumer applies the consumer rule of README.md ("Every record carries
// lease_epoch") and docs/worker.md (Sinks, sqs), word for word, to the
// records of an ordered destination (a FIFO queue, a Kinesis shard), per
// connection_id:
//  1. a record whose lease_epoch is below the highest seen is dropped (a
//     late write of an older tenure: the newer tenure sends everything
//     after its checkpoint again);
//  2. otherwise its lease_epoch becomes the highest seen, and a record
//     without a sub whose seq was taken already is dropped (a replay from
//     the last checkpoint);
//  3. otherwise the record is taken.
type consumer struct {
	epoch map[string]int64
	taken map[string][]envelope
	seqs  map[string]map[int64]bool
}

func newConsumer() *consumer {
	return &consumer{epoch: map[string]int64{}, taken: map[string][]envelope{}, seqs: map[string]map[int64]bool{}}
}

func (c *consumer) apply(e envelope) {
	id := e.ConnectionID
	if e.LeaseEpoch < c.epoch[id] {
		return
	}
	c.epoch[id] = e.LeaseEpoch
	if e.Sub == 0 {
		if c.seqs[id][e.Seq] {
			return
		}
		if c.seqs[id] == nil {
			c.seqs[id] = map[int64]bool{}
		}
		c.seqs[id][e.Seq] = true
	}
	c.taken[id] = append(c.taken[id], e)
}

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

			cons := newConsumer()
			for {
				out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
				if err != nil {
					t.Fatal(err)
				}
				if len(out.Messages) == 0 {
					break
				}
				for _, m := range out.Messages {
					var e envelope
					if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &e); err != nil {
						t.Fatal(err)
					}
					cons.apply(e)
					if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
						t.Fatal(err)
					}
				}
			}
			var got []int64
			for _, e := range cons.taken["c"] {
				got = append(got, e.Seq)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("the consumer took seqs %v, want %v (an acknowledged message lost)", got, c.want)
			}
		})
	}
}
