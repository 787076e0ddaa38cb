package sqssink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
)

type fakeSQS struct {
	in      []*sqs.SendMessageInput
	batches []*sqs.SendMessageBatchInput
	failIDs []string // entry ids SendMessageBatch reports failed
	err     error
}

func (f *fakeSQS) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.batches = append(f.batches, in)
	out := &sqs.SendMessageBatchOutput{}
	for _, id := range f.failIDs {
		out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: aws.String(id), Code: aws.String("InternalError"), Message: aws.String("try again")})
	}
	return out, f.err
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.in = append(f.in, in)
	return &sqs.SendMessageOutput{}, f.err
}

func TestFIFOGroupAndDedup(t *testing.T) {
	api := &fakeSQS{}
	s := New(api, "https://sqs.us-east-1.amazonaws.com/1/out.fifo")
	if !s.FIFO() {
		t.Fatal("not FIFO")
	}
	if err := s.Handle(context.Background(), sink.Message{ConnectionID: "c-1", Seq: 9, Data: []byte(`{"seq":9}`)}); err != nil {
		t.Fatal(err)
	}
	in := api.in[0]
	if aws.ToString(in.MessageGroupId) != "c-1" || aws.ToString(in.MessageDeduplicationId) != "c-1:9.0.0" {
		t.Fatalf("group %q dedup %q", aws.ToString(in.MessageGroupId), aws.ToString(in.MessageDeduplicationId))
	}
	var env struct {
		ConnectionID string `json:"connection_id"`
		Seq          int64  `json:"seq"`
	}
	if err := json.Unmarshal([]byte(aws.ToString(in.MessageBody)), &env); err != nil || env.Seq != 9 || env.ConnectionID != "c-1" {
		t.Fatalf("body %s: %v", aws.ToString(in.MessageBody), err)
	}
}

func TestStandardQueueHasNoFIFOFields(t *testing.T) {
	api := &fakeSQS{}
	s := New(api, "http://127.0.0.1:9324/000000000000/out")
	_ = s.Handle(context.Background(), sink.Message{ConnectionID: "c", Seq: 1})
	if api.in[0].MessageGroupId != nil || api.in[0].MessageDeduplicationId != nil {
		t.Fatal("FIFO fields on a standard queue")
	}
}

func TestDedupIDFitsSQSLimit(t *testing.T) {
	long := strings.Repeat("a", 128)
	id := DedupID(long, 123, 0, 1)
	if len(id) > 128 || id == DedupID(long, 124, 0, 1) || id == DedupID(long, 123, 0, 2) {
		t.Fatalf("dedup id %q (%d chars)", id, len(id))
	}
	if DedupID("short", 5, 0, 3) != "short:5.0.3" {
		t.Fatal("short ids are kept readable")
	}
}

