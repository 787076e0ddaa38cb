package bench

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
)

// billFixture is one hour of 1,000 sessions at 1 msg/s of 800 B through
// sqs, ten messages to a request, with 2e-5 vCPU per message a second and
// 40 KiB per session measured at 19,000 sessions on one worker.
func billFixture(dep string) BillInputs {
	return BillInputs{Variant: BillSQS, Deployment: dep, Sessions: 1000, WindowSec: 3600, SourceMessages: 3_600_000,
		Sink:      SinkCounts{Requests: 360_000, Messages: 3_600_000, Bytes: 3_600_000 * 800, SQSBilled: 360_000},
		CPUPerMsg: 2e-5, MemPerSessKiB: 40, MeasuredSessions: 19_000,
		WRUPerSH: 60, RRUPerSH: 6, WRUPerWH: 3600, RRUPerWH: 13_000}
}

// Counts become $ per 1,000 sessions-month at both deployments: prod's
// task holds 65 % of 3,000 (1,950); the measured one is the size with the
// lowest cost per session (0.5 vCPU and 2 GiB here: its memory holds
// 18,958 sessions of 40 + 16 KiB, 12,322.7 at the 65 % target, and 50 % of
// its vCPU 12,500 at 2e-5 vCPU each), and the per-worker DynamoDB kinds are shared by each
// deployment's sessions per task; the sink and its consumer do not depend
// on the deployment.
func TestPriceAtBothDeployments(t *testing.T) {
	const month = HoursPerMonth // the fixture is one hour of 1,000 sessions
	prod, meas := Price(billFixture(BillDeployProd)), Price(billFixture(BillDeployMeasured))

	if prod.Task != BillProdTask || prod.SessionsPerTsk != 1950 || !near(prod.Tasks, 1000.0/1950) {
		t.Errorf("prod: task %+v holding %v (%v tasks), want prod's task holding 1,950", prod.Task, prod.SessionsPerTsk, prod.Tasks)
	}
	want := BillTask{VCPU: 0.5, MemoryGB: 2, MaxSessions: 18_958}
	if meas.Task != want || !near(meas.SessionsPerTsk, 18_958*0.65) {
		t.Errorf("measured: task %+v holding %v, want %+v holding 12,322.7", meas.Task, meas.SessionsPerTsk, want)
	}
	for _, c := range []struct {
		name           string
		got            BillCost
		vcpu, gb, held float64
	}{{"prod", prod, 0.5, 1, 1950}, {"measured", meas, 0.5, 2, 18_958 * 0.65}} {
		tasks := 1000 / c.held
		if w := tasks * (c.vcpu*PriceFargateVCPUHour + c.gb*PriceFargateGBHour) * month; !near(c.got.Fargate, w) {
			t.Errorf("%s: Fargate $%v, want $%v", c.name, c.got.Fargate, w)
		}
		if w := tasks * PricePublicIPv4Hour * month; !near(c.got.IPv4, w) {
			t.Errorf("%s: IPv4 $%v, want $%v", c.name, c.got.IPv4, w)
		}
		if w := MonthlyPer1000(60+3600/c.held, 6+13_000/c.held); !near(c.got.DynamoDB, w) {
			t.Errorf("%s: DynamoDB $%v, want $%v", c.name, c.got.DynamoDB, w)
		}
		// 360,000 billed requests an hour; the consumer receives and
		// deletes ten at a time.
		if w := 360_000 * month * PriceSQSStandardMillion / 1e6; !near(c.got.Sink, w) {
			t.Errorf("%s: sink $%v, want $%v", c.name, c.got.Sink, w)
		}
		if w := 2 * 360_000 * month * PriceSQSStandardMillion / 1e6; !near(c.got.Consumer, w) {
			t.Errorf("%s: consumer $%v, want $%v", c.name, c.got.Consumer, w)
		}
		if w := c.got.Fargate + c.got.IPv4 + c.got.DynamoDB + c.got.Sink + c.got.Consumer; !near(c.got.Total, w) {
			t.Errorf("%s: total $%v, want the items' sum $%v", c.name, c.got.Total, w)
		}
	}
	if !(meas.Total < prod.Total) {
		t.Errorf("the measured deployment ($%v) is not cheaper than prod's ($%v)", meas.Total, prod.Total)
	}

	// No task is sized beyond what the capacity run held on one worker.
	in := billFixture(BillDeployMeasured)
	in.MeasuredSessions = 5000
	if c := Price(in); c.Task.MaxSessions > 5000 || c.SessionsPerTsk > 0.7*5000 {
		t.Errorf("capped at 5,000 measured: task %+v holding %v", c.Task, c.SessionsPerTsk)
	}
	// At 50 msg/s the CPU share, not memory, bounds a task.
	in = billFixture(BillDeployMeasured)
	in.SourceMessages *= 50
	if c := Price(in); !near(c.SessionsPerTsk, BillSteadyCPUShare*c.Task.VCPU/(50*2e-5)) {
		t.Errorf("50 msg/s: task %+v holding %v, want its CPU share's", c.Task, c.SessionsPerTsk)
	}
}

