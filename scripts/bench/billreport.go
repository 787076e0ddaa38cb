// The bill phase's section of docs/BENCHMARKS.md and its chart.

package bench

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// BillChart is the bill's chart file (beside BENCHMARKS.md).
const BillChart = "benchmarks-bill.svg"

// billResult returns the result filed under label (nil: none).
func billResult(r *Report, label string) *BillResult {
	for i := range r.Bill {
		if r.Bill[i].Label == label {
			return &r.Bill[i]
		}
	}
	return nil
}

func dollars(v float64) string {
	switch {
	case v >= 100:
		return "$" + thousands(int(math.Round(v)))
	case v >= 10:
		return fmt.Sprintf("$%.1f", v)
	default:
		return fmt.Sprintf("$%.2f", v)
	}
}

// Size is t's vCPU and memory, as the tables show them.
func (t BillTask) Size() string {
	return fmt.Sprintf("%g vCPU, %g GiB", t.VCPU, t.MemoryGB)
}

// billFargateCPUs are the vCPU sizes the measured deployment chooses from.
func billFargateCPUs() string {
	var out []string
	for _, sz := range billFargateSizes {
		out = append(out, fmt.Sprintf("%g", sz.cpu))
	}
	return strings.Join(out, ", ")
}

// billSinkOf is the bill run's sink a variant is priced from.
func billSinkOf(variant string) string {
	switch variant {
	case BillSQS:
		return TPSQSBatched
	case BillKinesisOD, BillKinesisProv:
		return TPKinesis
	}
	return TPStdout
}

// billFloorWorkload is the workload whose goal compares the sink cost per
// message packed and unpacked.
const billFloorWorkload = "market depth"

// billFloors are the floors of billFloorWorkload's packed ÷ unpacked sink
// + consumer cost per message on every sink but stdout, from the latest
// pair: the unpacked run priced as it is against the packed run's bytes
// (the unpacked run's without a packed one) ideally packed (PriceFloor).
func billFloors(r *Report) map[string]BillFloor {
	un, pk := billPair(r)
	if un == nil {
		return nil
	}
	out := map[string]BillFloor{}
	for _, v := range []string{BillSQS, BillKinesisOD, BillKinesisProv} {
		a := billRunOf(un, billFloorWorkload, billSinkOf(v))
		if a == nil {
			continue
		}
		src, from := a, un
		if x := billRunOf(pk, billFloorWorkload, billSinkOf(v)); x != nil {
			src, from = x, pk
		}
		if f, ok := PriceFloor(un.inputs(*a), from.inputs(*src), v); ok {
			out[v] = f
		}
	}
	return out
}

// renderBillFloors says what the sinks' pricing lets packing save at
// best, beside the goal that judges it.
func renderBillFloors(p printer, r *Report) {
	fs := billFloors(r)
	if len(fs) == 0 {
		return
	}
	w := BillWorkloads[slices.IndexFunc(BillWorkloads, func(w BillWorkload) bool { return w.Name == billFloorWorkload })]
	p("**What packing can save at best** (%s, %g msg/s; the floor beside the goal \"sink + consumer $ per message, packed ÷ unpacked ≤ 0.1\"): SQS bills every 64 KB chunk of a request, so an envelope of B bytes costs at least B ÷ %s of a request however it is packed; Kinesis on-demand bills each record's bytes rounded up to 1 KB, so aggregation saves only the rounding; provisioned bills 25 KB PUT payload units per record and shards by bytes as well as records. The floor prices this run's unpacked counts as they are against the packed run's bytes ideally packed (%s-byte SQS messages, %s-byte Kinesis records: billprice.go, BillIdealCounts), with the consumer and the stream's fixed cost included as the goal's figure includes them:\n\n",
		w.Name, w.Rate, thousands(SQSChunkBytes), thousands(SQSChunkBytes), thousands(KinesisPutUnit))
	p("| sink | bytes per message | billed units per message, unpacked | billed units per message, ideally packed | billed units: ideal ÷ unpacked | sink + consumer floor: ideal ÷ unpacked |\n|---|---|---|---|---|---|\n")
	units := map[string]string{BillSQS: "64 KB requests", BillKinesisOD: "on-demand KB", BillKinesisProv: "PUT payload units"}
	for _, v := range []string{BillSQS, BillKinesisOD, BillKinesisProv} {
		f, ok := fs[v]
		if !ok {
			continue
		}
		p("| %s | %.0f | %.4f %s | %.4f %s | %.3f | **%.3f** |\n", v, f.BytesPerMsg, f.UnitsUnpacked, units[v], f.UnitsIdeal, units[v], f.UnitsIdeal/f.UnitsUnpacked, f.Ratio)
	}
	p("\n")
}

