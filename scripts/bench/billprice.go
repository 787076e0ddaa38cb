// The all-in bill's price model: us-east-1 list prices, the deployment the
// bill assumes (prod's task size and sessions per task), and the pure
// function that turns a bill run's counts into $ per 1,000 sessions-month.

package bench

import "math"

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

// The deployment the bill prices: infra/stacks/config.go's prod defaults
// (EnvProd: TaskCPU 512, TaskMemoryMiB 1024, MaxSessionsPerTask 3000,
// TargetUtilization 70) and its SteadyCPUShare; each task has one public
// IPv4 address (public subnets, no NAT gateway).
const (
	BillTaskVCPU        = 0.5
	BillTaskMemoryGB    = 1.0
	BillMaxSessions     = 3000
	BillTargetUtil      = 0.70
	BillSteadyCPUShare  = 0.5
	BillKinesisShardMsg = 1000    // records per second one shard takes
	BillKinesisShardIn  = 1 << 20 // bytes per second one shard takes
	BillSQSReceiveBatch = 10      // ReceiveMessage / DeleteMessageBatch entries per request
	billGB              = 1 << 30
)

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
	// DynamoDB: write and read units per session-hour (the per-session
	// kinds) and per worker-hour (the per-worker kinds).
	WRUPerSH, RRUPerSH, WRUPerWH, RRUPerWH float64
}

// BillCost is one priced line: $ per 1,000 sessions-month by item.
type BillCost struct {
	Variant        string  `json:"variant"`
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
	c := BillCost{Variant: in.Variant}
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
	msgPerSess := float64(source) / in.WindowSec / float64(in.Sessions)
	perTask := BillMaxSessions * BillTargetUtil
	if in.CPUPerMsg > 0 && msgPerSess > 0 {
		perTask = math.Min(perTask, BillSteadyCPUShare*BillTaskVCPU/(in.CPUPerMsg*msgPerSess))
	}
	c.SessionsPerTsk = perTask
	c.Tasks = 1000 / perTask
	c.Fargate = c.Tasks * (BillTaskVCPU*PriceFargateVCPUHour + BillTaskMemoryGB*PriceFargateGBHour) * HoursPerMonth
	c.IPv4 = c.Tasks * PricePublicIPv4Hour * HoursPerMonth
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