func TestSendErrorIsWrapped(t *testing.T) {
	boom := errors.New("boom")
	s := New(&fakeSQS{err: boom}, "q")
	if err := s.Handle(context.Background(), sink.Message{ConnectionID: "c", Seq: 1}); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

// Messages without their own seq (on_missing_seq deliver) get ids of their
// own, distinct from the sequenced message before them and from any other
// session's.
func TestDedupIDOfMessagesWithoutSeq(t *testing.T) {
	ids := map[string]string{}
	for name, m := range map[string]sink.Message{
		"seq 5":           {ConnectionID: "a", Seq: 5},
		"after 5, first":  {ConnectionID: "a", Seq: 5, Sub: 1},
		"after 5, second": {ConnectionID: "a", Seq: 5, Sub: 2},
		"none yet":        {ConnectionID: "a", Seq: -1, Sub: 1},
		"session a:5":     {ConnectionID: "a:5", Seq: 1},
		"session a:5 sub": {ConnectionID: "a:5", Seq: 1, Sub: 1},
	} {
		id := DedupIDOf(m)
		if other, dup := ids[id]; dup {
			t.Fatalf("%s and %s share the dedup id %q", name, other, id)
		}
		ids[id] = name
	}
	if got := DedupIDOf(sink.Message{ConnectionID: "a", Seq: 5, LeaseEpoch: 2}); got != DedupID("a", 5, 0, 2) {
		t.Fatalf("a sequenced message's id %q", got)
	}
	// Two tenures' copies of one seq have ids of their own: SQS must not
	// drop the newer one, the consumer drops the older one when it comes
	// late (TestLateOlderTenureLosesNothingOnFauxqs); "seq 5, sub 1" of the
	// next tenure is another message (its tenure numbered it anew).
	if DedupIDOf(sink.Message{ConnectionID: "a", Seq: 5, LeaseEpoch: 1}) == DedupIDOf(sink.Message{ConnectionID: "a", Seq: 5, LeaseEpoch: 2}) {
		t.Fatal("two tenures' copies of seq 5 share a dedup id")
	}
	if DedupIDOf(sink.Message{ConnectionID: "a", Seq: 5, Sub: 1, LeaseEpoch: 1}) == DedupIDOf(sink.Message{ConnectionID: "a", Seq: 5, Sub: 1, LeaseEpoch: 2}) {
		t.Fatal("unsequenced messages of two tenures share a dedup id")
	}
}

// The batched path names the epoch of an unsequenced message too.
func TestBatchDedupIDOfUnsequencedNamesTheEpoch(t *testing.T) {
	api := &fakeSQS{}
	s := New(api, "https://sqs.us-east-1.amazonaws.com/1/out.fifo")
	var recs []batch.Record
	for epoch := int64(1); epoch <= 2; epoch++ {
		r, err := s.Encode(sink.Message{ConnectionID: "c", Seq: 5, Sub: 1, LeaseEpoch: epoch, Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if _, err := s.Send(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	e := api.batches[0].Entries
	if a, b := aws.ToString(e[0].MessageDeduplicationId), aws.ToString(e[1].MessageDeduplicationId); a == b {
		t.Fatalf("two tenures' seq 5 sub 1 share the dedup id %q", a)
	}
}

// SenderFault entries are permanent unless SQS names throttling.
func TestEntryErrorPermanence(t *testing.T) {
	for _, c := range []struct {
		e    EntryError
		want bool
	}{
		{EntryError{Code: "InvalidParameterValue", SenderFault: true}, true},
		{EntryError{Code: "KMS.AccessDeniedException", SenderFault: true}, true},
		{EntryError{Code: "RequestThrottled", SenderFault: true}, false},
		{EntryError{Code: "InternalError"}, false},
	} {
		if got := sink.IsPermanent(&c.e); got != c.want {
			t.Errorf("%+v: permanent %v, want %v", c.e, got, c.want)
		}
	}
}

func TestBatchKeepsFIFOGroupDedupAndEpoch(t *testing.T) {
	api := &fakeSQS{}
	s := New(api, "https://sqs.us-east-1.amazonaws.com/1/out.fifo")
	if !s.Ordered() {
		t.Fatal("a FIFO queue must be sent in order per group")
	}
	failed, err := s.Send(context.Background(), batchtest.Encode(t, s, "c-1", 4, 7, 8, 9))
	if err != nil || failed != nil {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	entries := api.batches[0].Entries
	if len(entries) != 3 {
		t.Fatalf("%d entries", len(entries))
	}
	for i, e := range entries {
		seq := int64(7 + i)
		if aws.ToString(e.MessageGroupId) != "c-1" || aws.ToString(e.MessageDeduplicationId) != DedupID("c-1", seq, 0, 4) {
			t.Fatalf("entry %d: group %q dedup %q", i, aws.ToString(e.MessageGroupId), aws.ToString(e.MessageDeduplicationId))
		}
		var env struct {
			Seq        int64 `json:"seq"`
			LeaseEpoch int64 `json:"lease_epoch"`
		}
		if err := json.Unmarshal([]byte(aws.ToString(e.MessageBody)), &env); err != nil || env.Seq != seq || env.LeaseEpoch != 4 {
			t.Fatalf("entry %d body %s: %v", i, aws.ToString(e.MessageBody), err)
		}
	}
}

func TestBatchReportsOnlyTheFailedEntries(t *testing.T) {
	api := &fakeSQS{failIDs: []string{"1"}}
	s := New(api, "http://127.0.0.1:1/000000000000/out")
	if s.Ordered() {
		t.Fatal("a standard queue has no order to keep")
	}
	failed, err := s.Send(context.Background(), batchtest.Encode(t, s, "c", 4, 1, 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	var ee *EntryError
	if len(failed) != 3 || failed[0] != nil || failed[2] != nil || !errors.As(failed[1], &ee) || ee.Code != "InternalError" {
		t.Fatalf("failed = %v", failed)
	}
	if api.batches[0].Entries[0].MessageGroupId != nil {
		t.Fatal("FIFO fields on a standard queue")
	}
}

func TestBatchRequestErrorIsWrapped(t *testing.T) {
	boom := errors.New("boom")
	s := New(&fakeSQS{err: boom}, "q")
	if _, err := s.Send(context.Background(), batchtest.Encode(t, s, "c", 4, 1)); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

func TestOversizeMessageIsRefused(t *testing.T) {
	s := New(&fakeSQS{}, "q")
	if _, err := s.Encode(sink.Message{ConnectionID: "c", Seq: 1, Data: make([]byte, MaxMessageBytes)}); err == nil {
		t.Fatal("a body over SQS's limit was accepted")
	}
	if l := s.Limits(); l.MaxCount != 10 || l.MaxBytes != 1<<20 {
		t.Fatalf("limits %+v", l)
	}
}

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, enginetest.Needs{SQS: true}))
}

// fauxqsClient is an SDK client of the test's fauxqs (the engine required)
// and a context that ends with the test, within a minute.
func fauxqsClient(t *testing.T) (context.Context, *sqs.Client) {
	t.Helper()
	enginetest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ac, err := awsconfig.Load(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, sqs.NewFromConfig(ac)
}

// Through the batcher on fauxqs: a FIFO queue gets every message once, in
// order per session (group), in SendMessageBatch requests of up to 10.
func TestBatchesOnFauxqs(t *testing.T) {
	ctx, client := fauxqsClient(t)
	name := fmt.Sprintf("out-%d.fifo", time.Now().UnixNano())
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	b := batchtest.Start(t, New(client, aws.ToString(q.QueueUrl)), batch.DefaultConfig())

	const sessions, perSession = 3, 95
	for s := range sessions {
		for seq := int64(1); seq <= perSession; seq++ {
			m := sink.Message{ConnectionID: fmt.Sprintf("session-%d", s), Seq: seq, LeaseEpoch: 5, Data: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}
			if err := b.Submit(ctx, m, batchtest.Ignore{}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	if st.Records != sessions*perSession || st.Requests > sessions*(perSession/MaxBatchEntries+1)*2 {
		t.Fatalf("stats %+v", st)
	}
	got := map[string][]int64{}
	envs, _ := receiveAll(ctx, t, client, q.QueueUrl)
	if len(envs) != sessions*perSession {
		t.Fatalf("the queue held %d envelopes, %d sent", len(envs), sessions*perSession)
	}
	for _, env := range envs {
		if env.LeaseEpoch != 5 {
			t.Fatalf("envelope %+v", env)
		}
		got[env.ConnectionID] = append(got[env.ConnectionID], env.Seq)
	}
	for s := range sessions {
		seqs := got[fmt.Sprintf("session-%d", s)]
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Fatalf("session %d: %d at position %d (FIFO order lost)", s, seq, i)
			}
		}
		if len(seqs) != perSession {
			t.Fatalf("session %d: %d messages", s, len(seqs))
		}
	}
}
