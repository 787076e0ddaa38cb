package sinkfault

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/testkit/testwait"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/kpl"
)

func awsCfg() aws.Config {
	return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTPClient: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}, RetryMaxAttempts: 1} // devstack's awsClientConfig says why
}

func envelope(session string, seq int64) string {
	return fmt.Sprintf(`{"connection_id":%q,"seq":%d,"lease_epoch":3,"worker_id":"worker-1","received_at_ms":1,"data":{"seq":%d}}`, session, seq, seq)
}

// startEngine starts a local engine (fauxqs or kinesalite); a missing one
// fails the test (enginetest.InstalledRoot), it never skips.
func startEngine(t *testing.T, start func(enginetest.Options) (*enginetest.Process, error)) *enginetest.Process {
	t.Helper()
	root := enginetest.InstalledRoot(t)
	p, err := start(enginetest.Options{Root: root, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// received reads the queue until it is empty twice in a row (bounded),
// counting each envelope of a pack (consume.FromSQS).
func received(t *testing.T, ctx context.Context, q *sqs.Client, url string) map[string]int {
	t.Helper()
	got := map[string]int{}
	empty := 0
	for i := 0; empty < 2 && i < 100; i++ {
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: 60,
			MessageAttributeNames: []string{consume.ContentTypeAttribute}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range out.Messages {
			envs, err := consume.FromSQS(aws.ToString(m.Body), aws.ToString(m.MessageAttributes[consume.ContentTypeAttribute].StringValue))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range envs {
				got[fmt.Sprintf("%s/%d", e.ConnectionID, e.Seq)]++
			}
		}
	}
	return got
}

// On fauxqs through the proxy: refused entries are named in Failed with
// the code and fault asked for and are not stored; the rest are stored and
// stamped; a permanent refusal repeats at every attempt; requests that are
// not the output queue's go to the work engine; a frozen sink holds the
// request until thawed, and a request whose client gave up meanwhile never
// reaches the destination.
func TestSQSThroughTheProxy(t *testing.T) {
	dest := startEngine(t, enginetest.StartFauxqs)
	work := startEngine(t, enginetest.StartFauxqs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct := sqs.NewFromConfig(awsCfg(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(dest.Endpoint()) })
	out, err := direct.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("out")})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(out.QueueUrl)
	workQ := sqs.NewFromConfig(awsCfg(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(work.Endpoint()) })
	wq, err := workQ.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("work")})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(Config{Mode: ModeSQS, Dest: dest.Endpoint(), Work: work.Endpoint(), OutputQueue: "out", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	via := sqs.NewFromConfig(awsCfg(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(p.URL()) })

	// Not the sink's: the work queue, on the work engine.
	if _, err := via.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: wq.QueueUrl, MessageBody: aws.String("work item")}); err != nil {
		t.Fatal(err)
	}
	wm, err := workQ.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: wq.QueueUrl, WaitTimeSeconds: 1})
	if err != nil || len(wm.Messages) != 1 {
		t.Fatalf("the work queue's message: %v %+v", err, wm)
	}

	batch := func(from int64) *sqs.SendMessageBatchInput {
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(url)}
		for i := range int64(10) {
			in.Entries = append(in.Entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(envelope("a", from+i))})
		}
		return in
	}
	// Every entry refused permanently.
	p.SetRefuse(Refuse{Share: 1, Permanent: 1})
	res, err := via.SendMessageBatch(ctx, batch(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Successful) != 0 || len(res.Failed) != 10 || !res.Failed[0].SenderFault || aws.ToString(res.Failed[0].Code) != CodeInvalid {
		t.Fatalf("permanent refusals: %+v", res)
	}
	// Lifted: a permanently refused record is refused again, a new one
	// is stored and stamped.
	p.SetRefuse(Refuse{})
	in := batch(1)
	in.Entries = append(in.Entries[:1], sqstypes.SendMessageBatchRequestEntry{Id: aws.String("new"), MessageBody: aws.String(envelope("a", 100))})
	res, err = via.SendMessageBatch(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Successful) != 1 || aws.ToString(res.Successful[0].Id) != "new" || len(res.Failed) != 1 || aws.ToString(res.Failed[0].Id) != "0" {
		t.Fatalf("after the refusals: %+v", res)
	}
	// Transient refusals: not the sender's fault.
	p.SetRefuse(Refuse{Share: 1})
	res, err = via.SendMessageBatch(ctx, batch(200))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failed) != 10 || res.Failed[0].SenderFault {
		t.Fatalf("transient refusals: %+v", res)
	}
	p.SetRefuse(Refuse{})
	got := received(t, ctx, direct, url)
	if len(got) != 1 || got["a/100"] != 1 {
		t.Fatalf("the destination holds %v, want only a/100", got)
	}
	st := p.Stamps()
	if len(st) != 1 || len(st[Key{Session: "a", Seq: 100, Epoch: 3, Worker: "worker-1"}]) != 1 {
		t.Fatalf("stamps %v", st)
	}

	// Frozen: a client that gives up leaves nothing at the destination;
	// one that waits is answered after the thaw.
	p.Freeze()
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = via.SendMessageBatch(short, batch(300))
	cancelShort()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a frozen sink answered: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := via.SendMessageBatch(ctx, batch(400))
		done <- err
	}()
	testwait.Eventually(t, 5*time.Second, "the second request held by the freeze", func() bool { return p.Stats().Frozen >= 2 })
	select {
	case err := <-done:
		t.Fatalf("answered while frozen: %v", err)
	default:
	}
	p.Thaw()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got = received(t, ctx, direct, url)
	if len(got) != 10 || got["a/400"] != 1 || got["a/300"] != 0 {
		t.Fatalf("after the freeze the destination holds %v, want a/400..409 only", got)
	}
	if s := p.Stats(); s.Abandoned != 1 {
		t.Fatalf("stats %+v: want the one abandoned request", s)
	}
}