// The worker's memory arithmetic: 9/10 of the task's memory, less 1/8, 1/4
// and 1/16 of that, over the session's memory and the 16 KiB allowance.
func TestSessionsByMemory(t *testing.T) {
	mib, kib := 1024.0, 48.0
	if got, want := SessionsByMemory(1024, kib), int(mib*0.9*9/16*1024/(kib+16)); got != want {
		t.Errorf("1 GiB at 48 KiB: %d sessions, want %d", got, want)
	}
	if got := SessionsByMemory(2048, 40); got != 18_958 {
		t.Errorf("2 GiB at 40 KiB: %d sessions, want 18,958", got)
	}
}

// A session that cannot resume is priced without the cost phase's
// periodic checkpoints and with one final checkpoint per session-hour,
// both taken from the cost phase's counts.
func TestNonResumableDynamoDB(t *testing.T) {
	rep := &Report{Cost: &CostResult{Active: &CostRun{Sessions: 10_000, WindowSec: 300,
		Steady: CostSplit{Kinds: []KindCost{
			{Kind: dynamostore.OpCheckpoint, WRUPerSH: 59.9},
			{Kind: "heartbeat", PerWorker: true, WRUPerWH: 3540},
			{Kind: "owned_by", RRUPerSH: 6.4},
			{Kind: "other", WRUPerSH: 0.1},
		}},
		Tenure: []TenureCost{{Kind: dynamostore.OpAcquire, WRU: 4.6}, {Kind: TenureFinalCheckpoint, WRU: 0.8}},
	}}}
	b := BillResult{CPUPerMsg: map[string]float64{}, CPUSource: map[string]string{}, MemPerSessKiB: map[string]float64{}, CapSessions: map[string]int{}}
	(&runner{rep: rep}).billInputs(&b)
	if !near(b.WRUPerSH, 60) || !near(b.CheckpointWRUPerSH, 59.9) || !near(b.FinalCheckpointWRU, 0.8) || !near(b.WRUPerWH, 3540) {
		t.Fatalf("inputs from the cost phase: %+v", b)
	}
	feed, transcript := BillWorkloads[0], BillWorkloads[1]
	if feed.Resumable || !transcript.Resumable {
		t.Fatalf("the exchange feed must not resume and the transcript must: %+v %+v", feed, transcript)
	}
	if got := b.SessionWRU(feed); !near(got, 0.1+0.8) {
		t.Errorf("exchange feed: %v WRU per session-hour, want 0.9 (no periodic checkpoints, one final one)", got)
	}
	if got := b.SessionWRU(transcript); !near(got, 60) {
		t.Errorf("transcript: %v WRU per session-hour, want 60", got)
	}
	if !strings.Contains(b.DynSource, "0.90 WRU per session-hour") {
		t.Errorf("the notes do not state the exchange feed's figure: %s", b.DynSource)
	}
	// price uses it: the same counts cost less in DynamoDB as the
	// exchange feed than as the transcript.
	run := BillRun{Sink: TPSQSBatched, Held: 1000, WindowSec: 3600, WorkerMessages: 3_600_000, Counts: billFixture("").Sink}
	run.Workload = feed.Name
	b.Runs = append(b.Runs, run)
	run.Workload = transcript.Name
	b.Runs = append(b.Runs, run)
	b.price()
	for _, dep := range BillDeployments {
		f, tr := b.CostsAt(dep)[feed.Name][BillSQS], b.CostsAt(dep)[transcript.Name][BillSQS]
		if w := MonthlyPer1000(0.9+3540/f.SessionsPerTsk, 6.4); !near(f.DynamoDB, w) || !(f.DynamoDB < tr.DynamoDB) {
			t.Errorf("%s: exchange feed DynamoDB $%v (want $%v), transcript $%v", dep, f.DynamoDB, w, tr.DynamoDB)
		}
	}
}

