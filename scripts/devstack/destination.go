package devstack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	ktypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wsfleet/wsfleet/scripts/sinkfault"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// Sinks of the stack's workers (Config.Sink).
const (
	SinkStdout  = "stdout"   // JSON lines on each worker's stdout, read by the stack
	SinkSQS     = "sqs"      // the batched sqs sink on a second fauxqs (the destination), through a sinkfault proxy
	SinkSQSFIFO = "sqs-fifo" // the same on a FIFO output queue (per-session order, deduplication ids)
	SinkKinesis = "kinesis"  // the batched kinesis sink on kinesalite, through a sinkfault proxy
)

// Destination names of a stack with an AWS sink.
const (
	OutputQueue     = "wsfleet-output"
	OutputFIFOQueue = "wsfleet-output.fifo"
	OutputStream    = "wsfleet-output"
	// OutputShards is the output stream's shard count (sessions spread
	// over them by partition key = connection_id).
	OutputShards = 2
)

// DestRecord is one record read from the destination (the output queue or
// stream): what its envelope says and when it reached the destination by
// the engine's own stamp (SQS SentTimestamp, Kinesis
// ApproximateArrivalTimestamp; milliseconds, the host's wall clock). An SQS
// message that is a pack (consume.FromSQS) gives one record per envelope,
// in its order, all with its id and stamp.
type DestRecord struct {
	SinkRecord
	Sub    int64
	AtNs   int64
	ID     string // SQS message id (shared by a pack's records), Kinesis sequence number
	Shard  string // kinesis
	Broken bool   // the body is not a sink envelope
	// Payload is the message the envelope carries, decoded from its form
	// (Form: sinkfault.FormJSON, FormString, FormB64, FormNone); only for
	// the OnDest call (not kept).
	Payload []byte
	Form    string
}

// destination is the stack's output engine, its fault proxy and its reader.
type destination struct {
	kind   string
	engine *enginetest.Process
	proxy  *sinkfault.Proxy
	url    string // output queue URL (sqs)
	sqs    *sqs.Client
	kin    *kinesis.Client

	// visibility is how long a message a receive returned stays hidden
	// from the other receives (seconds; destVisibility).
	visibility int32

	on     func(DestRecord)
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	seen  map[string]bool
	count int64 // records (a pack's envelopes each)
	bad   int64
	errs  []error
}

