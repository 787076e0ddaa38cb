package kinesissink

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch/batchtest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/kpl"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/sinktest"
)

// Per-session aggregation (HashBuckets 0): PackGrow is the exact Size of
// the aggregated record, which holds one session's messages of one tenure
// under its connection_id.
func TestPackGrowIsTheAggregatedRecordsSize(t *testing.T) {
	s := NewConfig(&fakeKinesis{}, "out", Config{AggregateBytes: DefaultAggregateMaxBytes})
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
	if _, err := s.Pack(append(batchtest.Encode(t, s, "a", 1, 1), batchtest.Encode(t, s, "b", 1, 2)...)); err == nil {
		t.Fatal("a pack of two sessions was built without buckets")
	}
	if g := s.PackGroup(recs[0]); g != "conn-7" {
		t.Fatalf("PackGroup %q without buckets, want the connection_id", g)
	}
	if s := New(nil, "x"); s.PackLimit() != 51_200 || s.buckets == nil || len(s.buckets.keys) != 16 || NewConfig(nil, "x", Config{}).PackLimit() != 0 {
		t.Fatal("aggregation is on by default at 51,200 bytes over 16 buckets, off at 0")
	}
}

// sameBucket is n connection ids of one bucket of s (the first's).
func sameBucket(s *Sink, n int) []string {
	var ids []string
	for i := 0; len(ids) < n; i++ {
		id := fmt.Sprintf("conn-%d", i)
		if len(ids) == 0 || s.buckets.of(id) == s.buckets.of(ids[0]) {
			ids = append(ids, id)
		}
	}
	return ids
}