func renderBill(p printer, r *Report) {
	if len(r.Bill) == 0 {
		return
	}
	p("## 9. The all-in bill: $ per 1,000 sessions-month by workload and sink\n\n")
	p("What a user pays AWS (us-east-1 list prices, docs/references.md, \"What users pay\") for 1,000 sessions held for a month (730 h), from what each service would bill for the requests and bytes this run's engines saw. Every figure below is computed from the run's counts and the price table; none is typed in. Re-run: `bin/bench -mode full -only bill -merge`.\n\n")
	p("The phase runs every workload through the sqs and kinesis sinks twice in one invocation: \"%s\" with the sink's packing off (%s=0, %s=0: one record per message) and \"%s\" with it on (the defaults: the queued messages of many sessions per SQS message, of a hash bucket's sessions per Kinesis record, waiting up to the pack wait); the stdout sink, which has no packing, runs once and is filed under both. The goals (table above) compare the two from this run: the sink cost per message and the delivery latency packing adds.\n\n",
		BillUnpacked, schema.EnvSinkSQSPackBytes, schema.EnvSinkKinesisAggregateBytes, BillPacked)
	p("![all-in $ per 1,000 sessions-month](%s)\n\n", BillChart)
	p("Each line is priced at two deployments from the same counts: \"%s\" (today's: prod's task, %s, holding at most %s sessions) and \"%s\" (the task size infra offers that costs least per session, holding as many sessions as the capacity phase's measured memory and CPU per session allow: the low end of issue 38's ranges); the deployment notes below say how, and the cost tables which size.\n\n",
		BillDeployProd, BillProdTask.Size(), thousands(int(float64(BillProdTask.MaxSessions)*BillTargetUtil)), BillDeployMeasured)
	p("| workload | label | deployment | sqs | kinesis on-demand | kinesis provisioned | stdout → CloudWatch Logs |\n|---|---|---|---|---|---|---|\n")
	for _, w := range BillWorkloads {
		for _, b := range r.Bill {
			for _, dep := range BillDeployments {
				costs := b.CostsAt(dep)
				if len(costs) == 0 {
					continue
				}
				row := []string{}
				for _, v := range BillVariants {
					c, ok := costs[w.Name][v]
					if !ok {
						row = append(row, "—")
						continue
					}
					row = append(row, fmt.Sprintf("**%s** (sink + consumer %.0f %%)", dollars(c.Total), 100*(c.Sink+c.Consumer)/c.Total))
				}
				p("| %s, %g msg/s of ~%s B | %s | %s | %s |\n", w.Name, w.Rate, thousands(w.MessageBytes), b.Label, dep, strings.Join(row, " | "))
			}
		}
	}
	p("\n")
	renderBillFloors(p, r)
	renderBillDelivery(p, r)
	for _, b := range r.Bill {
		p("### %s\n\n", b.Label)
		renderPhase(p, b.Phase)
		p("- worker CPU per message (sessions per task): ")
		var src []string
		for _, w := range BillWorkloads {
			if s := b.CPUSource[w.Name]; s != "" {
				src = append(src, w.Name+": "+s)
			}
		}
		p("%s\n", strings.Join(src, "; "))
		p("- DynamoDB: %s\n", b.DynSource)
		p("- deployments priced: **%s**: prod's task (%s, Fargate Linux/x86) holding at most %s × %.0f %% (the autoscaling target) = %s sessions, fewer when the messages' CPU (above) would take more than %.0f %% of its vCPU; **%s**: of the task sizes infra offers (%s vCPU, with the memory sizes Fargate accepts for each), the one with the lowest Fargate and public IPv4 cost per session held, its MaxSessionsPerTask as many sessions as its memory holds by the worker's memory arithmetic (GOMEMLIMIT %.0f %% of the task's memory, less the large-frame 1/%d, sink 1/%d and switch 1/%d budgets, shared by sessions of the capacity run's KiB above the idle worker (above) + the %d KiB small-frame allowance) but no more than that capacity run held on one worker (nothing beyond what was measured), held at %.0f %% of it, fewer when the messages' CPU would take more than %.0f %% of its vCPU (the size and sessions per task of each line are in the cost table); the per-worker DynamoDB kinds are divided by each deployment's sessions per task; one public IPv4 address per task; fractional tasks and shards (the marginal cost of 1,000 sessions in a larger fleet), but one whole on-demand stream charged to these 1,000 sessions\n",
			BillDeployProd, BillProdTask.Size(), thousands(BillProdTask.MaxSessions), 100*BillTargetUtil, thousands(int(float64(BillProdTask.MaxSessions)*BillTargetUtil)), 100*BillSteadyCPUShare,
			BillDeployMeasured, billFargateCPUs(), float64(schema.GoMemLimitPercent), schema.LargeFrameShare, schema.SinkBudgetShare, schema.SwitchBudgetShare, schema.SmallFrameAllowance>>10, 100*BillTargetUtil, 100*BillSteadyCPUShare)
		p("- consumers: SQS modelled from the counts (long-polled receives of up to %d messages, each 64 KB chunk billed, and deletes in batches of %d); Kinesis on-demand retrieval of every byte once (one shared-throughput consumer); Kinesis provisioned reads are in the shard-hour; stdout has none\n", BillSQSReceiveBatch, BillSQSReceiveBatch)
		p("- batching: the sqs and kinesis sinks gather requests across the worker's sessions, so requests per message depend on the messages per second one worker carries (these runs' sessions on one worker); SQS bills the requests (a batch of 10 is one), Kinesis the records whatever the batching\n")
		p("- data transfer: in from the sources (the internet) and to SQS, Kinesis, DynamoDB and CloudWatch in the same region is free: $%.2f per GB\n\n", PriceDataTransferGB)
		p("| workload | sink | sessions held | window | messages/s (worker's count) | mean bytes | sink requests | billed units | billed units per message | log bytes/s |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, run := range b.Runs {
			if run.Error != "" {
				p("| %s | %s | failed: %s | | | | | | | |\n", run.Workload, run.Sink, oneLine(run.Error))
				continue
			}
			c := run.Counts
			mean := 0.0
			if c.Messages > 0 {
				mean = float64(c.Bytes) / float64(c.Messages)
			}
			units, per := "—", "—"
			switch run.Sink {
			case TPSQSBatched:
				units = fmt.Sprintf("%s requests (64 KB chunks)", thousands(int(c.SQSBilled)))
				per = fmt.Sprintf("%.3f", float64(c.SQSBilled)/float64(max(1, c.Messages)))
			case TPKinesis:
				units = fmt.Sprintf("%s PUT units; %s KB on-demand", thousands(int(c.PutUnits)), thousands(int(c.OnDemandKB)))
				per = fmt.Sprintf("%.3f; %.3f", float64(c.PutUnits)/float64(max(1, c.Messages)), float64(c.OnDemandKB)/float64(max(1, c.Messages)))
			case TPStdout:
				units = fmt.Sprintf("%s lines, %s bytes", thousands(int(c.Messages)), thousands(int(c.Bytes)))
			}
			reqs := "—"
			if run.Sink != TPStdout {
				reqs = thousands(int(c.Requests))
			}
			p("| %s | %s | %s | %.0f s | %s (%s) | %.0f | %s | %s | %s | %s |\n", run.Workload, run.Sink, thousands(run.Held), run.WindowSec,
				thousands(int(float64(c.Messages)/run.WindowSec)), thousands(int(float64(run.WorkerMessages)/run.WindowSec)), mean, reqs, units, per, thousands(int(float64(run.LogBytes)/run.WindowSec)))
		}
		p("\n| workload | sink | deployment | task (max sessions) | sessions per task | tasks | Fargate | public IPv4 | DynamoDB | sink | consumer | worker logs | data transfer | **total** | sink + consumer per million messages |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, w := range BillWorkloads {
			for _, v := range BillVariants {
				for _, dep := range BillDeployments {
					c, ok := b.CostsAt(dep)[w.Name][v]
					if !ok {
						continue
					}
					p("| %s | %s | %s | %s (%s) | %s | %.2f | %s | %s | %s | %s | %s | %s | %s | **%s** | %s |\n", w.Name, v, dep, c.Task.Size(), thousands(c.Task.MaxSessions), thousands(int(c.SessionsPerTsk)), c.Tasks,
						dollars(c.Fargate), dollars(c.IPv4), dollars(c.DynamoDB), dollars(c.Sink), dollars(c.Consumer), dollars(c.Logs), dollars(c.DataTransfer), dollars(c.Total), dollars(c.SinkPerMillionMsgs))
				}
			}
		}
		p("\n")
	}
	p("**Which sink for which volume** (this run's totals, cheapest first; stdout is CloudWatch Logs at $%.2f per GB ingested, for development only):\n\n", PriceLogsIngestGB)
	for _, b := range r.Bill {
		for _, dep := range BillDeployments {
			costs := b.CostsAt(dep)
			for _, w := range BillWorkloads {
				var vs []string
				for _, v := range BillVariants {
					if _, ok := costs[w.Name][v]; ok {
						vs = append(vs, v)
					}
				}
				slices.SortStableFunc(vs, func(x, y string) int { return cmp.Compare(costs[w.Name][x].Total, costs[w.Name][y].Total) })
				var parts []string
				for _, v := range vs {
					parts = append(parts, fmt.Sprintf("%s %s", v, dollars(costs[w.Name][v].Total)))
				}
				if len(parts) > 0 {
					p("- %s, %s, %s: %s\n", w.Name, b.Label, dep, strings.Join(parts, " < "))
				}
			}
		}
	}
	p("\n")
}