// awsClientConfig is the destination reader's client configuration. It
// reuses no connection: with keep-alive and an http.Client Timeout, a large
// ReceiveMessage answer (10 packs and their attributes) sometimes failed
// mid-body on fauxqs ("use of closed network connection", as in
// aws-sdk-go-v2 issue 2737; reproduced about one run in two reading 3,000
// messages with their attributes, never without keep-alive or without the
// Timeout); the SDK retried, and the messages of the lost answer stayed
// hidden for the visibility timeout.
func awsClientConfig() aws.Config {
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		HTTPClient:  &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

// startDestination starts the destination engine, creates the output queue
// or stream, and starts the fault proxy in front of it.
func (s *Stack) startDestination(ctx context.Context) error {
	c := &s.cfg
	d := &destination{kind: c.Sink, on: c.OnDest, seen: map[string]bool{}, visibility: destVisibility}
	s.dest = d
	logDir := filepath.Join(s.LogDir(), "destination")
	var err error
	switch c.Sink {
	case SinkSQS, SinkSQSFIFO:
		d.engine, err = enginetest.NewFauxqs(enginetest.Options{Root: c.Root, LogDir: logDir, OnExit: c.OnExit})
	case SinkKinesis:
		d.engine, err = enginetest.NewKinesalite(enginetest.Options{Root: c.Root, LogDir: logDir, OnExit: c.OnExit})
	default:
		return fmt.Errorf("devstack sink %q: want stdout, sqs or kinesis", c.Sink)
	}
	if err != nil {
		return err
	}
	if err := d.engine.Start(); err != nil {
		return err
	}
	cfg := awsClientConfig()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch c.Sink {
	case SinkSQS, SinkSQSFIFO:
		d.sqs = sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(d.engine.Endpoint()) })
		in := &sqs.CreateQueueInput{QueueName: aws.String(OutputQueue)}
		if c.Sink == SinkSQSFIFO {
			in = &sqs.CreateQueueInput{QueueName: aws.String(OutputFIFOQueue), Attributes: map[string]string{"FifoQueue": "true"}}
		}
		out, err := d.sqs.CreateQueue(cctx, in)
		if err != nil {
			return fmt.Errorf("create the output queue: %w", err)
		}
		d.url = aws.ToString(out.QueueUrl)
		if d.proxy, err = sinkfault.Start(sinkfault.Config{Mode: sinkfault.ModeSQS, Dest: d.engine.Endpoint(), Work: s.SQS.Endpoint(), OutputQueue: aws.ToString(in.QueueName), Seed: c.SinkSeed}); err != nil {
			return fmt.Errorf("start the sink fault proxy: %w", err)
		}
	case SinkKinesis:
		d.kin = kinesis.NewFromConfig(cfg, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(d.engine.Endpoint()) })
		if _, err := d.kin.CreateStream(cctx, &kinesis.CreateStreamInput{StreamName: aws.String(OutputStream), ShardCount: aws.Int32(OutputShards)}); err != nil {
			return fmt.Errorf("create the output stream: %w", err)
		}
		for {
			ds, err := d.kin.DescribeStream(cctx, &kinesis.DescribeStreamInput{StreamName: aws.String(OutputStream)})
			if err == nil && ds.StreamDescription.StreamStatus == ktypes.StreamStatusActive {
				break
			}
			if cctx.Err() != nil {
				return fmt.Errorf("the output stream never became active: %w", errors.Join(err, cctx.Err()))
			}
			time.Sleep(100 * time.Millisecond)
		}
		d.proxy, err = sinkfault.Start(sinkfault.Config{Mode: sinkfault.ModeKinesis, Dest: d.engine.Endpoint(), Seed: c.SinkSeed})
	}
	if err != nil {
		return err
	}
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	d.cancel = rcancel
	switch c.Sink {
	case SinkSQS, SinkSQSFIFO:
		for range destReceivers {
			d.wg.Add(1)
			go d.receiveSQS(rctx)
		}
	case SinkKinesis:
		shards, err := d.kin.ListShards(cctx, &kinesis.ListShardsInput{StreamName: aws.String(OutputStream)})
		if err != nil {
			rcancel()
			return fmt.Errorf("list the output stream's shards: %w", err)
		}
		for _, sh := range shards.Shards {
			d.wg.Add(1)
			go d.readShard(rctx, aws.ToString(sh.ShardId))
		}
	}
	s.log.Info().Str("sink", c.Sink).Str("destination", d.engine.Endpoint()).Str("proxy", d.proxy.URL()).Str("queue", d.url).Msg("destination up")
	return nil
}

// destReceivers is how many ReceiveMessage loops drain the output queue in
// parallel (each takes up to 10 messages per call: 4 keep well ahead of
// 48 sessions × 5 msg/s).
const destReceivers = 4

// destVisibility is the reader's visibility timeout (seconds). A receive
// whose answer never reached the reader (its HTTP client timed out, or the
// run's end cancelled it) still took its messages off the queue (fauxqs,
// like SQS, dequeues for a long poll whatever became of the caller): they
// come back after this long, and the final drain waits for them. Short, so
// the drain's wait is; longer than a receive and its delete take.
const destVisibility = 10

func (d *destination) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.errs) < 20 {
		d.errs = append(d.errs, err)
	}
}