// With hash buckets, sessions of one bucket share an aggregated record:
// every user record under its own connection_id and the bucket's explicit
// hash key, each session's in order within its tenure (two tenures of a
// session may share one); PackGrow bounds the record's Size; the record is
// named by the first and keyed by its connection_id. Sessions of two
// buckets, or a session out of order, are refused.
func TestPackOfSeveralSessionsOfABucket(t *testing.T) {
	s := New(&fakeKinesis{}, "out")
	ids := sameBucket(s, 3)
	var recs []batch.Record
	for seq := int64(1); seq <= 3; seq++ {
		for i, id := range ids {
			recs = append(recs, batchtest.Encode(t, s, id, int64(i+1), seq)...)
		}
	}
	recs = append(recs, batchtest.Encode(t, s, ids[0], 9, 1)...) // a later tenure of ids[0]
	size := 0
	for _, r := range recs {
		size = s.PackGrow(size, r)
		if g := s.PackGroup(r); g != strconv.Itoa(s.buckets.of(ids[0])) {
			t.Fatalf("PackGroup %q, want the bucket", g)
		}
	}
	p, err := s.Pack(recs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Size(p) > size || p.ConnectionID != ids[0] || p.Seq != 1 || p.Epoch != 1 {
		t.Fatalf("pack %+v of Size %d: want named by the first, within PackGrow's %d", p, s.Size(p), size)
	}
	users, err := kpl.Users(p.Body)
	if err != nil || len(users) != len(recs) {
		t.Fatalf("%d user records, %v", len(users), err)
	}
	key := s.buckets.key(s.buckets.of(ids[0]))
	for i, u := range users {
		if u.PartitionKey != recs[i].ConnectionID || u.ExplicitHashKey != key || !bytes.Equal(u.Data, recs[i].Body) {
			t.Fatalf("user record %d: key %q hash key %q, want %q %q", i, u.PartitionKey, u.ExplicitHashKey, recs[i].ConnectionID, key)
		}
	}
	other := "x"
	for i := 0; s.buckets.of(other) == s.buckets.of(ids[0]); i++ {
		other = fmt.Sprintf("x-%d", i)
	}
	if _, err := s.Pack(append(batchtest.Encode(t, s, ids[0], 1, 1), batchtest.Encode(t, s, other, 1, 1)...)); err == nil {
		t.Fatal("a pack of two buckets was built")
	}
	if _, err := s.Pack(batchtest.Encode(t, s, ids[0], 1, 2, 1)); err == nil {
		t.Fatal("a pack of a session out of order was built")
	}
}

// A bucket is the range of hash keys b * 2^128 / N up to (b+1) * 2^128 / N
// a session's MD5 falls in, and its key, the range's midpoint, lies in it:
// Kinesis puts the key on the shard that holds the range's middle.
func TestBucketsCutTheHashKeySpace(t *testing.T) {
	space := new(big.Int).Lsh(big.NewInt(1), 128)
	bucketOf := func(h *big.Int, n int) int { // floor(h * n / 2^128)
		x := new(big.Int).Mul(h, big.NewInt(int64(n)))
		return int(x.Rsh(x, 128).Int64())
	}
	for _, n := range []int{1, 2, 3, 16, 1000, MaxHashBuckets} {
		bs := newBuckets(n)
		for b := range n {
			k, ok := new(big.Int).SetString(bs.key(b), 10)
			if !ok || k.Sign() < 0 || k.Cmp(space) >= 0 || bucketOf(k, n) != b {
				t.Fatalf("n=%d: bucket %d's key %s is not in its range", n, b, bs.key(b))
			}
		}
		for i := range 200 {
			id := fmt.Sprintf("session-%d", i)
			sum := md5.Sum([]byte(id))
			if got, want := bs.of(id), bucketOf(new(big.Int).SetBytes(sum[:]), n); got != want {
				t.Fatalf("n=%d: %s in bucket %d, want %d", n, id, got, want)
			}
		}
	}
	if newBuckets(1).key(0) != "170141183460469231731687303715884105728" || newBuckets(0) != nil {
		t.Fatal("one bucket's key is 2^127; 0 buckets is none")
	}
}

// Every record the sink puts, plain or aggregated, carries its bucket's
// explicit hash key and the (first) connection_id as its partition key;
// without buckets none carries an explicit hash key.
func TestEveryRecordCarriesItsBucketsHashKey(t *testing.T) {
	api := &fakeKinesis{}
	s := New(api, "out")
	ids := sameBucket(s, 2)
	agg, err := s.Pack(append(batchtest.Encode(t, s, ids[1], 1, 1, 2), batchtest.Encode(t, s, ids[0], 1, 1)...))
	if err != nil {
		t.Fatal(err)
	}
	recs := append([]batch.Record{agg}, batchtest.Encode(t, s, ids[0], 1, 2)...)
	recs = append(recs, batchtest.Encode(t, s, "lone", 1, 1)...)
	if failed, err := s.Send(context.Background(), recs); err != nil || failed != nil {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	for i, e := range api.in[0].Records {
		want := []string{ids[1], ids[0], "lone"}[i]
		if aws.ToString(e.PartitionKey) != want || aws.ToString(e.ExplicitHashKey) != s.buckets.key(s.buckets.of(want)) {
			t.Fatalf("record %d: key %q hash key %q, want %q and its bucket's", i, aws.ToString(e.PartitionKey), aws.ToString(e.ExplicitHashKey), want)
		}
	}
	plain := NewConfig(api, "out", Config{AggregateBytes: DefaultAggregateMaxBytes})
	if _, err := plain.Send(context.Background(), batchtest.Encode(t, plain, "c", 1, 1)); err != nil || api.in[1].Records[0].ExplicitHashKey != nil {
		t.Fatalf("without buckets: hash key %v, %v", api.in[1].Records[0].ExplicitHashKey, err)
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
	b := batchtest.Start(t, snd, batchtest.EngineConfig())
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
	recs := sinktest.ReadKinesis(ctx, t, client, stream)
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

// Hash buckets on kinesalite (issue 38, cross-session aggregation): records
// aggregating several sessions of one bucket, and a plain record, all land
// on the one shard holding the bucket's explicit hash key (one bucket: 2^127,
// on a stream of two shards, though some sessions' MD5 lies on the other
// shard), and aws-kinesis-agg takes them apart into exactly the envelopes
// sent, each under its session's partition key and the bucket's key;
// kpl.Users reads the same.
func TestBucketRecordsReadByAwsKinesisAgg(t *testing.T) {
	node, root := enginetest.RequireNodeModule(t, "aws-kinesis-agg")
	ctx, client, stream := activeStream(t, "bucket", 2)
	snd := NewConfig(client, stream, Config{AggregateBytes: DefaultAggregateMaxBytes, HashBuckets: 1})
	key := snd.buckets.key(0)
	sessions := []string{"conn-a", "conn-b", "conn-c", "conn-d", "conn-f", "conn-e"} // the last, sent plain, hashes below 2^127
	lowHalf := 0
	for _, id := range sessions {
		if sum := md5.Sum([]byte(id)); sum[0] < 0x80 {
			lowHalf++
		}
	}
	if lowHalf == 0 || lowHalf == len(sessions) {
		t.Fatalf("%d of %d sessions hash below 2^127: want some on each shard by MD5", lowHalf, len(sessions))
	}
	var sent []userRecord
	var recs []batch.Record // the wire records: aggregated, each up to the bound, then a plain one
	var pack []batch.Record
	size := 0
	flush := func() {
		if len(pack) > 0 {
			p, err := snd.Pack(pack)
			if err != nil {
				t.Fatal(err)
			}
			recs, pack, size = append(recs, p), nil, 0
		}
	}
	for seq := int64(1); seq <= 150; seq++ {
		for i, id := range sessions[:len(sessions)-1] {
			r, err := snd.Encode(sink.Message{ConnectionID: id, Seq: seq, LeaseEpoch: int64(i + 1), Data: fmt.Appendf(nil, `{"seq":%d,"pad":"%0*d"}`, seq, int(seq%200), 0)})
			if err != nil {
				t.Fatal(err)
			}
			sent = append(sent, userRecord{partitionKey: id, explicitHashKey: key, data: r.Body})
			if grown := snd.PackGrow(size, r); grown > snd.PackLimit() {
				flush()
			}
			pack, size = append(pack, r), snd.PackGrow(size, r)
		}
	}
	flush()
	lone := batchtest.Encode(t, snd, sessions[len(sessions)-1], 1, 1)[0]
	recs = append(recs, lone)
	sent = append(sent, userRecord{partitionKey: lone.ConnectionID, data: lone.Body})
	if failed, err := snd.Send(ctx, recs); err != nil || failed != nil {
		t.Fatalf("put %d records: failed %v, %v", len(recs), failed, err)
	}

	shards, err := client.ListShards(ctx, &kinesis.ListShardsInput{StreamName: &stream})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := new(big.Int).SetString(key, 10)
	var got []types.Record
	for _, sh := range shards.Shards {
		lo, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.StartingHashKey), 10)
		hi, _ := new(big.Int).SetString(aws.ToString(sh.HashKeyRange.EndingHashKey), 10)
		on := sinktest.ReadShard(ctx, t, client, stream, aws.ToString(sh.ShardId))
		holds := k.Cmp(lo) >= 0 && k.Cmp(hi) <= 0
		if !holds && len(on) > 0 || holds && len(on) != len(recs) {
			t.Fatalf("shard %s (%s..%s): %d records, want all %d on the shard holding the bucket key %s", aws.ToString(sh.ShardId), lo, hi, len(on), len(recs), key)
		}
		got = append(got, on...)
	}
	several := false
	for _, r := range got[:len(got)-1] {
		users, err := kpl.Users(r.Data)
		if err != nil || !kpl.IsAggregated(r.Data) {
			t.Fatalf("record %s: aggregated %v, %v", aws.ToString(r.SequenceNumber), kpl.IsAggregated(r.Data), err)
		}
		several = several || users[0].PartitionKey != users[len(users)-1].PartitionKey
		if aws.ToString(r.PartitionKey) != users[0].PartitionKey {
			t.Fatalf("record key %q, want its first user record's %q", aws.ToString(r.PartitionKey), users[0].PartitionKey)
		}
	}
	if !several {
		t.Fatal("no record aggregates several sessions")
	}
	byNode := deaggregateWithNode(t, node, root, got)
	byGo := userRecords(t, got)
	for name, users := range map[string][]userRecord{"aws-kinesis-agg": byNode, "kpl.Users": byGo} {
		if !sameBySession(users, sent, sessions) {
			t.Fatalf("%s: %d user records, not the %d envelopes sent in order", name, len(users), len(sent))
		}
		for i, u := range users {
			if u.partitionKey != sent[i].partitionKey || u.explicitHashKey != sent[i].explicitHashKey {
				t.Fatalf("%s: user record %d under %q %q, want %q %q", name, i, u.partitionKey, u.explicitHashKey, sent[i].partitionKey, sent[i].explicitHashKey)
			}
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
		PartitionKey    string `json:"partitionKey"`
		ExplicitHashKey string `json:"explicitHashKey"`
		Data            []byte `json:"data"`
	}
	if err := json.Unmarshal(out, &users); err != nil {
		t.Fatalf("aws-kinesis-agg output: %v", err)
	}
	got := make([]userRecord, len(users))
	for i, u := range users {
		got[i] = userRecord{partitionKey: u.PartitionKey, explicitHashKey: u.ExplicitHashKey, data: u.Data}
	}
	return got
}
