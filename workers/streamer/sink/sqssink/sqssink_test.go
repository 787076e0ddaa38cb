package sqssink

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

type fakeSQS struct {
	in  []*sqs.SendMessageInput
	err error
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
	if got := DedupIDOf(sink.Message{ConnectionID: "a", Seq: 5}); got != DedupID("a", 5) {
		t.Fatalf("a sequenced message's id %q changed", got)
	}
}
