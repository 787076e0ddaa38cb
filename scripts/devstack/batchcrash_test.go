package devstack

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/feed"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// TestKillDuringBatchesLosesNothingCheckpointed: worker processes stream
// 8 sessions at 50 msg/s each into the batched sqs sink (fauxqs, a
// standard queue: every raw send is kept), one worker holding them all is
// killed with SIGKILL while batches are in flight, and another takes the
// sessions over. From the queue's messages and the successor's log:
// every seq up to the checkpoint the successor resumed from is at the
// destination (nothing acknowledged is lost), the successor's first seq is
// exactly that checkpoint + 1 (replay only from the checkpoint), and no seq
// from the first to the last one sent is missing.
func TestKillDuringBatchesLosesNothingCheckpointed(t *testing.T) {
	if testing.Short() {
		t.Skip("worker processes on the local engines")
	}
	cfg := testConfig(t, 0)
	cfg.Worker = WorkerSettings{LeaseTTL: 4 * time.Second, HeartbeatEvery: time.Second, CheckpointEvery: time.Second,
		ReconcileEvery: 2 * time.Second, SafetyMargin: time.Second, ShutdownDeadline: 10 * time.Second, QueueWait: time.Second,
		RebalanceEvery: time.Hour, LogLevel: "info"}
	cfg.FeedRate = 50
	cfg.FeedMode = feed.ModeKickOlder
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := startStack(ctx, t, cfg)
	// The reader's client reuses no connection (awsClientConfig says why).
	q := sqs.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}, func(o *sqs.Options) { o.BaseEndpoint = aws.String(st.SQS.Endpoint()) })
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("wsfleet-output")})
	if err != nil {
		t.Fatal(err)
	}
	sinkEnv := map[string]string{schema.EnvSink: "sqs", schema.EnvOutputQueueURL: *out.QueueUrl}
	st.cfg.Worker.Env = sinkEnv // every worker added from here on

	victim, err := st.AddWorker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 8 {
		id := fmt.Sprintf("bc-%d", i)
		if _, err := st.StartSession(ctx, id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// Streaming: every session has sent a few hundred messages.
	testwait.Eventually(t, time.Minute, "every session streaming to the victim", func() bool {
		for _, id := range ids {
			rs, err := st.FeedRecords(ctx, id)
			if err != nil || len(rs) != 1 || rs[0].LastSeq < 150 {
				return false
			}
		}
		return true
	})
	survivor, err := st.AddWorker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := victim.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	// The survivor takes every session over and streams on.
	testwait.Eventually(t, time.Minute, "every session streaming from the survivor", func() bool {
		for _, id := range ids {
			rs, err := st.FeedRecords(ctx, id)
			if err != nil || len(rs) != 2 || rs[1].OpenedAt.Before(killedAt) || rs[1].LastSeq < rs[1].FirstSeq+50 {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		if _, err := st.API.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Eventually(t, 30*time.Second, "every connection closed", func() bool {
		for _, id := range ids {
			rs, err := st.FeedRecords(ctx, id)
			if err != nil || rs[len(rs)-1].ClosedAt.IsZero() {
				return false
			}
		}
		return true
	})
	resumed := acquiredAt(t, survivor.LogPath())
	conns, err := st.FeedRecords(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	firstSent := map[string]int64{} // the first seq the feed sent, per session
	for _, c := range conns {
		if f, ok := firstSent[c.Session]; !ok || c.FirstSeq < f {
			firstSent[c.Session] = c.FirstSeq
		}
	}
	// Every message the sink accepted was sent before the stops' final
	// flushes; read the queue (deleting what was read) until it is empty
	// twice in a row and no message is hidden: a receive whose answer was
	// lost (the SDK then retries) hid its messages for the visibility
	// timeout, and they are read when they come back.
	got := map[string]map[int64][]int64{} // session → seq → epochs
	empty := 0
	for empty < 2 {
		r, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: out.QueueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 3, WaitTimeSeconds: 1,
			MessageAttributeNames: []string{consume.ContentTypeAttribute}})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			if empty++; empty == 2 {
				a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
				if err != nil {
					t.Fatal(err)
				}
				if a.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)] != "0" {
					empty = 0 // hidden by a lost answer: wait for them
				}
			}
			continue
		}
		empty = 0
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range r.Messages {
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
			envs, err := consume.FromSQS(aws.ToString(m.Body), aws.ToString(m.MessageAttributes[consume.ContentTypeAttribute].StringValue))
			if err != nil {
				t.Fatalf("a queue message that is not envelopes: %v", err)
			}
			for _, env := range envs {
				if got[env.ConnectionID] == nil {
					got[env.ConnectionID] = map[int64][]int64{}
				}
				got[env.ConnectionID][env.Seq] = append(got[env.ConnectionID][env.Seq], env.LeaseEpoch)
			}
		}
		if _, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: out.QueueUrl, Entries: del}); err != nil {
			t.Fatal(err)
		}
	}
	replayed := 0
	for _, id := range ids {
		from, ok := resumed[id]
		if !ok {
			t.Fatalf("%s: the survivor's log has no acquisition", id)
		}
		var first int64 = -1
		for seq, epochs := range got[id] {
			for _, e := range epochs {
				if e == from.epoch && (first < 0 || seq < first) {
					first = seq
				}
			}
		}
		if first != from.lastSeq+1 {
			t.Errorf("%s: the successor (epoch %d) resumed from the checkpoint %d but its first message at the destination is seq %d", id, from.epoch, from.lastSeq, first)
		}
		// No gap from the first seq sent to the last one at the destination
		// (a message still in the socket when the stop closed it was never
		// accepted, so the check ends at the destination's last).
		var last int64
		for seq := range got[id] {
			last = max(last, seq)
		}
		if last <= from.lastSeq {
			t.Errorf("%s: nothing after the checkpoint %d at the destination (last %d)", id, from.lastSeq, last)
		}
		for seq := firstSent[id]; seq <= last; seq++ {
			if len(got[id][seq]) == 0 {
				kind := "after the checkpoint"
				if seq <= from.lastSeq {
					kind = "checkpointed (acknowledged)"
				}
				t.Errorf("%s: seq %d %s is not at the destination", id, seq, kind)
				break
			}
			if len(got[id][seq]) > 1 {
				replayed++
			}
		}
	}
	t.Logf("killed mid-batches; %d messages sent again by the successor (those after each session's last checkpoint)", replayed)
}

// acquisition is a "lease acquired" line of a worker's log.
type acquisition struct {
	epoch, lastSeq int64
}

// acquiredAt reads the sessions a worker acquired, with the checkpoint each
// acquisition resumed from (its last one per session).
func acquiredAt(t *testing.T, path string) map[string]acquisition {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]acquisition{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"lease acquired"`) {
			continue
		}
		var l struct {
			ID      string `json:"connection_id"`
			Epoch   int64  `json:"lease_epoch"`
			LastSeq int64  `json:"last_seq"`
		}
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.ID != "" {
			out[l.ID] = acquisition{l.Epoch, l.LastSeq}
		}
	}
	return out
}
