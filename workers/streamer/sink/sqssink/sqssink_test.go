package sqssink

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
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
	if aws.ToString(in.MessageGroupId) != "c-1" || aws.ToString(in.MessageDeduplicationId) != "c-1:9" {
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
	id := DedupID(long, 123)
	if len(id) > 128 || id == DedupID(long, 124) {
		t.Fatalf("dedup id %q (%d chars)", id, len(id))
	}
	if DedupID("short", 5) != "short:5" {
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

func encodeAll(t *testing.T, s *Sink, id string, seqs ...int64) []batch.Record {
	t.Helper()
	var recs []batch.Record
	for _, seq := range seqs {
		r, err := s.Encode(sink.Message{ConnectionID: id, Seq: seq, LeaseEpoch: 4, Data: []byte(`{"x":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

func TestBatchKeepsFIFOGroupDedupAndEpoch(t *testing.T) {
	api := &fakeSQS{}
	s := New(api, "https://sqs.us-east-1.amazonaws.com/1/out.fifo")
	if !s.Ordered() {
		t.Fatal("a FIFO queue must be sent in order per group")
	}
	failed, err := s.Send(context.Background(), encodeAll(t, s, "c-1", 7, 8, 9))
	if err != nil || failed != nil {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	entries := api.batches[0].Entries
	if len(entries) != 3 {
		t.Fatalf("%d entries", len(entries))
	}
	for i, e := range entries {
		seq := int64(7 + i)
		if aws.ToString(e.MessageGroupId) != "c-1" || aws.ToString(e.MessageDeduplicationId) != DedupID("c-1", seq) {
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
	failed, err := s.Send(context.Background(), encodeAll(t, s, "c", 1, 2, 3))
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
	if _, err := s.Send(context.Background(), encodeAll(t, s, "c", 1)); !errors.Is(err, boom) {
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
