package kinesissink

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/kpl"
)

func TestPackGrowIsTheAggregatedRecordsSize(t *testing.T) {
	s := New(&fakeKinesis{}, "out")
	recs := batchtest.Encode(t, s, "conn-7", 3, 1, 2, 3, 4, 5)
	size := 0
	for i, r := range recs {
		size = s.PackGrow(size, r)
		if i == 0 {
			continue
		}
		p, err := s.Pack(recs[:i+1])
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Size(p); got != size {
			t.Fatalf("pack of %d: Size %d, PackGrow %d", i+1, got, size)
		}
		data, err := kpl.Deaggregate(p.Body)
		if err != nil || len(data) != i+1 || !bytes.Equal(data[i], r.Body) || p.ConnectionID != "conn-7" || p.Seq != 1 || p.Epoch != 3 {
			t.Fatalf("pack of %d: %q, %v", i+1, data, err)
		}
	}
	one, err := s.Pack(recs[:1])
	if err != nil || !bytes.Equal(one.Body, recs[0].Body) {
		t.Fatalf("a pack of one is the message's own record: %s, %v", one.Body, err)
	}
	if _, err := s.Pack(append(batchtest.Encode(t, s, "a", 1, 1), batchtest.Encode(t, s, "a", 2, 2)...)); err == nil {
		t.Fatal("a pack of two tenures was built")
	}
	if s.PackLimit() != 51_200 || New(nil, "x").SetAggregateMaxBytes(0).PackLimit() != 0 {
		t.Fatal("aggregation is on by default at 51,200 bytes, off at 0")
	}
}

// The done-when of issue 38 item 1: records the sink writes to kinesalite
// are taken apart by aws-kinesis-agg (the reference Node.js deaggregator,
// package.json) into exactly the envelopes sent, in order; kpl.Deaggregate
// reads the same records the same.
func TestAggregatedRecordsReadByAwsKinesisAgg(t *testing.T) {
	node, root := enginetest.RequireNodeModule(t, "aws-kinesis-agg")
	ctx, client, stream := activeStream(t, "agg", 1)
	snd := New(client, stream)
	b := batchtest.Start(t, snd, engineConfig())
	const perSession = 300
	sessions := []string{"conn-a", "conn-b"}
	var sent []userRecord // every envelope, in each session's order
	for _, id := range sessions {
		for seq := int64(1); seq <= perSession; seq++ {
			m := sink.Message{ConnectionID: id, Seq: seq, LeaseEpoch: 4, Data: fmt.Appendf(nil, `{"seq":%d,"pad":"%0*d"}`, seq, int(seq%200), 0)}
			rec, err := snd.Encode(m)
			if err != nil {
				t.Fatal(err)
			}
			sent = append(sent, userRecord{partitionKey: id, data: rec.Body})
			if err := b.Submit(ctx, m, batchtest.Ignore{}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs := readStream(ctx, t, client, stream)
	if st := b.Stats(); st.Records != int64(len(sent)) || int(st.WireRecords) != len(recs) || st.Packs == 0 {
		t.Fatalf("stats %+v, %d records on the stream: want %d messages in fewer, aggregated records", st, len(recs), len(sent))
	}
	aggregated := 0
	for _, r := range recs {
		if kpl.IsAggregated(r.Data) {
			aggregated++
		}
		if n := len(r.Data) + len(aws.ToString(r.PartitionKey)); n > DefaultAggregateMaxBytes {
			t.Fatalf("record of %d bytes over the aggregation bound", n)
		}
	}
	if aggregated == 0 {
		t.Fatal("no aggregated record on the stream")
	}

	byNode := deaggregateWithNode(t, node, root, recs)
	byGo := userRecords(t, recs)
	for name, got := range map[string][]userRecord{"aws-kinesis-agg": byNode, "kpl.Deaggregate": byGo} {
		if !sameBySession(got, sent, sessions) {
			t.Fatalf("%s: %d user records, not the %d envelopes sent in order", name, len(got), len(sent))
		}
	}
}

// sameBySession: got holds exactly want's records, in want's order within
// each partition key (records of two sessions interleave on a shard).
func sameBySession(got, want []userRecord, keys []string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, k := range keys {
		var g, w [][]byte
		for _, u := range got {
			if u.partitionKey == k {
				g = append(g, u.data)
			}
		}
		for _, u := range want {
			if u.partitionKey == k {
				w = append(w, u.data)
			}
		}
		if !slices.EqualFunc(g, w, bytes.Equal) {
			return false
		}
	}
	return true
}

// deaggregateWithNode runs testdata/deagg.cjs (aws-kinesis-agg's
// deaggregateSync, checksums checked) on recs.
func deaggregateWithNode(t *testing.T, node, root string, recs []types.Record) []userRecord {
	t.Helper()
	type in struct {
		PartitionKey   string `json:"partitionKey"`
		SequenceNumber string `json:"sequenceNumber"`
		Data           string `json:"data"`
	}
	input := make([]in, len(recs))
	for i, r := range recs {
		input[i] = in{aws.ToString(r.PartitionKey), aws.ToString(r.SequenceNumber), base64.StdEncoding.EncodeToString(r.Data)}
	}
	stdin, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "deagg.cjs"), root)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("aws-kinesis-agg: %v: %s", err, stderr.String())
	}
	var users []struct {
		PartitionKey string `json:"partitionKey"`
		Data         []byte `json:"data"`
	}
	if err := json.Unmarshal(out, &users); err != nil {
		t.Fatalf("aws-kinesis-agg output: %v", err)
	}
	got := make([]userRecord, len(users))
	for i, u := range users {
		got[i] = userRecord{partitionKey: u.PartitionKey, data: u.Data}
	}
	return got
}
