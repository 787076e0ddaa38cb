// The bill phase's meter: what SQS and Kinesis would bill for the sink
// requests the delaying proxy forwards, counted from the request bodies at
// the engine boundary (not from the worker's own counters).

package bench

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// Billing units of the sinks (docs/references.md, "What users pay").
const (
	SQSChunkBytes      = 64 << 10 // every 64 KB chunk of a request's payload is one billed request
	KinesisPutUnit     = 25 << 10 // provisioned: one PUT payload unit per started 25 KB of a record
	KinesisOnDemandRnd = 1 << 10  // on-demand: each record's size rounded up to 1 KB
)

// SinkCounts are what a sink engine saw over a window, as AWS bills it.
type SinkCounts struct {
	// Requests are the sink API calls (SendMessage(Batch), PutRecord(s)).
	Requests int64 `json:"requests"`
	// Messages are the SQS messages or Kinesis records the requests carried;
	// Bytes their payload (SQS: body + attribute names, types and values;
	// Kinesis: data + partition key).
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// SQSBilled: Σ over requests of max(1, ceil(payload ÷ 64 KB)).
	SQSBilled int64 `json:"sqs_billed_requests,omitempty"`
	// PutUnits: Σ over records of ceil(size ÷ 25 KB); OnDemandKB: Σ over
	// records of ceil(size ÷ 1 KB).
	PutUnits   int64 `json:"kinesis_put_units,omitempty"`
	OnDemandKB int64 `json:"kinesis_on_demand_kb,omitempty"`
	// Unparsed are requests whose body the meter could not read (counted
	// as requests only).
	Unparsed int64 `json:"unparsed,omitempty"`
}

// sinkMeter counts the sink requests the proxy forwards while on, and
// the messages they carry (billlat.go).
type sinkMeter struct {
	mu sync.Mutex
	on bool
	c  SinkCounts
	d  Deliveries
}

// window starts (on) or ends the counting; ending returns the counts and
// the deliveries.
func (m *sinkMeter) window(on bool) (SinkCounts, Deliveries) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, d := m.c, m.d
	m.on, m.c, m.d = on, SinkCounts{}, Deliveries{}
	return c, d
}

// observe counts one request that arrived at the proxy at arrivedMs (Unix
// ms): target is its X-Amz-Target header.
func (m *sinkMeter) observe(target string, body []byte, arrivedMs int64) {
	m.mu.Lock()
	on := m.on
	m.mu.Unlock()
	if !on {
		return
	}
	c, err := CountRequest(target, body)
	d, derr := ReadDeliveries(target, body, arrivedMs)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.on {
		return
	}
	if derr == nil {
		m.d.add(d)
	}
	if err != nil {
		m.c.Requests++
		m.c.Unparsed++
		return
	}
	m.c.add(c)
}

func (c *SinkCounts) add(x SinkCounts) {
	c.Requests += x.Requests
	c.Messages += x.Messages
	c.Bytes += x.Bytes
	c.SQSBilled += x.SQSBilled
	c.PutUnits += x.PutUnits
	c.OnDemandKB += x.OnDemandKB
	c.Unparsed += x.Unparsed
}

// sqsAttr is an SQS message attribute as the JSON protocol carries it.
type sqsAttr struct {
	DataType    string `json:"DataType"`
	StringValue string `json:"StringValue"`
	BinaryValue []byte `json:"BinaryValue"` // base64 in JSON
}

type sqsEntry struct {
	MessageBody       string             `json:"MessageBody"`
	MessageAttributes map[string]sqsAttr `json:"MessageAttributes"`
}

type kinRecord struct {
	Data         []byte `json:"Data"` // base64 in JSON
	PartitionKey string `json:"PartitionKey"`
}

// sinkRequest is one sink request's wire records, decoded from its body
// by its X-Amz-Target: the SQS messages of a SendMessage(Batch) (JSON
// protocol) or the records of a Kinesis PutRecord(s) (JSON 1.1); neither
// for another call (queue and stream set-up, reads).
type sinkRequest struct {
	op      string
	sqs     bool
	kinesis bool
	entries []sqsEntry
	records []kinRecord
}

func decodeSinkRequest(target string, body []byte) (sinkRequest, error) {
	op := target[strings.LastIndexByte(target, '.')+1:]
	r := sinkRequest{op: op}
	switch {
	case strings.HasPrefix(target, "AmazonSQS.") && (op == "SendMessage" || op == "SendMessageBatch"):
		var in struct {
			sqsEntry
			Entries []sqsEntry `json:"Entries"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return r, fmt.Errorf("%s body: %w", op, err)
		}
		r.sqs, r.entries = true, in.Entries
		if op == "SendMessage" {
			r.entries = []sqsEntry{in.sqsEntry}
		}
	case strings.HasPrefix(target, "Kinesis_") && (op == "PutRecord" || op == "PutRecords"):
		var in struct {
			kinRecord
			Records []kinRecord `json:"Records"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return r, fmt.Errorf("%s body: %w", op, err)
		}
		r.kinesis, r.records = true, in.Records
		if op == "PutRecord" {
			r.records = []kinRecord{in.kinRecord}
		}
	}
	return r, nil
}

// CountRequest meters one sink request (SQS JSON protocol or Kinesis JSON
// 1.1) by its X-Amz-Target; other calls (queue and stream set-up, reads)
// count as nothing.
func CountRequest(target string, body []byte) (SinkCounts, error) {
	var c SinkCounts
	req, err := decodeSinkRequest(target, body)
	if err != nil {
		return c, err
	}
	switch {
	case req.sqs:
		var payload int64
		for _, e := range req.entries {
			n := int64(len(e.MessageBody))
			for name, a := range e.MessageAttributes {
				n += int64(len(name) + len(a.DataType) + len(a.StringValue) + len(a.BinaryValue))
			}
			payload += n
		}
		c.Requests, c.Messages, c.Bytes = 1, int64(len(req.entries)), payload
		c.SQSBilled = max(1, ceilDiv(payload, SQSChunkBytes))
	case req.kinesis:
		c.Requests, c.Messages = 1, int64(len(req.records))
		for _, r := range req.records {
			n := int64(len(r.Data) + len(r.PartitionKey))
			c.Bytes += n
			c.PutUnits += max(1, ceilDiv(n, KinesisPutUnit))
			c.OnDemandKB += max(1, ceilDiv(n, KinesisOnDemandRnd))
		}
	}
	return c, nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
