// The all-in bill's price model: us-east-1 list prices, the deployments
// the bill prices (prod's task and sessions per task, and tasks packed as
// the capacity phase measures), and the pure function that turns a bill
// run's counts into $ per 1,000 sessions-month.

package bench

import (
	"math"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// us-east-1 list prices, each with its source page and the date read in
// docs/references.md ("What users pay"). DynamoDB's are cost.go's.
const (
	PriceSQSStandardMillion    = 0.40    // $ per million requests (64 KB chunks), standard queue
	PriceSQSFIFOMillion        = 0.50    // $ per million requests, FIFO queue
	PriceKinesisShardHour      = 0.015   // provisioned: $ per shard-hour
	PriceKinesisPutUnitMillion = 0.014   // provisioned: $ per million 25 KB PUT payload units
	PriceKinesisStreamHour     = 0.04    // on-demand: $ per stream-hour
	PriceKinesisInGB           = 0.08    // on-demand: $ per GB in (records rounded up to 1 KB)
	PriceKinesisOutGB          = 0.04    // on-demand: $ per GB retrieved; NOT found on a source (issue 38's model): references.md says so
	PriceLogsIngestGB          = 0.50    // CloudWatch Logs, standard class: $ per GB ingested
	PriceFargateVCPUHour       = 0.04048 // Fargate Linux/x86: $ per vCPU-hour
	PriceFargateGBHour         = 0.004445
	PricePublicIPv4Hour        = 0.005 // $ per public IPv4 address-hour
	PriceDataTransferGB        = 0.0   // in from the internet, and to SQS, Kinesis, DynamoDB and CloudWatch in the region
)

// The bill's deployment arithmetic: the infra's autoscaling target
// (schema.ScalingTargetPercent of MaxSessionsPerTask) and SteadyCPUShare
// (the share of a task's vCPU its sessions may use steadily, restated from
// infra/stacks/config.go); each task has one public IPv4 address (public
// subnets, no NAT gateway).
const (
	BillTargetUtil      = float64(schema.ScalingTargetPercent) / 100
	BillSteadyCPUShare  = 0.5
	BillKinesisShardMsg = 1000    // records per second one shard takes
	BillKinesisShardIn  = 1 << 20 // bytes per second one shard takes
	BillSQSReceiveBatch = 10      // ReceiveMessage / DeleteMessageBatch entries per request
	billGB              = 1 << 30
)

// The deployments the bill prices every line at.
const (
	// BillDeployProd is today's prod defaults.
	BillDeployProd = "prod defaults"
	// BillDeployMeasured is tasks packed as the capacity phase measures.
	BillDeployMeasured = "packed as measured"
)

// BillDeployments are the deployments in report order.
var BillDeployments = []string{BillDeployProd, BillDeployMeasured}

// BillTask is a Fargate task size and the most sessions one task may hold
// (MaxSessionsPerTask); autoscaling keeps BillTargetUtil of that held, and
// the messages' CPU may lower it further (BillTask.Held).
type BillTask struct {
	VCPU        float64 `json:"vcpu"`
	MemoryGB    float64 `json:"memory_gb"`
	MaxSessions int     `json:"max_sessions"`
}

// BillProdTask is infra/stacks/config.go's EnvProd, restated: TaskCPU 512,
// TaskMemoryMiB 1024, MaxSessionsPerTask 3000.
var BillProdTask = BillTask{VCPU: 0.5, MemoryGB: 1, MaxSessions: 3000}

// billFargateSizes are the task sizes infra offers (infra/stacks/config.go,
// fargateMemoryMiB, restated): vCPU and the memory sizes in MiB Fargate
// accepts with it. The measured deployment picks the cheapest per session.
var billFargateSizes = []struct {
	cpu float64
	mib []int
}{
	{0.25, []int{512, 1024, 2048}},
	{0.5, []int{1024, 2048, 3072, 4096}},
	{1, []int{2048, 3072, 4096, 5120, 6144, 7168, 8192}},
	{2, []int{4096, 5120, 6144, 7168, 8192, 9216, 10240, 11264, 12288, 13312, 14336, 15360, 16384}},
}

// Held is how many sessions a task holds: BillTargetUtil of its
// MaxSessions, fewer when cpuPerSession (vCPU) would take more than
// BillSteadyCPUShare of its vCPU.
func (t BillTask) Held(cpuPerSession float64) float64 {
	held := float64(t.MaxSessions) * BillTargetUtil
	if cpuPerSession > 0 {
		held = math.Min(held, BillSteadyCPUShare*t.VCPU/cpuPerSession)
	}
	return held
}

// HourlyUSD is what one task costs an hour: Fargate on its configured size
// and its public IPv4 address.
func (t BillTask) HourlyUSD() float64 {
	return t.VCPU*PriceFargateVCPUHour + t.MemoryGB*PriceFargateGBHour + PricePublicIPv4Hour
}

// SessionsByMemory is the most sessions a task of memoryMiB holds by the
// worker's memory arithmetic (shared/schema: the sessions get what
// GOMEMLIMIT leaves after the large-frame, sink and switch budgets, each
// session its memory plus the small-frame allowance), with sessionKiB the
// memory one session holds.
func SessionsByMemory(memoryMiB int, sessionKiB float64) int {
	lim := float64(memoryMiB) * schema.GoMemLimitPercent / 100
	return int(schema.SessionRoom(lim) * 1024 / (sessionKiB + schema.SmallFrameAllowance/1024))
}

// MeasuredTask is the task packed as measured: of the sizes infra offers,
// the one with the lowest cost per session held, its MaxSessions as many
// sessions as its memory holds at sessionKiB per session (≤ 0: the
// worker's MeasuredSessionMemory) but no more than the capacity run held
// on one worker (measured; ≤ 0: no such bound), within the CPU share at
// cpuPerSession. Ties go to the smaller task.
func MeasuredTask(cpuPerSession, sessionKiB float64, measured int) BillTask {
	if sessionKiB <= 0 {
		sessionKiB = schema.MeasuredSessionMemory / 1024
	}
	var best BillTask
	bestCost := math.Inf(1)
	for _, sz := range billFargateSizes {
		for _, mib := range sz.mib {
			t := BillTask{VCPU: sz.cpu, MemoryGB: float64(mib) / 1024, MaxSessions: SessionsByMemory(mib, sessionKiB)}
			if measured > 0 {
				t.MaxSessions = min(t.MaxSessions, measured)
			}
			held := t.Held(cpuPerSession)
			if held < 1 {
				continue
			}
			if c := t.HourlyUSD() / held; c < bestCost {
				best, bestCost = t, c
			}
		}
	}
	return best
}

// Sink variants the bill prices (a kinesis run is priced twice).
const (
	BillSQS         = "sqs"
	BillKinesisOD   = "kinesis on-demand"
	BillKinesisProv = "kinesis provisioned"
	BillStdout      = "stdout → CloudWatch Logs"
)

// BillVariants are the priced sinks in report order.
var BillVariants = []string{BillSQS, BillKinesisOD, BillKinesisProv, BillStdout}

// BillInputs are the figures one priced line is computed from.
type BillInputs struct {
	Variant string
	// Sessions held in the run; WindowSec its window.
	Sessions  int
	WindowSec float64
	// Sink: what the engine saw (sqs, kinesis); for stdout Messages are
	// the lines and Bytes their bytes.
	Sink SinkCounts
	// SourceMessages are the messages the sessions received in the window
	// (0: Sink.Messages, one sink record per message). With packing, many
	// source messages share one SQS message or Kinesis record.
	SourceMessages int64
	// LogBytes are the worker's own log bytes in the window (one worker).
	LogBytes int64
	// CPUPerMsg is the worker's vCPU per message a second (from the
	// capacity figures).
	CPUPerMsg float64
	// Deployment is BillDeployProd ("" too) or BillDeployMeasured; MemPerSessKiB
	// the memory one session holds and MeasuredSessions the sessions one
	// worker held (the capacity figures; the measured deployment's
	// bounds).
	Deployment       string
	MemPerSessKiB    float64
	MeasuredSessions int
	// DynamoDB: write and read units per session-hour (the per-session
	// kinds) and per worker-hour (the per-worker kinds).
	WRUPerSH, RRUPerSH, WRUPerWH, RRUPerWH float64
}

// BillCost is one priced line: $ per 1,000 sessions-month by item.
type BillCost struct {
	Variant    string   `json:"variant"`
	Deployment string   `json:"deployment,omitempty"`
	Task       BillTask `json:"task"`
	// SessionsPerTsk are the sessions one task holds (BillTask.Held).
	SessionsPerTsk float64 `json:"sessions_per_task"`
	Tasks          float64 `json:"tasks_per_1000"`
	Fargate        float64 `json:"fargate"`
	IPv4           float64 `json:"public_ipv4"`
	DynamoDB       float64 `json:"dynamodb"`
	Sink           float64 `json:"sink"`
	Consumer       float64 `json:"consumer"`
	Logs           float64 `json:"worker_logs"`
	DataTransfer   float64 `json:"data_transfer"`
	Total          float64 `json:"total"`
	// SinkPerMillionMsgs is the sink's (and its consumer's) $ per million
	// source messages (not sink records).
	SinkPerMillionMsgs float64 `json:"sink_per_million_messages"`
	// Shards: provisioned Kinesis shards per 1,000 sessions (fractional).
	Shards float64 `json:"shards_per_1000,omitempty"`
}

// Price turns one run's counts into $ per 1,000 sessions-month.
func Price(in BillInputs) BillCost {
	c := BillCost{Variant: in.Variant, Deployment: in.Deployment}
	if in.Sessions <= 0 || in.WindowSec <= 0 {
		return c
	}
	month := HoursPerMonth * 3600.0
	per1000 := 1000 / float64(in.Sessions)
	scale := per1000 * month / in.WindowSec // window counts → per 1,000 sessions-month
	source := in.SourceMessages
	if source <= 0 {
		source = in.Sink.Messages
	}
	cpuPerSess := in.CPUPerMsg * float64(source) / in.WindowSec / float64(in.Sessions)
	c.Task = BillProdTask
	if in.Deployment == BillDeployMeasured {
		c.Task = MeasuredTask(cpuPerSess, in.MemPerSessKiB, in.MeasuredSessions)
	}
	perTask := c.Task.Held(cpuPerSess)
	c.SessionsPerTsk = perTask
	c.Tasks = 1000 / perTask
	c.Fargate = c.Tasks * (c.Task.VCPU*PriceFargateVCPUHour + c.Task.MemoryGB*PriceFargateGBHour) * HoursPerMonth
	c.IPv4 = c.Tasks * PricePublicIPv4Hour * HoursPerMonth
	// The per-worker kinds (heartbeats, the worker's reads) are shared by
	// the sessions one task holds.
	wru := in.WRUPerSH + in.WRUPerWH/perTask
	rru := in.RRUPerSH + in.RRUPerWH/perTask
	c.DynamoDB = MonthlyPer1000(wru, rru)
	// The worker's own logs go to CloudWatch Logs whatever the sink: per
	// task.
	c.Logs = float64(in.LogBytes) / in.WindowSec * month * c.Tasks / billGB * PriceLogsIngestGB
	msgs := float64(in.Sink.Messages) * scale
	switch in.Variant {
	case BillSQS:
		c.Sink = float64(in.Sink.SQSBilled) * scale * PriceSQSStandardMillion / 1e6
		// The consumer, modelled from the counts: long-polled receives of
		// up to 10 messages (each 64 KB chunk billed) and deletes in
		// batches of 10.
		recv := math.Max(msgs/BillSQSReceiveBatch, float64(in.Sink.Bytes)*scale/SQSChunkBytes)
		c.Consumer = (recv + msgs/BillSQSReceiveBatch) * PriceSQSStandardMillion / 1e6
	case BillKinesisOD:
		gb := float64(in.Sink.OnDemandKB) * KinesisOnDemandRnd * scale / billGB
		c.Sink = PriceKinesisStreamHour*HoursPerMonth + gb*PriceKinesisInGB
		c.Consumer = float64(in.Sink.Bytes) * scale / billGB * PriceKinesisOutGB
	case BillKinesisProv:
		recPerSec := float64(in.Sink.Messages) / in.WindowSec * per1000
		bytesPerSec := float64(in.Sink.Bytes) / in.WindowSec * per1000
		c.Shards = math.Max(recPerSec/BillKinesisShardMsg, bytesPerSec/BillKinesisShardIn)
		c.Sink = c.Shards*PriceKinesisShardHour*HoursPerMonth + float64(in.Sink.PutUnits)*scale*PriceKinesisPutUnitMillion/1e6
		// GetRecords is not billed in provisioned mode (the shard-hour
		// includes 2 MB/s of reads).
	case BillStdout:
		c.Sink = float64(in.Sink.Bytes) * scale / billGB * PriceLogsIngestGB
	}
	c.DataTransfer = float64(in.Sink.Bytes) * scale / billGB * PriceDataTransferGB
	c.Total = c.Fargate + c.IPv4 + c.DynamoDB + c.Sink + c.Consumer + c.Logs + c.DataTransfer
	if source > 0 {
		c.SinkPerMillionMsgs = (c.Sink + c.Consumer) / (float64(source) * scale) * 1e6
	}
	return c
}

// BillIdealCounts are c's bytes in the fewest billed units variant's
// pricing allows, however they are packed: SQS messages of one 64 KB chunk
// each (a 64 KB chunk is a billed request however many envelopes it
// holds); Kinesis records of one 25 KB PUT payload unit each, their
// on-demand KB the bytes rounded up to 1 KB once (on-demand bills bytes,
// so packing saves only each record's rounding). What the bytes cost
// (on-demand ingest and retrieval, provisioned shards by bytes) and the
// stream-hour stay. Requests are not priced and are left 0.
func BillIdealCounts(c SinkCounts, variant string) SinkCounts {
	switch variant {
	case BillSQS:
		packs := ceilDiv(c.Bytes, SQSChunkBytes)
		return SinkCounts{Messages: packs, Bytes: c.Bytes, SQSBilled: packs}
	case BillKinesisOD, BillKinesisProv:
		recs := ceilDiv(c.Bytes, KinesisPutUnit)
		return SinkCounts{Messages: recs, Bytes: c.Bytes, PutUnits: recs, OnDemandKB: ceilDiv(c.Bytes, KinesisOnDemandRnd)}
	}
	return c
}

// BillFloor is the lowest packed ÷ unpacked sink + consumer cost per
// message a sink's pricing allows.
type BillFloor struct {
	Variant string `json:"variant"`
	// BytesPerMsg are the bytes the sink carried per source message (the
	// packed run's, else the unpacked one's).
	BytesPerMsg float64 `json:"bytes_per_message"`
	// Billed units per source message (SQS 64 KB requests, on-demand KB,
	// provisioned PUT payload units): the unpacked run's, and ideally
	// packed.
	UnitsUnpacked float64 `json:"units_per_message_unpacked"`
	UnitsIdeal    float64 `json:"units_per_message_ideal"`
	// Ratio is the ideally packed sink + consumer $ per message over the
	// unpacked run's.
	Ratio float64 `json:"ratio"`
}

// billedUnits are c's billed units for variant (see BillFloor).
func billedUnits(c SinkCounts, variant string) int64 {
	switch variant {
	case BillSQS:
		return c.SQSBilled
	case BillKinesisOD:
		return c.OnDemandKB
	case BillKinesisProv:
		return c.PutUnits
	}
	return c.Bytes
}

// PriceFloor prices variant's floor: unpacked priced as it is, against
// bytes (the inputs whose bytes are packed: the packed run's) in
// BillIdealCounts; false when either has no messages.
func PriceFloor(unpacked, bytes BillInputs, variant string) (BillFloor, bool) {
	unpacked.Variant, bytes.Variant = variant, variant
	srcOf := func(in BillInputs) int64 {
		if in.SourceMessages > 0 {
			return in.SourceMessages
		}
		return in.Sink.Messages
	}
	su, sb := srcOf(unpacked), srcOf(bytes)
	if su <= 0 || sb <= 0 {
		return BillFloor{}, false
	}
	ideal := bytes
	ideal.SourceMessages = sb
	ideal.Sink = BillIdealCounts(bytes.Sink, variant)
	a, b := Price(ideal), Price(unpacked)
	if b.SinkPerMillionMsgs <= 0 {
		return BillFloor{}, false
	}
	return BillFloor{Variant: variant, BytesPerMsg: float64(bytes.Sink.Bytes) / float64(sb),
		UnitsUnpacked: float64(billedUnits(unpacked.Sink, variant)) / float64(su), UnitsIdeal: float64(billedUnits(ideal.Sink, variant)) / float64(sb),
		Ratio: a.SinkPerMillionMsgs / b.SinkPerMillionMsgs}, true
}
