// The throughput phase's engines (dynalite, fauxqs and kinesalite behind the
// delaying proxies), the sink settings of a run, and each engine's own
// ceiling measured without the proxy.

package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	kintypes "github.com/aws/aws-sdk-go-v2/service/kinesis/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// tpEnv is what the throughput runs share: dynalite for the lease table,
// fauxqs and kinesalite behind delaying proxies.
type tpEnv struct {
	dir                  string
	dyn, fauxqs, kin     *enginetest.Process
	ddb                  *dynamodb.Client
	sqsProxy, kinProxy   *delayProxy
	sqsURL, kinURL       string // the proxies' endpoints
	queueURL, streamName string
	servers              []*http.Server
}

// TPStreamShards are the shards of the phases' Kinesis stream.
const TPStreamShards = 4

func (e *tpEnv) stop() {
	for _, s := range e.servers {
		_ = s.Close()
	}
	for _, p := range []*enginetest.Process{e.dyn, e.fauxqs, e.kin} {
		if p != nil {
			p.Stop()
		}
	}
}

func (r *runner) startTPEnv(ctx context.Context) (*tpEnv, error) {
	e := &tpEnv{dir: filepath.Join(r.cfg.WorkDir, "throughput")}
	if err := freshDir(e.dir); err != nil {
		return nil, err
	}
	opts := enginetest.Options{Root: r.cfg.Root, LogDir: e.dir}
	var err error
	if e.dyn, err = enginetest.StartDynalite(opts); err != nil {
		return e, err
	}
	if e.fauxqs, err = enginetest.StartFauxqs(opts); err != nil {
		return e, err
	}
	if e.kin, err = enginetest.StartKinesalite(opts); err != nil {
		return e, err
	}
	ac := localAWS(&http.Client{Timeout: 30 * time.Second})
	e.ddb = dynamodb.NewFromConfig(ac, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(e.dyn.Endpoint()) })
	sq := sqs.NewFromConfig(ac, func(o *sqs.Options) { o.BaseEndpoint = aws.String(e.fauxqs.Endpoint()) })
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bench-out")})
	if err != nil {
		return e, fmt.Errorf("output queue: %w", err)
	}
	e.queueURL = aws.ToString(q.QueueUrl)
	kc := kinesis.NewFromConfig(ac, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(e.kin.Endpoint()) })
	e.streamName = "bench-out"
	if _, err := kc.CreateStream(ctx, &kinesis.CreateStreamInput{StreamName: &e.streamName, ShardCount: aws.Int32(TPStreamShards)}); err != nil {
		return e, fmt.Errorf("output stream: %w", err)
	}
	for _, p := range []struct {
		target string
		proxy  **delayProxy
		url    *string
	}{{e.fauxqs.Endpoint(), &e.sqsProxy, &e.sqsURL}, {e.kin.Endpoint(), &e.kinProxy, &e.kinURL}} {
		d, rp, err := newDelayProxy(p.target, SinkLatency)
		if err != nil {
			return e, err
		}
		port, err := enginetest.FreePort()
		if err != nil {
			return e, err
		}
		srv := &http.Server{Addr: "127.0.0.1:" + itoa(port), Handler: rp, ReadHeaderTimeout: 10 * time.Second}
		e.servers = append(e.servers, srv)
		go func() { _ = srv.ListenAndServe() }()
		*p.proxy, *p.url = d, "http://127.0.0.1:"+itoa(port)
	}
	return e, nil
}

