// Phase bill: issue 38's three workloads through the sqs, kinesis and
// stdout sinks, what each AWS service would bill counted at the engine
// boundary, priced into $ per 1,000 sessions-month (billprice.go).

package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
	"github.com/wsfleet/wsfleet/shared/schema"
)

// billPhase is the phase (phase.go).
var billPhase = phase{name: PhaseBill, run: (*runner).bill, render: renderBill, goals: billGoals}

// BillWorkload is one of issue 38's workloads.
type BillWorkload struct {
	Name string `json:"name"`
	// Rate per session (msg/s) and MessageBytes, the source message's
	// size the feed is padded to.
	Rate         float64 `json:"rate"`
	MessageBytes int     `json:"message_bytes"`
	// Resumable: the session's spec names resume (its source replays from
	// a seq), so the worker checkpoints it; otherwise the spec has the
	// feed's seq and no resume, and its DynamoDB is priced without
	// periodic checkpoints (BillResult.SessionWRU).
	Resumable bool `json:"resumable"`
}

// BillWorkloads are issue 38's: an exchange feed, a transcript, market
// depth. A public exchange trade stream cannot resume (docs/sources.md);
// the transcript and market depth keep the resumable spec the phase had.
var BillWorkloads = []BillWorkload{
	{"exchange feed", 1, 300, false},
	{"transcript", 2, 1024, true},
	{"market depth", 50, 640, true},
}

// BillTenuresPerSessionHour is how many tenures a session-hour is priced
// with for the per-tenure final checkpoint of a session that cannot
// resume: one an hour, the cost phase's own example (an upper bound for
// sessions that live longer).
const BillTenuresPerSessionHour = 1.0

// The bill runs' sinks (a kinesis run is priced on-demand and provisioned).
var billSinks = []string{TPSQSBatched, TPKinesis, TPStdout}