// An SQS entry that is a pack (the sqs sink's, consume's format) is
// judged as one entry and counted as its records: stored, every record is
// stamped; refused permanently, every record is remembered as refused, so
// a later entry holding any of them is refused again.
func TestSQSPacksThroughTheProxy(t *testing.T) {
	dest := startEngine(t, enginetest.StartFauxqs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct := sqs.NewFromConfig(awsCfg(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(dest.Endpoint()) })
	out, err := direct.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("out")})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(out.QueueUrl)
	p, err := Start(Config{Mode: ModeSQS, Dest: dest.Endpoint(), OutputQueue: "out", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	via := sqs.NewFromConfig(awsCfg(), func(o *sqs.Options) { o.BaseEndpoint = aws.String(p.URL()) })
	attrs := map[string]sqstypes.MessageAttributeValue{consume.ContentTypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(consume.PackV1)}}
	entry := func(id string, seqs ...int64) sqstypes.SendMessageBatchRequestEntry {
		var body []byte
		for i, seq := range seqs {
			if i > 0 {
				body = append(body, '\n')
			}
			body = append(body, envelope("a", seq)...)
		}
		return sqstypes.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(string(body)), MessageAttributes: attrs}
	}
	p.SetRefuse(Refuse{Share: 1, Permanent: 1})
	res, err := via.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.SendMessageBatchRequestEntry{entry("0", 1, 2, 3)}})
	if err != nil || len(res.Failed) != 1 || !res.Failed[0].SenderFault {
		t.Fatalf("a pack refused permanently: %+v, %v", res, err)
	}
	if got := p.PermanentlyRefused(); len(got) != 3 {
		t.Fatalf("permanently refused %v, want the pack's 3 records", got)
	}
	p.SetRefuse(Refuse{})
	res, err = via.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.SendMessageBatchRequestEntry{entry("0", 3, 4), entry("1", 5, 6)}})
	if err != nil || len(res.Failed) != 1 || aws.ToString(res.Failed[0].Id) != "0" || len(res.Successful) != 1 {
		t.Fatalf("a pack holding a refused record: %+v, %v", res, err)
	}
	if got := received(t, ctx, direct, url); len(got) != 2 || got["a/5"] != 1 || got["a/6"] != 1 {
		t.Fatalf("the destination holds %v, want a/5 and a/6", got)
	}
	if st := p.Stamps(); len(st) != 2 || len(st[Key{Session: "a", Seq: 6, Epoch: 3, Worker: "worker-1"}]) != 1 {
		t.Fatalf("stamps %v", st)
	}
}