// engineEnv points a worker at the engines (the sinks through the proxies).
func (e *tpEnv) engineEnv() []string {
	return []string{"AWS_ENDPOINT_URL_DYNAMODB=" + e.dyn.Endpoint(), "AWS_ENDPOINT_URL_SQS=" + e.sqsURL, "AWS_ENDPOINT_URL_KINESIS=" + e.kinURL,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_EC2_METADATA_DISABLED=true"}
}

// sinkSettings are a run's worker settings and its proxy (nil: none).
func (e *tpEnv) sinkSettings(name string) (map[string]string, *delayProxy, *enginetest.Process) {
	switch name {
	case TPDiscard:
		return map[string]string{schema.EnvSink: "discard"}, nil, nil
	case TPStdout:
		return map[string]string{schema.EnvSink: "stdout"}, nil, nil
	case TPSQSUnbatched:
		return map[string]string{schema.EnvSink: "sqs", schema.EnvOutputQueueURL: e.queueURL, schema.EnvSinkBatching: "false"}, e.sqsProxy, e.fauxqs
	case TPSQSBatched:
		return map[string]string{schema.EnvSink: "sqs", schema.EnvOutputQueueURL: e.queueURL}, e.sqsProxy, e.fauxqs
	}
	return map[string]string{schema.EnvSink: "kinesis", schema.EnvOutputStream: e.streamName}, e.kinProxy, e.kin
}

// Engine ceiling measurement: CeilingClients clients send full requests
// straight to the engine (no added latency) for CeilingWindow.
const (
	CeilingClients = 8
	CeilingWindow  = 5 * time.Second
)

// ceilingBody is ceilingRecord's body.
func ceilingBody() []byte { b, _ := ceilingRecord(); return b }

// ceilingRecord is a record as the worker sends it in the runs: the sink's
// envelope (sink.AppendJSON) around a feed message ({"seq":N,"session":S,
// "ts":MS}) of the first session, whose connection_id is the partition key.
func ceilingRecord() (body []byte, key string) {
	key = fmt.Sprintf("dyn-%06d", 0)
	now := time.Now().UnixMilli()
	data := fmt.Appendf(nil, `{"seq":%d,"session":%q,"ts":%d}`, 1234567, key, now)
	return sink.AppendJSON(nil, sink.Message{ConnectionID: key, Seq: 1234567, LeaseEpoch: 1, WorkerID: "tp4-worker", ReceivedAtMs: now, Data: data}), key
}

// ceiling measures an engine's own rate and its CPU (% of one core): full
// requests (SQS: 10 messages, Kinesis: 500 records, the records the runs
// send) from clients clients at once, straight to the engine, or, proxied,
// through the delaying proxy the worker's requests take.
func (e *tpEnv) ceiling(ctx context.Context, name string, clients int, proxied bool) (float64, float64, error) {
	ac := localAWS(&http.Client{Timeout: 30 * time.Second})
	rec, key := ceilingRecord()
	body := string(rec)
	var send func(ctx context.Context) (int, error)
	var engine *enginetest.Process
	switch name {
	case TPSQSBatched:
		engine = e.fauxqs
		endpoint := e.fauxqs.Endpoint()
		if proxied {
			endpoint = e.sqsURL
		}
		c := sqs.NewFromConfig(ac, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
		entries := make([]sqstypes.SendMessageBatchRequestEntry, 10)
		for i := range entries {
			entries[i] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(itoa(i)), MessageBody: aws.String(body)}
		}
		send = func(ctx context.Context) (int, error) {
			_, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(e.queueURL), Entries: entries})
			return len(entries), err
		}
	case TPKinesis:
		engine = e.kin
		endpoint := e.kin.Endpoint()
		if proxied {
			endpoint = e.kinURL
		}
		c := kinesis.NewFromConfig(ac, func(o *kinesis.Options) { o.BaseEndpoint = aws.String(endpoint) })
		recs := make([]kintypes.PutRecordsRequestEntry, 500)
		for i := range recs {
			recs[i] = kintypes.PutRecordsRequestEntry{Data: rec, PartitionKey: aws.String(key)}
		}
		send = func(ctx context.Context) (int, error) {
			_, err := c.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(e.streamName), Records: recs})
			return len(recs), err
		}
	default:
		return 0, 0, fmt.Errorf("no engine for %s", name)
	}
	wctx, cancel := context.WithTimeout(ctx, CeilingWindow)
	defer cancel()
	var sent atomic.Int64
	g, gctx := errgroup.WithContext(wctx)
	cpu := startCPU(engine.Pid())
	t0 := time.Now()
	for range clients {
		g.Go(func() error {
			for gctx.Err() == nil {
				n, err := send(gctx)
				if err != nil {
					if gctx.Err() != nil {
						return nil
					}
					return err
				}
				sent.Add(int64(n))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, err
	}
	return float64(sent.Load()) / time.Since(t0).Seconds(), cpu.percent(), nil
}