// BillRun is one workload through one sink.
type BillRun struct {
	Workload  string  `json:"workload"`
	Sink      string  `json:"sink"`
	Sessions  int     `json:"sessions"`
	Held      int     `json:"held"`
	WindowSec float64 `json:"window_s"`
	// Sink: counted at the delaying proxy (sqs, kinesis) or on the
	// worker's stdout (stdout: lines and their bytes).
	Counts SinkCounts `json:"counts"`
	// WorkerMessages: the worker's own messages_in over the window (a
	// check on the counts, not priced).
	WorkerMessages int64 `json:"worker_messages"`
	// LogBytes: the worker's log (stderr) bytes over the window.
	LogBytes  int64   `json:"log_bytes"`
	WorkerCPU float64 `json:"worker_cpu_pct"`
	// Packing: "off" (the sink's packing setting 0), "on" (its default),
	// "" (stdout has none); Env the run's own worker settings.
	Packing string            `json:"packing,omitempty"`
	Env     map[string]string `json:"worker_env,omitempty"`
	// Delivery: the messages the sink requests carried, their latency
	// from the worker's read to the proxy (sqs and kinesis; billlat.go).
	Delivery *BillLatency `json:"delivery,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// BillResult is one label's runs of the bill phase (BillUnpacked,
// BillPacked; the phase measures both in one invocation).
type BillResult struct {
	Phase
	Label string            `json:"label"`
	Env   map[string]string `json:"worker_env,omitempty"`
	Runs  []BillRun         `json:"runs"`
	// The inputs the prices used besides the runs' counts.
	CPUPerMsg map[string]float64 `json:"vcpu_per_msg_s"` // by workload
	CPUSource map[string]string  `json:"vcpu_source"`
	// MemPerSessKiB and CapSessions by workload: the same capacity run's
	// RSS per session above the idle worker and the sessions it held (the
	// measured deployment's bounds).
	MemPerSessKiB map[string]float64 `json:"rss_kib_per_session,omitempty"`
	CapSessions   map[string]int     `json:"capacity_sessions,omitempty"`
	WRUPerSH      float64            `json:"wru_per_session_hour"`
	RRUPerSH      float64            `json:"rru_per_session_hour"`
	WRUPerWH      float64            `json:"wru_per_worker_hour"`
	RRUPerWH      float64            `json:"rru_per_worker_hour"`
	// CheckpointWRUPerSH is the periodic checkpoints' share of WRUPerSH;
	// FinalCheckpointWRU the final checkpoint's write units per tenure
	// (both the cost phase's).
	CheckpointWRUPerSH float64 `json:"checkpoint_wru_per_session_hour,omitempty"`
	FinalCheckpointWRU float64 `json:"final_checkpoint_wru_per_tenure,omitempty"`
	DynSource          string  `json:"dynamodb_source"`
	// Costs by workload, then variant, at prod defaults (BillDeployProd);
	// Measured the same at BillDeployMeasured.
	Costs    map[string]map[string]BillCost `json:"costs"`
	Measured map[string]map[string]BillCost `json:"costs_packed_as_measured,omitempty"`
}

// CostsAt are b's costs by workload, then variant, at deployment dep.
func (b *BillResult) CostsAt(dep string) map[string]map[string]BillCost {
	if dep == BillDeployMeasured {
		return b.Measured
	}
	return b.Costs
}

// SessionWRU is the per-session kinds' write units per session-hour w is
// priced with: the cost phase's, and for a session that cannot resume
// without its periodic checkpoints and with the final one of
// BillTenuresPerSessionHour tenures.
func (b *BillResult) SessionWRU(w BillWorkload) float64 {
	if w.Resumable {
		return b.WRUPerSH
	}
	return b.WRUPerSH - b.CheckpointWRUPerSH + b.FinalCheckpointWRU*BillTenuresPerSessionHour
}

// billLabels are the run's two labels: its sqs and kinesis runs with
// packing off and on (the stdout run, one, is filed under both). A
// -bill-label names the pair ("<label>, unpacked").
func (r *runner) billLabels() (unpacked, packed string) {
	if r.cfg.BillLabel != "" {
		return r.cfg.BillLabel + ", " + BillUnpacked, r.cfg.BillLabel + ", " + BillPacked
	}
	return BillUnpacked, BillPacked
}

// billPackingOff is the worker setting that turns a batched sink's packing
// off ("": the sink has none).
func billPackingOff(sinkName string) string {
	switch sinkName {
	case TPSQSBatched:
		return schema.EnvSinkSQSPackBytes
	case TPKinesis:
		return schema.EnvSinkKinesisAggregateBytes
	}
	return ""
}

func (r *runner) bill(ctx context.Context) error {
	sz := r.sz
	unLabel, pkLabel := r.billLabels()
	phase := r.begin(PhaseBill, map[string]string{
		"workloads": fmt.Sprintf("exchange feed %d × 1 msg/s of ~300 B, transcript %d × 2 msg/s of ~1 KB, market depth %d × 50 msg/s of ~640 B (bin/feed -rate, -payload-bytes), each through sqs (fauxqs, batched) and kinesis (kinesalite) twice, packing off (%s=0, %s=0: %q) and on (the defaults: %q), and once through stdout (filed under both labels), one worker (bin/streamer, dynalite lease table) per run",
			sz.BillSessions[0], sz.BillSessions[1], sz.BillSessions[2], schema.EnvSinkSQSPackBytes, schema.EnvSinkKinesisAggregateBytes, unLabel, pkLabel),
		"window":               fmt.Sprintf("settle %s once every session delivers, then count for %s", sz.TPSettle, sz.BillWindow),
		"counting":             "sqs and kinesis: every sink request the delaying proxy (+15 ms) forwards to the engine, read from its body (billmeter.go): SQS requests and 64 KB chunks per request, messages and their bytes (body + attributes); Kinesis records, their bytes (data + partition key), 25 KB PUT payload units and 1 KB-rounded on-demand KB per record; stdout: the worker's stdout lines and bytes (each line a CloudWatch Logs event); the worker's own log bytes (stderr) in every run",
		"delivery latency":     "sqs and kinesis: every message of every sink request the proxy reads, taken apart as a consumer would (consume.FromSQS with the content-type attribute, consume.FromKinesis; billlat.go): the request's arrival at the proxy (before its +15 ms) minus the envelope's received_at_ms, the worker's wall-clock read time on the same machine; the messages per wire record are the envelopes over the SQS messages or Kinesis records that carried them",
		"pricing":              "billprice.go with docs/references.md's us-east-1 prices; a month is 730 h; per 1,000 sessions = the window's counts × 1,000 ÷ sessions × (730 h ÷ window)",
		"kinesis hash buckets": fmt.Sprintf("%s=%d, the stream's %d shards, as docs/worker.md (Kinesis hash buckets) tells users to set it (the default, 16, suits streams of up to 16 shards)", schema.EnvSinkKinesisHashBuckets, TPStreamShards, TPStreamShards),
		"sources":              fmt.Sprintf("%s: a spec that cannot resume (the feed's seq, no resume), as a real public exchange trade stream cannot replay (docs/sources.md); its DynamoDB is priced without periodic checkpoints (below); the others keep the resumable spec (resume.query_param from) the phase had, sources that replay from a seq, checkpointed as the cost phase measures", strings.Join(billNonResumable(), ", ")),
	})
	if len(r.cfg.BillEnv) > 0 {
		phase.Settings["worker env"] = fmt.Sprint(r.cfg.BillEnv)
	}
	newResult := func(label string) BillResult {
		res := BillResult{Phase: phase, Label: label, Env: r.cfg.BillEnv, Costs: map[string]map[string]BillCost{}, Measured: map[string]map[string]BillCost{},
			CPUPerMsg: map[string]float64{}, CPUSource: map[string]string{}, MemPerSessKiB: map[string]float64{}, CapSessions: map[string]int{}}
		res.Settings = maps.Clone(phase.Settings)
		r.billInputs(&res)
		return res
	}
	un, pk := newResult(unLabel), newResult(pkLabel)
	e, err := r.startTPEnv(ctx)
	defer e.stop()
	if err != nil {
		return fmt.Errorf("bill engines: %w", err)
	}
	var failed []string
	for wi, w := range BillWorkloads {
		for si, s := range billSinks {
			off := billPackingOff(s)
			for pi, packed := range []bool{false, true} {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if off == "" && packed {
					continue // one stdout run, filed under both labels
				}
				env := map[string]string{}
				if off != "" && !packed {
					env[off] = "0"
				}
				run, err := r.billRun(ctx, e, fmt.Sprintf("bill%d-%d-%d", wi, si, pi), w, s, sz.BillSessions[wi], env)
				if err != nil {
					run.Error = err.Error()
					failed = append(failed, fmt.Sprintf("%s/%s/%s", w.Name, s, run.Packing))
					r.log.Warn().Err(err).Str("workload", w.Name).Str("sink", s).Str("packing", run.Packing).Msg("bill run")
				}
				switch {
				case off == "":
					un.Runs, pk.Runs = append(un.Runs, run), append(pk.Runs, run)
				case packed:
					pk.Runs = append(pk.Runs, run)
				default:
					un.Runs = append(un.Runs, run)
				}
				r.log.Info().Str("workload", w.Name).Str("sink", s).Str("packing", run.Packing).Int64("messages", run.Counts.Messages).Int64("requests", run.Counts.Requests).Msg("bill run")
			}
		}
	}
	for _, res := range []*BillResult{&un, &pk} {
		res.price()
		res.end()
	}
	// The pair replaces the figures filed under its labels, and those of
	// the phase before it measured both in one run (billLegacyLabels).
	r.rep.Bill = slices.DeleteFunc(r.rep.Bill, func(b BillResult) bool {
		return b.Label == unLabel || b.Label == pkLabel || slices.Contains(billLegacyLabels, b.Label)
	})
	r.rep.Bill = append(r.rep.Bill, un, pk)
	if len(failed) > 0 {
		return fmt.Errorf("bill runs failed: %v", failed)
	}
	return nil
}

// billInputs fills the figures the prices take from other phases: the
// worker's CPU per message (the capacity phase's runs) and DynamoDB's
// units (the cost phase's steady window, the store's own meters).
func (r *runner) billInputs(res *BillResult) {
	for _, w := range BillWorkloads {
		if c := r.rep.Capacity; c != nil {
			var best *CapRunResult
			for i := range c.Runs {
				x := &c.Runs[i]
				if x.Sessions < 2 || len(x.Env) > 0 || x.Rate >= MaxFeedRate || x.CPUPer1k <= 0 || (x.Transport != "" && x.Transport != "wss") {
					continue
				}
				if best == nil || math.Abs(math.Log(x.Rate/w.Rate)) < math.Abs(math.Log(best.Rate/w.Rate)) {
					best = x
				}
			}
			if best != nil {
				res.CPUPerMsg[w.Name] = best.CPUPer1k / 100 / 1000
				res.MemPerSessKiB[w.Name] = best.RSSMarginalKB
				res.CapSessions[w.Name] = best.Held
				res.CPUSource[w.Name] = fmt.Sprintf("capacity phase, %s × %g msg/s, wss: %.2f %% of a core per 1,000 msg/s, %.1f KiB per session above the idle worker", thousands(best.Sessions), best.Rate, best.CPUPer1k, best.RSSMarginalKB)
			}
		}
	}
	if c := r.rep.Cost; c != nil && c.Active != nil {
		for _, k := range c.Active.Steady.Kinds {
			if k.PerWorker {
				res.WRUPerWH += k.WRUPerWH
				res.RRUPerWH += k.RRUPerWH
			} else {
				res.WRUPerSH += k.WRUPerSH
				res.RRUPerSH += k.RRUPerSH
			}
			if k.Kind == dynamostore.OpCheckpoint && !k.PerWorker {
				res.CheckpointWRUPerSH += k.WRUPerSH
			}
		}
		for _, t := range c.Active.Tenure {
			if t.Kind == TenureFinalCheckpoint {
				res.FinalCheckpointWRU += t.WRU
			}
		}
		res.DynSource = fmt.Sprintf("cost phase (%s sessions at 1 msg/s, the workers' dynamostore meters over a %.0f s steady window): per-session kinds %.2f WRU and %.2f RRU per session-hour, per-worker kinds %.0f WRU and %.0f RRU per worker-hour, divided by the deployment's sessions per task. A workload that cannot resume (%s) is priced without the periodic checkpoints (the %s kind, %.2f WRU per session-hour) and with the final checkpoint of %g tenure per session-hour (%.2f WRU per tenure, the cost phase's per-tenure figure): %.2f WRU per session-hour, computed from the cost phase's counts",
			thousands(c.Active.Sessions), c.Active.WindowSec, res.WRUPerSH, res.RRUPerSH, res.WRUPerWH, res.RRUPerWH,
			strings.Join(billNonResumable(), ", "), dynamostore.OpCheckpoint, res.CheckpointWRUPerSH, BillTenuresPerSessionHour, res.FinalCheckpointWRU, res.SessionWRU(BillWorkload{Resumable: false}))
	} else {
		res.DynSource = "none: run the cost phase first (DynamoDB priced at 0)"
	}
}

// billNonResumable are the names of the workloads that cannot resume.
func billNonResumable() []string {
	var out []string
	for _, w := range BillWorkloads {
		if !w.Resumable {
			out = append(out, w.Name)
		}
	}
	return out
}

// price fills Costs and Measured from the runs.
func (b *BillResult) price() {
	if b.Costs == nil {
		b.Costs = map[string]map[string]BillCost{}
	}
	if b.Measured == nil {
		b.Measured = map[string]map[string]BillCost{}
	}
	for _, run := range b.Runs {
		if run.Error != "" {
			continue
		}
		in := b.inputs(run)
		for _, dep := range BillDeployments {
			costs := b.CostsAt(dep)
			if costs[run.Workload] == nil {
				costs[run.Workload] = map[string]BillCost{}
			}
			in.Deployment = dep
			for _, v := range BillVariants {
				if billSinkOf(v) != run.Sink {
					continue // the variants priced from run's sink
				}
				in.Variant = v
				costs[run.Workload][v] = Price(in)
			}
		}
	}
}

// inputs are run's pricing inputs besides the variant and deployment: its
// counts, and the figures b took from the other phases (without capacity
// figures, the run's own worker CPU per message).
func (b *BillResult) inputs(run BillRun) BillInputs {
	w := BillWorkload{Name: run.Workload, Resumable: true}
	if i := slices.IndexFunc(BillWorkloads, func(x BillWorkload) bool { return x.Name == run.Workload }); i >= 0 {
		w = BillWorkloads[i]
	}
	in := BillInputs{Sessions: run.Held, WindowSec: run.WindowSec, Sink: run.Counts, SourceMessages: run.WorkerMessages, LogBytes: run.LogBytes,
		CPUPerMsg: b.CPUPerMsg[run.Workload], MemPerSessKiB: b.MemPerSessKiB[run.Workload], MeasuredSessions: b.CapSessions[run.Workload],
		WRUPerSH: b.SessionWRU(w), RRUPerSH: b.RRUPerSH, WRUPerWH: b.WRUPerWH, RRUPerWH: b.RRUPerWH}
	if in.CPUPerMsg == 0 && run.WorkerMessages > 0 {
		// No capacity figures: the run's own worker CPU per message.
		in.CPUPerMsg = run.WorkerCPU / 100 / (float64(run.WorkerMessages) / run.WindowSec)
		if b.CPUSource != nil {
			b.CPUSource[run.Workload] = "this run's worker CPU (no capacity figures)"
		}
	}
	return in
}

// billRun runs w through sinkName with env added to the worker's settings.
func (r *runner) billRun(ctx context.Context, te *tpEnv, tag string, w BillWorkload, sinkName string, sessions int, env map[string]string) (BillRun, error) {
	sz := r.sz
	run := BillRun{Workload: w.Name, Sink: sinkName, Sessions: sessions}
	if off := billPackingOff(sinkName); off != "" {
		run.Packing = "on"
		if env[off] == "0" {
			run.Packing = "off"
		}
	}
	if len(env) > 0 {
		run.Env = env
	}
	e := &capEnv{dir: filepath.Join(te.dir, tag), payload: max(1, w.MessageBytes-FeedMessageBytes(0, 3)-len(`,"pad":""`))}
	defer e.stop(func(err error) { r.log.Warn().Err(err).Msg("bill run: stop") })
	var lines, bytes atomic.Int64
	var counting atomic.Bool
	if sinkName == TPStdout {
		e.onStdout = func(line []byte) {
			if counting.Load() {
				lines.Add(1)
				bytes.Add(int64(len(line)))
			}
		}
	}
	proxy, _, err := r.startSinkRun(ctx, te, e, tag, sinkName, sessions, w.Rate, w.Rate, w.Resumable, func(settings map[string]string) {
		if sinkName == TPKinesis {
			// Hash buckets as docs/worker.md tells users to set them: the
			// stream's open shards, a power of two (the default, 16, fits
			// streams of up to 16 shards, at a quarter of the packing here).
			settings[schema.EnvSinkKinesisHashBuckets] = itoa(TPStreamShards)
		}
		for k, v := range r.cfg.BillEnv {
			settings[k] = v
		}
		for k, v := range env {
			settings[k] = v
		}
	})
	if err != nil {
		return run, err
	}
	log0 := fileSize(e.work.LogPath)
	if proxy != nil {
		proxy.meter.window(true)
	}
	counting.Store(true)
	wr, err := measureWindow(ctx, e, 0, sz.BillWindow)
	counting.Store(false)
	var counts SinkCounts
	if proxy != nil {
		var d Deliveries
		counts, d = proxy.meter.window(false)
		l := d.latency()
		run.Delivery = &l
	}
	if err != nil {
		return run, err
	}
	if sinkName == TPStdout {
		counts = SinkCounts{Messages: lines.Load(), Bytes: bytes.Load()}
	}
	run.Counts, run.WindowSec, run.WorkerCPU = counts, wr.seconds, wr.workCPU
	run.Held = (wr.s0.Owned + wr.s1.Owned) / 2
	run.WorkerMessages = wr.s1.Messages["messages_in"] - wr.s0.Messages["messages_in"]
	run.LogBytes = fileSize(e.work.LogPath) - log0
	if run.Held < sessions*9/10 {
		return run, fmt.Errorf("held %d of %d sessions in the window", run.Held, sessions)
	}
	return run, nil
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
