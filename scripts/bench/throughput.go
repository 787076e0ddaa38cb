// Phase throughput: one session as fast as the feed pushes into each sink,
// paced runs, and many sessions into sqs batched.

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/sessionitem"
	"github.com/wsfleet/wsfleet/testkit/enginetest"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
)

// throughputPhase is the phase (phase.go).
var throughputPhase = phase{name: PhaseThroughput, run: (*runner).throughput, render: renderThroughput,
	goals: func(r *Report) []Goal {
		if r.Throughput == nil {
			return nil
		}
		return throughputGoals(r.Throughput)
	}}

// SinkLatency is the latency the throughput phase adds to every sink
// request (a delaying proxy in front of fauxqs and kinesalite), to model an
// AWS round trip.
const SinkLatency = 15 * time.Millisecond

// MaxFeedRate is the feed's highest rate: at it the feed writes as fast as
// the worker reads (TCP backpressure paces it).
const MaxFeedRate = 100000

// Throughput run names (the sinks of the one-session runs).
const (
	TPDiscard      = "discard"
	TPStdout       = "stdout"
	TPSQSUnbatched = "sqs unbatched"
	TPSQSBatched   = "sqs batched"
	TPKinesis      = "kinesis"
)

// ThroughputRun is one run of the throughput phase.
type ThroughputRun struct {
	Name     string  `json:"name"`
	Sessions int     `json:"sessions"`
	FeedRate float64 `json:"feed_rate"` // per session; MaxFeedRate: as fast as the worker reads
	// WindowSec is the measured window; Messages the messages the sink
	// acknowledged in it (batched sinks: the batcher's records; others:
	// the worker's messages_in).
	WindowSec float64 `json:"window_s"`
	Messages  int64   `json:"messages"`
	MsgPerSec float64 `json:"msg_per_s"`
	// Requests are the sink requests in the window (counted by the
	// delaying proxy); ReqPerMsg = Requests ÷ Messages.
	Requests  int64   `json:"requests,omitempty"`
	ReqPerMsg float64 `json:"requests_per_message,omitempty"`
	// Lag: feed send (the message's ts) → the sink's answer to the request
	// carrying it, from the oldest message of each request in the window.
	Lag Dist `json:"lag_ms"`
	// One session's request round, from the proxy (one request in flight:
	// the worker's sessions > 1 overlap them, so only for one session):
	// EngineMs is the engine's answer time (after the added latency),
	// ClientGapMs the time from the proxy's answer to a request to the next
	// request's arrival (the worker: decoding the answer, the next batch,
	// the SDK's encoding and signing, the hops through the proxy).
	EngineMs    Dist `json:"engine_ms,omitzero"`
	ClientGapMs Dist `json:"client_gap_ms,omitzero"`
	// Stalls: the times a session waited for room in its buffer;
	// Reconnects: connections the session lost in the window (a source
	// drops a reader slower than its write timeout, 5 s for the feed).
	Stalls     int64   `json:"stalls"`
	Reconnects int64   `json:"reconnects"`
	WorkerCPU  float64 `json:"worker_cpu_pct"`
	EngineCPU  float64 `json:"engine_cpu_pct,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// ThroughputResult is the throughput phase.
type ThroughputResult struct {
	Phase
	LatencyMs float64         `json:"added_latency_ms"`
	InFlight  int             `json:"requests_in_flight"`
	BufferMiB int             `json:"session_buffer_mib"`
	Runs      []ThroughputRun `json:"runs"`
	// Ceilings are the engines' own rates without the added latency
	// (msg/s; SQS SendMessageBatch of 10, Kinesis PutRecords of 500, from
	// CeilingClients clients at once for CeilingWindow), by sink name.
	Ceilings map[string]float64 `json:"engine_ceiling_msg_per_s,omitempty"`
	// SerialCeilings: the same from one client, one request after the
	// other: what one ordered session (one request in flight) can reach
	// before the added latency.
	SerialCeilings map[string]float64 `json:"engine_serial_ceiling_msg_per_s,omitempty"`
	// SerialEngineCPU is the engine's CPU (% of one core) during the
	// one-client measurement: near 100 % the engine is CPU-bound on each
	// request.
	SerialEngineCPU map[string]float64 `json:"engine_serial_cpu_pct,omitempty"`
	// OrderedCeilings: one client, one request after the other, through
	// the delaying proxy the worker's requests take (Kinesis only): the
	// path of one ordered session without the worker, measured.
	OrderedCeilings map[string]float64 `json:"ordered_session_ceiling_msg_per_s,omitempty"`
}

// orderedBound is the ceiling the goal of one ordered session is judged
// against: the one measured through the proxy when there is one (the same
// path as the worker's requests: the proxy's hop and the SDK client's own
// time included), else orderedCeiling.
func (t *ThroughputResult) orderedBound(name string, perRequest int) float64 {
	if m := t.OrderedCeilings[name]; m > 0 {
		return m
	}
	return t.orderedCeiling(name, perRequest)
}

// orderedCeiling is what one ordered session can reach with the added
// latency: full requests of perRequest records, one after the other, each
// taking the engine's serial time plus the latency (0: not measured).
func (t *ThroughputResult) orderedCeiling(name string, perRequest int) float64 {
	serial := t.SerialCeilings[name]
	if serial <= 0 {
		return 0
	}
	return float64(perRequest) / (float64(perRequest)/serial + t.LatencyMs/1000)
}

// run returns the named run of one session at rate (nil: none).
func (t *ThroughputResult) run(name string, rate float64) *ThroughputRun {
	if t == nil {
		return nil
	}
	for i := range t.Runs {
		if t.Runs[i].Name == name && t.Runs[i].Sessions == 1 && t.Runs[i].FeedRate == rate && t.Runs[i].Error == "" {
			return &t.Runs[i]
		}
	}
	return nil
}

func (r *runner) throughput(ctx context.Context) error {
	sz := r.sz
	bd := batch.DefaultConfig()
	res := &ThroughputResult{LatencyMs: float64(SinkLatency.Milliseconds()), InFlight: bd.MaxInFlight, BufferMiB: bd.SessionBufferBytes >> 20}
	res.Phase = r.begin(PhaseThroughput, map[string]string{
		"worker": fmt.Sprintf("bin/streamer (DynamoDB store on dynalite, claims by reconciliation every 1 s), sink settings at their defaults (batches: the sink's count and byte limits, %s max delay, %d requests in flight, %d MiB per session); stdout → /dev/null",
			bd.MaxDelay, bd.MaxInFlight, bd.SessionBufferBytes>>20),
		"sinks":    fmt.Sprintf("fauxqs (standard queue) and kinesalite (4 shards) on this machine, each behind a proxy in the driver that adds %s to every request (an AWS round trip) and counts them; sqs unbatched is WSFLEET_SINK_BATCHING=false (one SendMessage per message, the path before batching)", SinkLatency),
		"feed":     fmt.Sprintf("bin/feed: one session at %d msg/s (the feed's maximum: it writes as fast as the worker reads), messages of ~60 bytes; one session at %d msg/s into sqs batched and kinesis (the lag below saturation); then %d sessions × %g msg/s into sqs batched", MaxFeedRate, PacedRate, sz.TPManySessions, sz.TPManyRate),
		"ceilings": fmt.Sprintf("each engine alone, without the proxy: %d clients at once, then 1 client (one request after the other), sending full requests (SQS SendMessageBatch of 10, Kinesis PutRecords of 500) of the records the runs send (the sink's envelope around a feed message, %d bytes; partition key the session's connection_id) for %s; then, for Kinesis, 1 client through the delaying proxy (one ordered session's path without the worker). The Kinesis 1-client ceilings are measured right after the Kinesis saturation run (same load, same stream), the others at the end", CeilingClients, len(ceilingBody()), CeilingWindow),
		"window":   fmt.Sprintf("settle %s once messages flow, then measure %s: messages acknowledged by the sink (the batcher's records; messages_in for the unbatched sinks) and the proxy's requests; lag = the sink's answer − the feed's ts of the oldest message of each request (not measured for discard and stdout)", sz.TPSettle, sz.TPWindow),
	})
	r.rep.Throughput = res
	defer res.end()
	e, err := r.startTPEnv(ctx)
	defer e.stop()
	if err != nil {
		return err
	}
	runs := []struct {
		name     string
		sessions int
		rate     float64
	}{{TPDiscard, 1, MaxFeedRate}, {TPStdout, 1, MaxFeedRate}, {TPSQSUnbatched, 1, MaxFeedRate}, {TPSQSBatched, 1, MaxFeedRate}, {TPKinesis, 1, MaxFeedRate},
		{TPSQSBatched, 1, PacedRate}, {TPKinesis, 1, PacedRate}, {TPSQSBatched, sz.TPManySessions, sz.TPManyRate}}
	var failed []string
	res.Ceilings, res.SerialCeilings, res.SerialEngineCPU, res.OrderedCeilings = map[string]float64{}, map[string]float64{}, map[string]float64{}, map[string]float64{}
	type ceil struct {
		clients int
		proxied bool
		into    map[string]float64
	}
	measure := func(name string, cs ...ceil) {
		for _, c := range cs {
			rate, cpu, err := e.ceiling(ctx, name, c.clients, c.proxied)
			if err != nil {
				failed = append(failed, name+" ceiling")
				r.log.Warn().Err(err).Str("engine", name).Msg("engine ceiling")
				continue
			}
			c.into[name] = rate
			if c.clients == 1 && !c.proxied {
				res.SerialEngineCPU[name] = cpu
			}
			r.log.Info().Str("engine", name).Int("clients", c.clients).Bool("proxied", c.proxied).Float64("msg_s", rate).Float64("engine_cpu_pct", cpu).Msg("engine ceiling")
		}
	}
	// One ordered session's ceilings (the engine's serial rate, and one
	// client through the proxy) are measured right after the Kinesis
	// saturation run, on the same machine load and stream: the run is
	// judged against them.
	ordered := []ceil{{1, false, res.SerialCeilings}, {1, true, res.OrderedCeilings}}
	for i, rn := range runs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		run, err := r.throughputRun(ctx, e, fmt.Sprintf("tp%d", i), rn.name, rn.sessions, rn.rate)
		if err != nil {
			run.Error = err.Error()
			failed = append(failed, rn.name)
			r.log.Warn().Err(err).Str("run", rn.name).Msg("throughput run")
		}
		res.Runs = append(res.Runs, run)
		r.log.Info().Str("run", rn.name).Int("sessions", rn.sessions).Float64("msg_s", run.MsgPerSec).Float64("req_per_msg", run.ReqPerMsg).
			Float64("lag_p99_ms", run.Lag.P99).Msg("throughput run")
		if rn.name == TPKinesis && rn.sessions == 1 && rn.rate == MaxFeedRate {
			measure(TPKinesis, ordered...)
		}
	}
	measure(TPSQSBatched, ceil{CeilingClients, false, res.Ceilings}, ceil{1, false, res.SerialCeilings})
	measure(TPKinesis, ceil{CeilingClients, false, res.Ceilings})
	if len(failed) > 0 {
		return fmt.Errorf("throughput runs failed: %v", failed)
	}
	return nil
}

// PacedRate is the rate of the one-session runs that measure the lag below
// saturation (at saturation the lag is the depth of the buffers).
const PacedRate = 1000

// newRunTable creates run tag's lease table (bench-<tag>) on te's dynalite.
func (te *tpEnv) newRunTable(ctx context.Context, tag string) (string, error) {
	table := "bench-" + tag
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return table, sessionitem.CreateTable(cctx, te.ddb, table)
}

// startSinkRun starts run tag in e (its folder, its own table): the feed
// at rate, a worker (bin/streamer on te's engines, sink name's settings,
// then tune's) and sessions seeded (resumable: with the feed's resume
// parameter); it returns once the worker holds them and streams at want
// msg/s each, and the settle after.
func (r *runner) startSinkRun(ctx context.Context, te *tpEnv, e *capEnv, tag, name string, sessions int, rate, want float64, resumable bool, tune func(map[string]string)) (*delayProxy, *enginetest.Process, error) {
	if err := os.MkdirAll(e.dir, 0o755); err != nil {
		return nil, nil, err
	}
	table, err := te.newRunTable(ctx, tag)
	if err != nil {
		return nil, nil, err
	}
	if err := r.startFeed(ctx, e, rate); err != nil {
		return nil, nil, err
	}
	settings, proxy, engine := te.sinkSettings(name)
	settings[schema.EnvTableName] = table
	settings[schema.EnvMaxSessions] = itoa(sessions + 100)
	if tune != nil {
		tune(settings)
	}
	if err := r.startCapWorker(ctx, e, tag+"-worker", []string{r.cfg.Bin.Streamer}, settings, te.engineEnv()); err != nil {
		return proxy, engine, err
	}
	if err := seedSessions(ctx, te.ddb, table, 0, sessions, e.feedURLs(), resumable); err != nil {
		return proxy, engine, err
	}
	if err := waitHeld(ctx, e, sessions, want, time.Minute+time.Duration(sessions/50)*time.Second); err != nil {
		return proxy, engine, err
	}
	return proxy, engine, sleepCtx(ctx, r.sz.TPSettle)
}

func (r *runner) throughputRun(ctx context.Context, te *tpEnv, tag, name string, sessions int, rate float64) (ThroughputRun, error) {
	sz := r.sz
	run := ThroughputRun{Name: name, Sessions: sessions, FeedRate: rate}
	e := &capEnv{dir: filepath.Join(te.dir, tag)}
	defer e.stop(func(err error) { r.log.Warn().Err(err).Msg("throughput run: stop") })
	want := rate
	if sessions == 1 {
		want = 10 // one session: wait for messages to flow (unbatched sqs runs near 1 ÷ the latency)
	}
	proxy, engine, err := r.startSinkRun(ctx, te, e, tag, name, sessions, rate, want, true, nil)
	if err != nil {
		return run, err
	}
	var req0 int64
	if proxy != nil {
		proxy.window(true)
		req0 = proxy.requests.Load()
	}
	enginePid := 0
	if engine != nil {
		enginePid = engine.Pid()
	}
	w, err := measureWindow(ctx, e, enginePid, sz.TPWindow)
	if err != nil {
		return run, err
	}
	run.WindowSec = w.seconds
	if w.s1.Sink != nil && w.s0.Sink != nil {
		run.Messages = w.s1.Sink.Records - w.s0.Sink.Records
	} else {
		run.Messages = w.s1.Messages["messages_in"] - w.s0.Messages["messages_in"]
	}
	run.MsgPerSec = float64(run.Messages) / w.seconds
	run.Stalls = w.s1.Messages["sink_stalls"] - w.s0.Messages["sink_stalls"]
	run.Reconnects = w.s1.Messages["reconnects"] - w.s0.Messages["reconnects"]
	run.WorkerCPU, run.EngineCPU = w.workCPU, w.otherCPU
	if proxy != nil {
		run.Requests = proxy.requests.Load() - req0
		ps := proxy.window(false)
		run.Lag = SummarizeMs(ps.lag)
		if sessions == 1 {
			run.EngineMs, run.ClientGapMs = SummarizeMs(ps.engine), SummarizeMs(ps.gap)
		}
		if run.Messages > 0 {
			run.ReqPerMsg = float64(run.Requests) / float64(run.Messages)
		}
	}
	return run, nil
}

// throughputGoals are issue 16's goals for the one-session runs.
func throughputGoals(t *ThroughputResult) []Goal {
	var gs []Goal
	for _, c := range []struct {
		name       string
		rate       float64
		reqMsg     float64
		perRequest int
	}{{TPSQSBatched, 3000, 0.11, 10}, {TPKinesis, 10000, 0.01, 500}} {
		run := t.run(c.name, MaxFeedRate)
		if run == nil {
			continue
		}
		goal, bound := "≥ "+thousands(int(c.rate)), c.rate
		if ceil := t.orderedBound(c.name, c.perRequest); ceil > 0 && c.name == TPKinesis {
			// One ordered session has one request in flight: its ceiling
			// is one client's serial rate through the proxy (measured),
			// or the engine's serial rate with the latency added.
			if m := t.OrderedCeilings[c.name]; m > 0 {
				goal += fmt.Sprintf(" or 90 %% of the ceiling for one ordered session (%s msg/s: one client, %d records per request, one after the other, through the same proxy; the engine's serial time + %.0f ms gives %s msg/s)",
					thousands(int(m)), c.perRequest, t.LatencyMs, thousands(int(t.orderedCeiling(c.name, c.perRequest))))
			} else {
				goal += fmt.Sprintf(" or 90 %% of the engine's ceiling for one ordered session (%s msg/s: %d records per request, %s per request alone + %.0f ms)",
					thousands(int(ceil)), c.perRequest, ms(1000*float64(c.perRequest)/t.SerialCeilings[c.name]), t.LatencyMs)
			}
			bound = min(bound, 0.9*ceil)
		}
		gs = append(gs, judged(fmt.Sprintf("One session into %s, +%.0f ms per request: sustained msg/s", c.name, t.LatencyMs), thousands(int(run.MsgPerSec)), goal, run.MsgPerSec >= bound,
			fmt.Sprintf("−%s (×%.2f)", thousands(int(bound-run.MsgPerSec)), run.MsgPerSec/bound)))
		gs = append(gs, judged(fmt.Sprintf("One session into %s at saturation: requests per message", c.name), fmt.Sprintf("%.4f", run.ReqPerMsg), fmt.Sprintf("≤ %g", c.reqMsg), run.Requests > 0 && run.ReqPerMsg <= c.reqMsg,
			fmt.Sprintf("+%.4f", run.ReqPerMsg-c.reqMsg)))
	}
	return gs
}

// feedRate names a run's feed rate.
func feedRate(r float64) string {
	if r < MaxFeedRate {
		return fmt.Sprintf("%g msg/s", r)
	}
	return "as fast as read"
}

func renderThroughput(p printer, r *Report) {
	t := r.Throughput
	if t == nil {
		return
	}
	heading(p, t, "8. Sinks at real rates: one session as fast as the feed pushes, +%.0f ms per sink request", t.LatencyMs)
	p("| sink | sessions × feed rate | msg/s | requests | requests/message | lag p50 | lag p99 | stalls | reconnects | worker CPU | engine CPU |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, run := range t.Runs {
		rate := feedRate(run.FeedRate)
		if run.Error != "" {
			p("| %s | %s × %s | failed: %s | | | | | | | | |\n", run.Name, thousands(run.Sessions), rate, oneLine(run.Error))
			continue
		}
		reqs, perMsg, p50, p99, eng := "—", "—", "—", "—", "—"
		if run.Requests > 0 {
			reqs, perMsg = thousands(int(run.Requests)), fmt.Sprintf("%.4f", run.ReqPerMsg)
		}
		if run.Lag.N > 0 {
			p50, p99 = ms(run.Lag.P50), ms(run.Lag.P99)
		}
		if run.EngineCPU > 0 {
			eng = fmt.Sprintf("%.0f %%", run.EngineCPU)
		}
		p("| %s | %s × %s | %s | %s | %s | %s | %s | %d | %d | %.0f %% | %s |\n", run.Name, thousands(run.Sessions), rate, thousands(int(run.MsgPerSec)),
			reqs, perMsg, p50, p99, run.Stalls, run.Reconnects, run.WorkerCPU, eng)
	}
	for _, run := range t.Runs {
		if run.Name != TPKinesis || run.EngineMs.N == 0 {
			continue
		}
		// One request in flight: the round is the added latency, the
		// engine's answer and the worker's gap.
		p("\n%s, 1 × %s: %d requests, each round = %.0f ms added + the engine's answer (mean %.1f ms, p50 %.1f, p99 %.1f) + the worker's gap from an answer to its next request (mean %.2f ms, p50 %.2f, p99 %.2f; the proxy's hops and the SDK's encoding included).\n",
			run.Name, feedRate(run.FeedRate), run.EngineMs.N, t.LatencyMs, run.EngineMs.Mean, run.EngineMs.P50, run.EngineMs.P99, run.ClientGapMs.Mean, run.ClientGapMs.P50, run.ClientGapMs.P99)
	}
	if len(t.Ceilings) > 0 {
		p("\n| engine alone (no added latency) | %d clients | 1 client, one request after the other | engine CPU (1 client) | one ordered session with +%.0f ms: 1 client's time + %.0f ms | one ordered session, measured: 1 client through the proxy |\n|---|---|---|---|---|---|\n", CeilingClients, t.LatencyMs, t.LatencyMs)
		for _, c := range []struct {
			name, engine string
			perRequest   int
		}{{TPSQSBatched, "fauxqs, SendMessageBatch of 10", 10}, {TPKinesis, "kinesalite, PutRecords of 500", 500}} {
			cpu, measured := "—", "—"
			if v, ok := t.SerialEngineCPU[c.name]; ok {
				cpu = fmt.Sprintf("%.0f %%", v)
			}
			if v := t.OrderedCeilings[c.name]; v > 0 {
				measured = thousands(int(v)) + " msg/s"
			}
			p("| %s | %s msg/s | %s msg/s | %s | %s msg/s | %s |\n", c.engine, thousands(int(t.Ceilings[c.name])), thousands(int(t.SerialCeilings[c.name])), cpu, thousands(int(t.orderedCeiling(c.name, c.perRequest))), measured)
		}
	}
	p("\nWith %.0f ms per request, one SendMessage per message caps a session near 1 ÷ %.0f ms; a batched sink sends up to 10 (SQS) or 500 (Kinesis) records per request, with up to %d requests in flight per worker (one per session on an ordered sink: Kinesis, FIFO queues). When the sink falls behind, the session's buffer (%d MiB) fills, its reads stall (counted) and TCP pushes back on the source. The engines run on this machine: their own ceiling (engine CPU, %% of one core) bounds the batched runs as much as the worker does. discard and stdout reach the feed's own maximum (%s msg/s). At saturation the lag is the depth of the buffers (the session's and the sockets') over the rate: the paced runs (%s msg/s) give the lag of a session the sink keeps up with. A Kinesis session (and a FIFO one) has one request in flight: its ceiling is 500 records per (request time alone + the added latency); measured through the proxy (the last column), that time also holds the proxy's hop and the SDK client's own encoding and decoding of the request, which the worker's requests pay too. The Kinesis goal is judged against the measured one.\n\n", t.LatencyMs, t.LatencyMs, t.InFlight, t.BufferMiB, thousands(MaxFeedRate), thousands(PacedRate))
}
