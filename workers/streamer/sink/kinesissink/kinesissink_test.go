package kinesissink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/wsfleet/wsfleet/shared/awsconfig"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/kpl"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/sinktest"
)

func TestMain(m *testing.M) {
	os.Exit(enginetest.Main(m, enginetest.Needs{Kinesis: true}))
}

type fakeKinesis struct {
	in        []*kinesis.PutRecordsInput
	failCodes map[int]string
	err       error
}

func (f *fakeKinesis) PutRecords(_ context.Context, in *kinesis.PutRecordsInput, _ ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error) {
	f.in = append(f.in, in)
	if f.err != nil {
		return nil, f.err
	}
	out := &kinesis.PutRecordsOutput{Records: make([]types.PutRecordsResultEntry, len(in.Records))}
	for i := range in.Records {
		if code, ok := f.failCodes[i]; ok {
			out.Records[i] = types.PutRecordsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String("slow down")}
			out.FailedRecordCount = aws.Int32(aws.ToInt32(out.FailedRecordCount) + 1)
		} else {
			out.Records[i] = types.PutRecordsResultEntry{ShardId: aws.String("shardId-0"), SequenceNumber: aws.String(fmt.Sprint(i))}
		}
	}
	return out, nil
}

func TestPartitionKeyIsTheConnectionAndRecordsCarryTheEpoch(t *testing.T) {
	api := &fakeKinesis{}
	s := New(api, "out")
	if failed, err := s.Send(context.Background(), batchtest.Encode(t, s, "c-9", 6, 1, 2)); err != nil || failed != nil {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	in := api.in[0]
	if aws.ToString(in.StreamName) != "out" || in.StreamARN != nil {
		t.Fatalf("stream name %q arn %q", aws.ToString(in.StreamName), aws.ToString(in.StreamARN))
	}
	for i, r := range in.Records {
		var env struct {
			Seq        int64 `json:"seq"`
			LeaseEpoch int64 `json:"lease_epoch"`
		}
		if aws.ToString(r.PartitionKey) != "c-9" || json.Unmarshal(r.Data, &env) != nil || env.Seq != int64(i+1) || env.LeaseEpoch != 6 {
			t.Fatalf("record %d: key %q data %s", i, aws.ToString(r.PartitionKey), r.Data)
		}
	}
	arn := New(api, "arn:aws:kinesis:us-east-1:1:stream/out")
	if _, err := arn.Send(context.Background(), batchtest.Encode(t, arn, "c", 6, 1)); err != nil || api.in[1].StreamARN == nil {
		t.Fatalf("an ARN is sent as StreamARN: %v", err)
	}
}

func TestFailedRecordsAreReportedOneByOne(t *testing.T) {
	api := &fakeKinesis{failCodes: map[int]string{1: "ProvisionedThroughputExceededException", 2: "InternalFailure"}}
	s := New(api, "out")
	failed, err := s.Send(context.Background(), batchtest.Encode(t, s, "c", 6, 1, 2, 3, 4))
	if err != nil {
		t.Fatal(err)
	}
	if failed[0] != nil || failed[3] != nil || !errors.Is(failed[1], ErrThroughputExceeded) || failed[2] == nil || errors.Is(failed[2], ErrThroughputExceeded) {
		t.Fatalf("failed = %v", failed)
	}
}

func TestThrottledRequestIsTyped(t *testing.T) {
	s := New(&fakeKinesis{err: &types.ProvisionedThroughputExceededException{Message: aws.String("slow")}}, "out")
	if _, err := s.Send(context.Background(), batchtest.Encode(t, s, "c", 6, 1)); !errors.Is(err, ErrThroughputExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestRecordLimit(t *testing.T) {
	s := New(&fakeKinesis{}, "out")
	if _, err := s.Encode(sink.Message{ConnectionID: "c", Data: make([]byte, MaxRecordBytes)}); err == nil {
		t.Fatal("a record over 1 MiB was accepted")
	}
	if l := s.Limits(); l.MaxCount != 500 || !s.Ordered() {
		t.Fatalf("limits %+v ordered %v", l, s.Ordered())
	}
}

// activeStream creates a stream of shards shards on the test's kinesalite
// (the engine required), named prefix-<nanos>, and waits for it to be
// ACTIVE; the context ends with the test, within a minute.
func activeStream(t *testing.T, prefix string, shards int32) (context.Context, *kinesis.Client, string) {
	t.Helper()
	enginetest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ac, err := awsconfig.Load(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	client := kinesis.NewFromConfig(ac)
	stream := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	if _, err := client.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: &stream, ShardCount: aws.Int32(shards)}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "stream active", func() bool {
		out, err := client.DescribeStream(ctx, &kinesis.DescribeStreamInput{StreamName: &stream})
		return err == nil && out.StreamDescription.StreamStatus == types.StreamStatusActive
	})
	return ctx, client, stream
}

// Through the batcher on kinesalite: every message lands once, in order
// per session (partition key): aggregated (the default, over hash buckets,
// or per session) in fewer records than messages, or, aggregation off, one
// record each, in requests of up to 500 records.
func TestBatchesOnKinesalite(t *testing.T) {
	for _, c := range []Config{DefaultConfig(), {AggregateBytes: DefaultAggregateMaxBytes}, {}} {
		t.Run(fmt.Sprintf("aggregate=%d,buckets=%d", c.AggregateBytes, c.HashBuckets), func(t *testing.T) { batchesOnKinesalite(t, c) })
	}
}

func batchesOnKinesalite(t *testing.T, c Config) {
	aggregate := c.AggregateBytes
	ctx, client, stream := activeStream(t, "out", 2)
	b := batchtest.Start(t, NewConfig(client, stream, c), batchtest.EngineConfig())

	const sessions, perSession = 3, 1200
	for s := range sessions {
		id := fmt.Sprintf("session-%d", s)
		for seq := int64(1); seq <= perSession; seq++ {
			m := sink.Message{ConnectionID: id, Seq: seq, LeaseEpoch: 2, Data: []byte(fmt.Sprintf(`{"seq":%d}`, seq))}
			if err := b.Submit(ctx, m, batchtest.Ignore{}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := b.Stats()
	if st.Records != sessions*perSession {
		t.Fatalf("stats %+v", st)
	}
	if st.Requests > 60 {
		t.Fatalf("%d requests for %d records", st.Requests, st.Records)
	}
	switch {
	case aggregate == 0 && (st.WireRecords != st.Records || st.Requests < sessions*perSession/MaxRecords):
		t.Fatalf("stats %+v: want one record per message, at most 500 per request", st)
	case aggregate > 0 && st.WireRecords >= st.Records:
		t.Fatalf("stats %+v: want the messages aggregated into fewer records", st)
	}

	got := map[string][]int64{}
	recs := sinktest.ReadKinesis(ctx, t, client, stream)
	if int64(len(recs)) != st.WireRecords {
		t.Fatalf("%d records on the stream, %d acknowledged", len(recs), st.WireRecords)
	}
	for _, u := range userRecords(t, recs) {
		var env struct {
			ConnectionID string `json:"connection_id"`
			Seq          int64  `json:"seq"`
			LeaseEpoch   int64  `json:"lease_epoch"`
		}
		if err := json.Unmarshal(u.data, &env); err != nil || env.LeaseEpoch != 2 || env.ConnectionID != u.partitionKey {
			t.Fatalf("user record %s (key %q): %v", u.data, u.partitionKey, err)
		}
		got[env.ConnectionID] = append(got[env.ConnectionID], env.Seq)
	}
	for s := range sessions {
		seqs := got[fmt.Sprintf("session-%d", s)]
		if len(seqs) != perSession {
			t.Fatalf("session %d: %d records, want %d", s, len(seqs), perSession)
		}
		for i, seq := range seqs {
			if seq != int64(i+1) {
				t.Fatalf("session %d out of order at %d: %s", s, i, strings.Trim(fmt.Sprint(seqs[max(0, i-3):i+1]), "[]"))
			}
		}
	}
}

// Issue 35 finding 1 on kinesalite: a text frame that is not valid UTF-8
// is put as a record that is UTF-8 JSON, the frame's exact bytes in
// data_b64 (before: the record carried the byte raw, so the record was not
// UTF-8 JSON and a consumer's decoder refused or altered it).
func TestPoisonedTextFrameOnKinesalite(t *testing.T) {
	ctx, client, stream := activeStream(t, "poison", 1)
	b := batchtest.Start(t, New(client, stream), batchtest.EngineConfig())
	const poisoned = "{\"seq\":7,\"x\":\"\xff\"}"
	for seq := int64(6); seq <= 8; seq++ {
		data := fmt.Sprintf(`{"seq":%d}`, seq)
		if seq == 7 {
			data = poisoned
		}
		if err := b.Submit(ctx, sink.Message{ConnectionID: "c", Seq: seq, LeaseEpoch: 2, Data: []byte(data)}, batchtest.Ignore{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	users := userRecords(t, sinktest.ReadKinesis(ctx, t, client, stream))
	if len(users) != 3 {
		t.Fatalf("%d user records, want 3", len(users))
	}
	for _, u := range users {
		var env struct {
			Seq       int64  `json:"seq"`
			Frame     string `json:"frame"`
			B64Reason string `json:"b64_reason"`
			DataB64   []byte `json:"data_b64"`
		}
		if !utf8.Valid(u.data) || json.Unmarshal(u.data, &env) != nil {
			t.Fatalf("record %q is not UTF-8 JSON", u.data)
		}
		if env.Seq == 7 && (env.Frame != "text" || env.B64Reason != sink.ReasonInvalidUTF8 || string(env.DataB64) != poisoned) {
			t.Fatalf("seq 7 not carried losslessly: %s", u.data)
		}
	}
}

// userRecord is one user record of a Kinesis record: its own keys (a plain
// record's are the record's; kinesalite returns no explicit hash key).
type userRecord struct {
	partitionKey    string
	explicitHashKey string
	data            []byte
}

// userRecords takes recs apart (kpl.Users), in order.
func userRecords(t *testing.T, recs []types.Record) []userRecord {
	t.Helper()
	var users []userRecord
	for _, r := range recs {
		us, err := kpl.Users(r.Data)
		if err != nil {
			t.Fatalf("record %s: %v", aws.ToString(r.SequenceNumber), err)
		}
		for _, u := range us {
			if !kpl.IsAggregated(r.Data) {
				u.PartitionKey = aws.ToString(r.PartitionKey)
			}
			users = append(users, userRecord{partitionKey: u.PartitionKey, explicitHashKey: u.ExplicitHashKey, data: u.Data})
		}
	}
	return users
}