// deliver hands one destination message over, once per message id: a
// record per envelope it carries (envs), or one broken record when it is
// none (err).
func (d *destination) deliver(id string, envs []consume.Envelope, err error, atNs int64, shard string) {
	if err != nil {
		envs = []consume.Envelope{{}}
	}
	d.mu.Lock()
	if d.seen[id] {
		d.mu.Unlock()
		return
	}
	d.seen[id] = true
	d.count += int64(len(envs))
	if err != nil {
		d.bad++
	}
	d.mu.Unlock()
	if d.on == nil {
		return
	}
	for _, env := range envs {
		d.on(DestRecord{SinkRecord: SinkRecord{ConnectionID: env.ConnectionID, Seq: env.Seq, LeaseEpoch: env.LeaseEpoch, WorkerID: env.WorkerID, ReceivedAtMs: env.ReceivedAtMs,
			DataSeq: DataSeqOf(env.Data)},
			Sub: env.Sub, AtNs: atNs, ID: id, Shard: shard, Broken: err != nil, Payload: env.Data, Form: env.Form})
	}
}

// receiveSQS is one receive loop: long polls, then deletes what it got.
// It ends when ctx ends (the final drain is Drain's).
func (d *destination) receiveSQS(ctx context.Context) {
	defer d.wg.Done()
	for ctx.Err() == nil {
		if _, err := d.receiveOnce(ctx, 1); err != nil && ctx.Err() == nil {
			d.fail(err)
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// receiveOnce is one ReceiveMessage (waiting up to wait seconds) and the
// DeleteMessageBatch of what it returned; n is how many messages it got.
func (d *destination) receiveOnce(ctx context.Context, wait int32) (int, error) {
	out, err := d.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(d.url), MaxNumberOfMessages: 10, WaitTimeSeconds: wait, VisibilityTimeout: d.visibility,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp},
		MessageAttributeNames:       []string{consume.ContentTypeAttribute},
	})
	if err != nil {
		return 0, fmt.Errorf("receive from the output queue: %w", err)
	}
	if len(out.Messages) == 0 {
		return 0, nil
	}
	var del []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range out.Messages {
		var at int64
		if v, ok := m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)]; ok {
			if msv, err := strconv.ParseInt(v, 10, 64); err == nil {
				at = msv * int64(time.Millisecond)
			}
		}
		if at == 0 {
			at = time.Now().UnixNano()
		}
		envs, err := consume.FromSQS(aws.ToString(m.Body), aws.ToString(m.MessageAttributes[consume.ContentTypeAttribute].StringValue))
		d.deliver(aws.ToString(m.MessageId), envs, err, at, "")
		del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
	}
	if _, err := d.sqs.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(d.url), Entries: del}); err != nil {
		return len(out.Messages), fmt.Errorf("delete from the output queue: %w", err)
	}
	return len(out.Messages), nil
}