// The floors: SQS bills 64 KB chunks, so 830 B envelopes ideally packed
// cost 13 requests per 1,000 against 100 sent ten to a request; Kinesis
// on-demand saves only the 1 KB rounding; both include the consumer.
func TestPriceFloor(t *testing.T) {
	un := BillInputs{Sessions: 1000, WindowSec: 3600 * HoursPerMonth, SourceMessages: 1000,
		Sink: SinkCounts{Messages: 1000, Bytes: 830_000, SQSBilled: 100}}
	f, ok := PriceFloor(un, un, BillSQS)
	if !ok || !near(f.BytesPerMsg, 830) || !near(f.UnitsUnpacked, 0.1) || !near(f.UnitsIdeal, 0.013) {
		t.Fatalf("sqs floor %+v", f)
	}
	// Unpacked: 100 sends, 100 receives, 100 deletes; ideally packed: 13
	// sends, receives of every 64 KB chunk, 1.3 deletes.
	if w := (13 + 830_000.0/SQSChunkBytes + 1.3) / 300; !near(f.Ratio, w) {
		t.Errorf("sqs floor ratio %v, want %v", f.Ratio, w)
	}

	big := BillInputs{Sessions: 1000, WindowSec: 3600 * HoursPerMonth, SourceMessages: 1e9,
		Sink: SinkCounts{Messages: 1e9, Bytes: 830e9, PutUnits: 1e9, OnDemandKB: 1e9}}
	f, ok = PriceFloor(big, big, BillKinesisOD)
	kb := math.Ceil(830e9 / 1024)
	if !ok || !near(f.UnitsIdeal, kb/1e9) {
		t.Fatalf("on-demand floor %+v", f)
	}
	out := 830e9 / billGB * PriceKinesisOutGB
	stream := PriceKinesisStreamHour * HoursPerMonth
	if w := (stream + kb*1024/billGB*PriceKinesisInGB + out) / (stream + 1e9*1024/billGB*PriceKinesisInGB + out); !near(f.Ratio, w) {
		t.Errorf("on-demand floor ratio %v, want %v", f.Ratio, w)
	}
	if f, ok := PriceFloor(big, big, BillKinesisProv); !ok || !near(f.UnitsIdeal, math.Ceil(830e9/KinesisPutUnit)/1e9) || f.Ratio <= 0.1 {
		t.Errorf("provisioned floor %+v: shards by bytes keep it above 0.1", f)
	}
	if _, ok := PriceFloor(BillInputs{}, un, BillSQS); ok {
		t.Error("a floor without unpacked messages")
	}
}

// The market depth goal shows its floor beside it, and the section the
// floors' table, from the runs' counts.
func TestBillGoalsShowTheFloor(t *testing.T) {
	mk := func(label string, billed int64) BillResult {
		b := BillResult{Label: label, WRUPerSH: 60}
		b.Runs = []BillRun{{Workload: "market depth", Sink: TPSQSBatched, Held: 40, WindowSec: 30, WorkerMessages: 60_000,
			Counts: SinkCounts{Requests: billed, Messages: 60_000, Bytes: 60_000 * 830, SQSBilled: billed}}}
		b.price()
		return b
	}
	r := &Report{Mode: Full, Bill: []BillResult{mk(BillUnpacked, 6000), mk(BillPacked, 600)}}
	f := billFloors(r)[BillSQS]
	if w := (float64(ceilDiv(60_000*830, SQSChunkBytes)) + 60_000*830.0/SQSChunkBytes + float64(ceilDiv(60_000*830, SQSChunkBytes))/10) / 18_000; !near(f.Ratio, w) {
		t.Errorf("floor %v, want %v", f.Ratio, w)
	}
	var g *Goal
	for _, x := range billGoals(r) {
		if strings.HasPrefix(x.Figure, "Market depth") {
			g = &x
		}
	}
	if g == nil || !strings.Contains(g.Goal, "floor") || !strings.Contains(g.Goal, fmt.Sprintf("%.3f", f.Ratio)) {
		t.Errorf("market depth goal %+v, want the floor %.3f beside it", g, f.Ratio)
	}
	if md := Render(r); !strings.Contains(md, "What packing can save at best") || !strings.Contains(md, "| sqs | 830 | 0.1000 64 KB requests |") {
		t.Error("the section lacks the floors' table")
	}
}