// BillChartSVG draws the totals: one row per workload and sink, one bar per
// label and deployment, on a log scale.
func BillChartSVG(r *Report) []byte {
	if len(r.Bill) == 0 {
		return nil
	}
	type bar struct {
		label string
		v     float64
	}
	type row struct {
		name string
		bars []bar
	}
	var rows []row
	lo, hi := math.Inf(1), 0.0
	// One series per label and deployment, in report order.
	var series []string
	for _, b := range r.Bill {
		for _, dep := range BillDeployments {
			if len(b.CostsAt(dep)) > 0 {
				series = append(series, b.Label+", "+dep)
			}
		}
	}
	for _, w := range BillWorkloads {
		for _, v := range BillVariants {
			rw := row{name: w.Name + " · " + v}
			for _, b := range r.Bill {
				for _, dep := range BillDeployments {
					if c, ok := b.CostsAt(dep)[w.Name][v]; ok && c.Total > 0 {
						rw.bars = append(rw.bars, bar{b.Label + ", " + dep, c.Total})
						lo, hi = math.Min(lo, c.Total), math.Max(hi, c.Total)
					}
				}
			}
			if len(rw.bars) > 0 {
				rows = append(rows, rw)
			}
		}
	}
	if len(rows) == 0 {
		return nil
	}
	minExp, maxExp := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if maxExp == minExp {
		maxExp++
	}
	colors := []string{"#4e79a7", "#f28e2b", "#59a14f", "#e15759"}
	const left, width, barH, gap, top = 300, 520, 12, 10, 50
	rowH := len(series)*barH + gap
	height := top + len(rows)*rowH + 40
	x := func(v float64) float64 { return left + width*(math.Log10(v)-minExp)/(maxExp-minExp) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", left+width+90, height)
	fmt.Fprintf(&b, `<text x="10" y="18" font-size="13" font-weight="bold">All-in $ per 1,000 sessions-month (us-east-1, log scale)</text>`+"\n")
	for i, sr := range series {
		fmt.Fprintf(&b, `<rect x="%d" y="28" width="10" height="10" fill="%s"/><text x="%d" y="37">%s</text>`+"\n", 10+i*220, colors[i%len(colors)], 10+i*220+14, xmlEscape(sr))
	}
	for e := minExp; e <= maxExp; e++ {
		xx := x(math.Pow(10, e))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
			xx, top-4, xx, height-30, xx, height-16, "$"+thousands(int(math.Pow(10, e))))
	}
	for i, rw := range rows {
		y0 := top + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-6, y0+len(rw.bars)*barH/2+4, xmlEscape(rw.name))
		for j, br := range rw.bars {
			li := max(0, slices.Index(series, br.label))
			y := y0 + j*barH
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/><text x="%.1f" y="%d">%s</text>`+"\n",
				left, y, math.Max(1, x(br.v)-left), barH-2, colors[li%len(colors)], x(br.v)+4, y+barH-3, dollars(br.v))
		}
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Bill labels: the phase's runs with the sinks' packing off and on (the
// goals compare them).
const (
	BillUnpacked = "unpacked"
	BillPacked   = "packed"
)

// billLegacyLabels are the labels of the phase before it measured packing
// off and on in one run; its pair replaces them.
var billLegacyLabels = []string{"before packing", "after packing"}

// billRunOf is b's run of workload through sinkName (nil: none, or it
// failed).
func billRunOf(b *BillResult, workload, sinkName string) *BillRun {
	if b == nil {
		return nil
	}
	for i := range b.Runs {
		if x := &b.Runs[i]; x.Workload == workload && x.Sink == sinkName && x.Error == "" {
			return x
		}
	}
	return nil
}

// billPair is the unpacked and packed figures of the latest run (either
// nil: not measured).
func billPair(r *Report) (un, pk *BillResult) {
	return billResult(r, BillUnpacked), billResult(r, BillPacked)
}

// renderBillDelivery is the delivery latency and packing table: per
// workload and batched sink, unpacked beside packed.
func renderBillDelivery(p printer, r *Report) {
	un, pk := billPair(r)
	if un == nil || pk == nil {
		return
	}
	p("**Delivery latency and packing** (this run; every message of every sink request, from the worker's read, its envelope's received_at_ms, to the request's arrival at the delaying proxy; the messages per wire record are per SQS message or Kinesis record):\n\n")
	p("| workload | sink | p50 unpacked | p50 packed | p99 unpacked | p99 packed | p99 packed − unpacked | messages per record unpacked | messages per record packed | messages timed unpacked / packed |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, w := range BillWorkloads {
		for _, s := range billSinks {
			if billPackingOff(s) == "" {
				continue
			}
			a, b := billRunOf(un, w.Name, s), billRunOf(pk, w.Name, s)
			if a == nil || b == nil || a.Delivery == nil || b.Delivery == nil {
				p("| %s | %s | not measured (a run failed) | | | | | | | |\n", w.Name, s)
				continue
			}
			x, y := a.Delivery, b.Delivery
			p("| %s, %g msg/s | %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %+.0f ms | %.2f | %.2f | %s / %s |\n", w.Name, w.Rate, s,
				x.Dist.P50, y.Dist.P50, x.Dist.P99, y.Dist.P99, y.Dist.P99-x.Dist.P99, x.PerRecord, y.PerRecord, thousands(x.Dist.N), thousands(y.Dist.N))
		}
	}
	p("\n")
}

// billLatencyGoals are issue 38's latency bounds: packing adds at most
// this much to the p99 delivery latency at the workload's rate.
var billLatencyGoals = []struct {
	workload string
	boundMs  float64
}{{"exchange feed", 50}, {"market depth", 10}}

// billGoals are issue 38's goals: the exchange feed's all-in bill on
// kinesis provisioned and sqs (judged on the packed figures when there are
// some, else on the latest), market depth's sink cost per message packed ÷
// unpacked on every sink but stdout, and the p99 delivery latency packing
// adds at 1 and 50 msg/s, each from one run's pair.
func billGoals(r *Report) []Goal {
	if len(r.Bill) == 0 {
		return nil
	}
	un, pk := billPair(r)
	cur := pk
	if cur == nil {
		cur = &r.Bill[len(r.Bill)-1]
	}
	// The exchange feed's goals are "at the packing the bench holds": the
	// measured deployment (prod defaults in reports from before it).
	dep := BillDeployMeasured
	if len(cur.CostsAt(dep)) == 0 {
		dep = BillDeployProd
	}
	var gs []Goal
	for _, c := range []struct {
		variant string
		bound   float64
	}{{BillKinesisProv, 15}, {BillSQS, 25}} {
		x, ok := cur.CostsAt(dep)["exchange feed"][c.variant]
		if !ok {
			continue
		}
		gs = append(gs, judged(fmt.Sprintf("All-in $ per 1,000 sessions-month, exchange feed (1 msg/s of ~300 B), %s (%s, %s: %s, %s sessions per task)", c.variant, cur.Label, dep, x.Task.Size(), thousands(int(x.SessionsPerTsk))), dollars(x.Total), "≤ "+dollars(c.bound), x.Total <= c.bound,
			fmt.Sprintf("+%s (×%.1f)", dollars(x.Total-c.bound), x.Total/c.bound)))
	}
	if un == nil || pk == nil {
		return gs
	}
	floors := billFloors(r)
	for _, v := range []string{BillSQS, BillKinesisOD, BillKinesisProv} {
		b, okb := un.Costs[billFloorWorkload][v]
		a, oka := pk.Costs[billFloorWorkload][v]
		if !okb || !oka || b.SinkPerMillionMsgs <= 0 {
			continue
		}
		per := ""
		if x := billRunOf(pk, billFloorWorkload, billSinkOf(v)); x != nil && x.Delivery != nil {
			per = fmt.Sprintf(" (%.1f messages per record)", x.Delivery.PerRecord)
		}
		goal := "≤ 0.1"
		if f, ok := floors[v]; ok {
			goal = fmt.Sprintf("≤ 0.1 (the pricing's floor: %.3f)", f.Ratio)
		}
		gs = append(gs, judged(fmt.Sprintf("Market depth (50 msg/s of ~640 B), %s: sink + consumer $ per million messages, %s ÷ %s", v, pk.Label, un.Label), fmt.Sprintf("%s ÷ %s = %.3f%s", dollars(a.SinkPerMillionMsgs), dollars(b.SinkPerMillionMsgs), a.SinkPerMillionMsgs/b.SinkPerMillionMsgs, per), goal, a.SinkPerMillionMsgs <= 0.1*b.SinkPerMillionMsgs,
			fmt.Sprintf("×%.1f", a.SinkPerMillionMsgs/(0.1*b.SinkPerMillionMsgs))))
	}
	for _, lg := range billLatencyGoals {
		w := BillWorkloads[slices.IndexFunc(BillWorkloads, func(w BillWorkload) bool { return w.Name == lg.workload })]
		for _, s := range billSinks {
			if billPackingOff(s) == "" {
				continue
			}
			g := Goal{Figure: fmt.Sprintf("p99 delivery latency packing adds, %s (%g msg/s per session), %s: %s − %s", w.Name, w.Rate, s, pk.Label, un.Label),
				Goal: fmt.Sprintf("≤ %.0f ms", lg.boundMs)}
			a, b := billRunOf(un, w.Name, s), billRunOf(pk, w.Name, s)
			if a != nil && b != nil && a.Delivery != nil && b.Delivery != nil && a.Delivery.Dist.N > 0 && b.Delivery.Dist.N > 0 {
				d := b.Delivery.Dist.P99 - a.Delivery.Dist.P99
				g.Known, g.Met = true, d <= lg.boundMs
				g.Measured = fmt.Sprintf("%.0f − %.0f = %+.0f ms", b.Delivery.Dist.P99, a.Delivery.Dist.P99, d)
				if !g.Met {
					g.Miss = fmt.Sprintf("+%.0f ms", d-lg.boundMs)
				}
			}
			gs = append(gs, g)
		}
	}
	return gs
}