// readShard reads one shard from its start, polling.
func (d *destination) readShard(ctx context.Context, shard string) {
	defer d.wg.Done()
	it, err := d.kin.GetShardIterator(ctx, &kinesis.GetShardIteratorInput{StreamName: aws.String(OutputStream), ShardId: aws.String(shard), ShardIteratorType: ktypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		d.fail(fmt.Errorf("shard %s iterator: %w", shard, err))
		return
	}
	iter := it.ShardIterator
	for iter != nil {
		out, err := d.kin.GetRecords(context.WithoutCancel(ctx), &kinesis.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.fail(fmt.Errorf("shard %s records: %w", shard, err))
			time.Sleep(200 * time.Millisecond)
			continue
		}
		for _, r := range out.Records {
			at := time.Now().UnixNano()
			if r.ApproximateArrivalTimestamp != nil {
				at = r.ApproximateArrivalTimestamp.UnixNano()
			}
			envs, err := consume.FromKinesis(r.Data) // plain or KPL-aggregated (kinesissink)
			d.deliver(shard+"/"+aws.ToString(r.SequenceNumber), envs, err, at, shard)
		}
		iter = out.NextShardIterator
		caughtUp := len(out.Records) == 0 && aws.ToInt64(out.MillisBehindLatest) == 0
		if caughtUp && ctx.Err() != nil {
			return // drained after the stop
		}
		if len(out.Records) == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// drain reads what is left at the destination: the receive loops stop, then
// the queue is read until two receives in a row come back empty and no
// message is in flight (hidden by a receive whose answer was lost: it is
// read once it comes back), or timeout; the shard readers stop once caught
// up.
func (d *destination) drain(ctx context.Context, timeout time.Duration) error {
	if d.cancel == nil {
		return errors.New("drain: the destination's readers never started")
	}
	d.cancel()
	if d.kind == SinkKinesis {
		done := make(chan struct{})
		go func() { d.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(timeout):
			return errors.New("drain the output stream: the shard readers did not catch up")
		}
		return d.err()
	}
	d.wg.Wait()
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	empty := 0
	for {
		n, err := d.receiveOnce(dctx, 1)
		if err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		if n > 0 {
			empty = 0
			continue
		}
		if empty++; empty < 2 {
			continue
		}
		// Two empty receives: done unless messages are in flight (taken
		// by a receive whose answer was lost; they come back after the
		// visibility timeout).
		left, err := d.inFlight(dctx)
		if err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		if left == 0 {
			return d.err()
		}
		empty = 0
	}
}

// inFlight is how many messages of the output queue are hidden by a
// receive (ApproximateNumberOfMessagesNotVisible) or still visible.
func (d *destination) inFlight(ctx context.Context) (int, error) {
	out, err := d.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(d.url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, fmt.Errorf("the output queue's counts: %w", err)
	}
	n := 0
	for _, a := range []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		v, err := strconv.Atoi(out.Attributes[string(a)])
		if err != nil {
			return 0, fmt.Errorf("the output queue's %s %q: %w", a, out.Attributes[string(a)], err)
		}
		n += v
	}
	return n, nil
}

func (d *destination) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return errors.Join(d.errs...)
}

// SinkProxy is the fault proxy in front of the destination (nil with the
// stdout sink).
func (s *Stack) SinkProxy() *sinkfault.Proxy {
	if s.dest == nil {
		return nil
	}
	return s.dest.proxy
}

// DestEngine is the destination engine (nil with the stdout sink).
func (s *Stack) DestEngine() *enginetest.Process {
	if s.dest == nil {
		return nil
	}
	return s.dest.engine
}

// DrainDestination reads what is left at the destination (call it after the
// workers stopped) and reports the reader's errors during the run.
func (s *Stack) DrainDestination(ctx context.Context) error {
	if s.dest == nil {
		return nil
	}
	return s.dest.drain(ctx, 60*time.Second)
}

// DestCounts are how many records the destination held (each envelope of
// an SQS pack one) and how many of its messages were not sink envelopes.
func (s *Stack) DestCounts() (n, bad int64) {
	if s.dest == nil {
		return 0, 0
	}
	s.dest.mu.Lock()
	defer s.dest.mu.Unlock()
	return s.dest.count, s.dest.bad
}

// sinkEnv is the workers' sink environment.
func (s *Stack) sinkEnv() []string {
	switch s.cfg.Sink {
	case SinkSQS, SinkSQSFIFO:
		return []string{schema.EnvSink + "=sqs", schema.EnvOutputQueueURL + "=" + s.dest.url, "AWS_ENDPOINT_URL_SQS=" + s.dest.proxy.URL()}
	case SinkKinesis:
		return []string{schema.EnvSink + "=kinesis", schema.EnvOutputStream + "=" + OutputStream, "AWS_ENDPOINT_URL_KINESIS=" + s.dest.proxy.URL()}
	}
	return []string{schema.EnvSink + "=stdout"}
}

func (s *Stack) stopDestination() {
	if s.dest == nil {
		return
	}
	if s.dest.cancel != nil {
		s.dest.cancel()
	}
	s.dest.wg.Wait()
	if s.dest.proxy != nil {
		s.dest.proxy.Close()
	}
	if s.dest.engine != nil {
		s.dest.engine.Stop()
	}
}