// On kinesalite: per-record transient refusals keep their positions in
// the answer, a permanent refusal is the whole request's 400, the
// accepted records are stored and stamped.
func TestKinesisThroughTheProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct, p, via := kinesisBehindProxy(ctx, t)
	put := func(from int64) *kinesis.PutRecordsInput {
		in := &kinesis.PutRecordsInput{StreamName: aws.String("out")}
		for i := range int64(20) {
			in.Records = append(in.Records, ktypes.PutRecordsRequestEntry{Data: []byte(envelope("k", from+i)), PartitionKey: aws.String("k")})
		}
		return in
	}
	p.SetRefuse(Refuse{Share: 0.5})
	res, err := via.PutRecords(ctx, put(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 20 || aws.ToInt32(res.FailedRecordCount) == 0 || aws.ToInt32(res.FailedRecordCount) == 20 {
		t.Fatalf("half refused: %d failed of %d", aws.ToInt32(res.FailedRecordCount), len(res.Records))
	}
	want := map[int64]bool{}
	for i, r := range res.Records {
		if r.ErrorCode == nil {
			want[int64(i)+1] = true
		} else if aws.ToString(r.ErrorCode) != CodeKinesisThrottle {
			t.Fatalf("record %d: %s", i, aws.ToString(r.ErrorCode))
		}
	}
	p.SetRefuse(Refuse{Share: 1, Permanent: 1})
	_, err = via.PutRecords(ctx, put(100))
	if err == nil {
		t.Fatal("a permanent refusal answered 200")
	}
	if n := len(p.PermanentlyRefused()); n != 20 {
		t.Fatalf("%d records refused permanently, want the request's 20", n)
	}
	p.SetRefuse(Refuse{})
	it, err := direct.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String("out"), ShardId: aws.String("shardId-000000000000"), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]bool{}
	iter := it.ShardIterator
	testwait.Eventually(t, 10*time.Second, "the accepted records read from the stream", func() bool {
		recs, err := direct.GetRecords(ctx, &kinesis.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatal(err)
		}
		iter = recs.NextShardIterator
		for _, r := range recs.Records {
			e, err := ParseEnvelope(r.Data)
			if err != nil {
				t.Fatal(err)
			}
			got[e.Seq] = true
		}
		return len(got) >= len(want)
	})
	if len(got) != len(want) {
		t.Fatalf("the stream holds seqs %v, want %v", got, want)
	}
	for q := range want {
		if !got[q] || len(p.Stamps()[Key{Session: "k", Seq: q, Epoch: 3, Worker: "worker-1"}]) != 1 {
			t.Fatalf("seq %d: stored %v, stamps %v", q, got[q], p.Stamps())
		}
	}
}

// On kinesalite, records the kinesis sink aggregated (KPL format): each
// message in a stored record is stamped, a permanent refusal marks every
// message of the request, and a message refused permanently is refused
// again in a record of its own.
func TestKinesisAggregatedRecordsThroughTheProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, p, via := kinesisBehindProxy(ctx, t)
	aggregated := func(seqs ...int64) ktypes.PutRecordsRequestEntry {
		var data [][]byte
		for _, q := range seqs {
			data = append(data, []byte(envelope("k", q)))
		}
		return ktypes.PutRecordsRequestEntry{Data: kpl.Aggregate("k", data), PartitionKey: aws.String("k")}
	}
	plain := ktypes.PutRecordsRequestEntry{Data: []byte(envelope("k", 5)), PartitionKey: aws.String("k")}
	if _, err := via.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("out"), Records: []ktypes.PutRecordsRequestEntry{aggregated(1, 2, 3, 4), plain}}); err != nil {
		t.Fatal(err)
	}
	stamps := p.Stamps()
	for q := int64(1); q <= 5; q++ {
		if len(stamps[Key{Session: "k", Seq: q, Epoch: 3, Worker: "worker-1"}]) != 1 {
			t.Fatalf("seq %d not stamped once: %v", q, stamps)
		}
	}
	p.SetRefuse(Refuse{Share: 1, Permanent: 1})
	if _, err := via.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("out"), Records: []ktypes.PutRecordsRequestEntry{aggregated(10, 11, 12)}}); err == nil {
		t.Fatal("a permanent refusal answered 200")
	}
	if n := len(p.PermanentlyRefused()); n != 3 {
		t.Fatalf("%d messages refused permanently, want the record's 3", n)
	}
	p.SetRefuse(Refuse{})
	alone := ktypes.PutRecordsRequestEntry{Data: []byte(envelope("k", 11)), PartitionKey: aws.String("k")}
	if _, err := via.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String("out"), Records: []ktypes.PutRecordsRequestEntry{alone}}); err == nil {
		t.Fatal("a message refused permanently in an aggregated record was taken alone")
	}
}

// kinesisBehindProxy starts kinesalite with a one-shard stream "out" and a
// proxy (ModeKinesis, seed 2) in front of it: the clients of the engine
// (direct) and of the proxy (via). Both end with the test.
func kinesisBehindProxy(ctx context.Context, t *testing.T) (direct *kinesis.Client, p *Proxy, via *kinesis.Client) {
	t.Helper()
	eng := startEngine(t, enginetest.StartKinesalite)
	direct = kinesis.NewFromConfig(awsCfg(), func(o *kinesis.Options) { o.BaseEndpoint = aws.String(eng.Endpoint()) })
	if _, err := direct.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: aws.String("out"), ShardCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, "the stream active", func() bool {
		d, err := direct.DescribeStream(ctx, &kinesis.DescribeStreamInput{StreamName: aws.String("out")})
		return err == nil && d.StreamDescription.StreamStatus == ktypes.StreamStatusActive
	})
	p, err := Start(Config{Mode: ModeKinesis, Dest: eng.Endpoint(), Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	via = kinesis.NewFromConfig(awsCfg(), func(o *kinesis.Options) { o.BaseEndpoint = aws.String(p.URL()) })
	return direct, p, via
}
