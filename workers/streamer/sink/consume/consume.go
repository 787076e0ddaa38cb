// Package consume is for the programs that read what the worker's sinks
// wrote (a Lambda function on the output queue, a DLQ replay, the
// harness): it turns a received record back into the envelopes it carries
// (FromSQS, FromKinesis), parses one envelope (Parse), and applies the consumer rule
// that fences late writes of older tenures and drops replays (Filter). It
// imports no SDK and nothing of the worker or the harness (the envelope's
// writer is sink.AppendEnvelope).
//
// # The pack format (versions 1 and 2)
//
// A record of the sqs sink carries one or more envelopes (sink.AppendEnvelope
// with sink.SQSChars) joined by "\n" (JSON lines without a final newline).
// The envelope never holds a raw newline (a JSON payload's newlines are
// written as spaces, a string's are escaped), so each line is one envelope,
// and a record of one envelope is exactly the envelope the worker wrote
// before packing. The SQS message names the format in its message attribute
// ContentTypeAttribute (DataType String):
//
//   - PackV1: envelopes of one session and one tenure, in (seq, sub) order
//     (every pack on a FIFO queue, whose group is the session; a pack of one
//     session on a standard queue).
//   - PackV2: envelopes of any sessions and tenures (a standard queue's pack
//     that several sessions share), each session's lines in its (seq, sub)
//     order within a tenure; every envelope names its own connection_id and
//     lease_epoch, so a reader takes each line as it takes a version 1
//     line, and Filter applies per session as before.
//
// A message without the attribute is read as the same JSON lines (a worker
// from before packing wrote one envelope per message), so a reader works
// across a rollout. Another value (a later version) is refused (ErrFormat)
// rather than misread: a reader must ask SQS for the attribute
// (ReceiveMessage's MessageAttributeNames; a Lambda event source mapping
// always delivers it).
//
// A Kinesis record of the kinesis sink is one envelope, or several in the
// KPL aggregated record format (sink/kpl): of one session and one tenure, or
// (hash buckets) of several sessions of one bucket, each user record under
// its own connection_id as partition key and the bucket's explicit hash
// key. FromKinesis takes it apart.
package consume

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// ContentTypeAttribute is the SQS message attribute naming a record's
// format (PackV1, PackV2).
const ContentTypeAttribute = "content-type"

// The content types of the pack format (the package doc): version 1, one
// session and tenure; version 2, several.
const (
	PackV1 = "application/vnd.wsfleet.pack+jsonl; version=1"
	PackV2 = "application/vnd.wsfleet.pack+jsonl; version=2"
)

// ErrFormat: a record names a format this package does not read.
var ErrFormat = errors.New("consume: unknown record format")

// Payload forms: how an envelope carried its message (Envelope.Form).
const (
	FormJSON   = "data"        // the message as JSON in "data"
	FormString = "data-string" // the message as a JSON string in "data"
	FormB64    = "data_b64"    // the message's bytes in base64 in "data_b64"
	FormNone   = "none"        // no "data" and no "data_b64"
)

// Envelope is one message as the sink wrote it (sink.AppendEnvelope).
type Envelope struct {
	ConnectionID string
	Seq          int64
	// Sub is 0 for a message with its own seq; 1, 2, … for the messages
	// after Seq that have none (on_missing_seq deliver), numbered by their
	// tenure.
	Sub          int64
	LeaseEpoch   int64
	WorkerID     string
	ReceivedAtMs int64
	// Binary: the message came in a binary frame.
	Binary bool
	// Data is the message's bytes, decoded from whichever form carried it
	// (Form): data_b64's base64, data's JSON string, or data's JSON as it
	// is (the worker wrote a JSON payload's raw newlines as spaces).
	Data []byte
	Form string
	// B64Reason is why a text frame went in data_b64 (sink.ReasonInvalidUTF8,
	// sink.ReasonRefusedChar); "" otherwise.
	B64Reason string
}

// wire is the envelope's JSON.
type wire struct {
	ConnectionID string          `json:"connection_id"`
	Seq          *int64          `json:"seq"`
	LeaseEpoch   *int64          `json:"lease_epoch"`
	WorkerID     *string         `json:"worker_id"`
	Sub          int64           `json:"sub"`
	ReceivedAtMs int64           `json:"received_at_ms"`
	Frame        string          `json:"frame"`
	B64Reason    string          `json:"b64_reason"`
	Data         json.RawMessage `json:"data"`
	DataB64      *string         `json:"data_b64"`
}

// Parse parses one envelope. An envelope without a connection_id, or
// without seq, lease_epoch or worker_id, or whose data_b64 is not base64,
// is an error.
func Parse(line []byte) (Envelope, error) {
	var w wire
	if err := json.Unmarshal(line, &w); err != nil {
		return Envelope{}, fmt.Errorf("sink envelope: %w", err)
	}
	if w.ConnectionID == "" || w.WorkerID == nil || w.Seq == nil || w.LeaseEpoch == nil {
		return Envelope{}, errors.New("sink envelope: connection_id, seq, lease_epoch or worker_id missing")
	}
	e := Envelope{
		ConnectionID: w.ConnectionID, Seq: *w.Seq, Sub: w.Sub, LeaseEpoch: *w.LeaseEpoch, WorkerID: *w.WorkerID,
		ReceivedAtMs: w.ReceivedAtMs, Binary: w.Frame == "binary", B64Reason: w.B64Reason,
	}
	switch {
	case w.DataB64 != nil:
		data, err := base64.StdEncoding.DecodeString(*w.DataB64)
		if err != nil {
			return Envelope{}, fmt.Errorf("sink envelope %s seq %d: data_b64: %w", e.ConnectionID, e.Seq, err)
		}
		e.Data, e.Form = data, FormB64
	case len(w.Data) > 0 && w.Data[0] == '"':
		var s string
		if err := json.Unmarshal(w.Data, &s); err != nil {
			return Envelope{}, fmt.Errorf("sink envelope %s seq %d: data: %w", e.ConnectionID, e.Seq, err)
		}
		e.Data, e.Form = []byte(s), FormString
	case len(w.Data) > 0:
		e.Data, e.Form = []byte(w.Data), FormJSON
	default:
		e.Form = FormNone
	}
	return e, nil
}

// FromSQS returns the envelopes of a received SQS message: its body and
// the value of its ContentTypeAttribute ("" when it has none, PackV1 or
// PackV2), in the order the sink wrote them.
func FromSQS(body, contentType string) ([]Envelope, error) {
	if contentType != "" && contentType != PackV1 && contentType != PackV2 {
		return nil, fmt.Errorf("%w: %s %q", ErrFormat, ContentTypeAttribute, contentType)
	}
	return Lines([]byte(body))
}

// Lines parses JSON lines of envelopes (a pack of either version, or one
// plain envelope).
func Lines(body []byte) ([]Envelope, error) {
	envs := make([]Envelope, 0, bytes.Count(body, []byte{'\n'})+1)
	for i := 0; len(body) > 0 || i == 0; i++ {
		line := body
		if j := bytes.IndexByte(body, '\n'); j >= 0 {
			line, body = body[:j], body[j+1:]
		} else {
			body = nil
		}
		e, err := Parse(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		envs = append(envs, e)
	}
	return envs, nil
}
