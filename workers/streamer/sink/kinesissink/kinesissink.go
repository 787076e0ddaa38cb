// Package kinesissink is the worker's Kinesis Data Streams sink: every
// message becomes one record whose data is the sink's JSON envelope
// (sink.AppendJSON, which carries seq and lease_epoch) and whose partition
// key is the connection_id, so a session's records go to one shard in
// order. It is a batch.Sender: the worker sends PutRecords requests of up
// to 500 records through sink/batch, one request per session in flight,
// and retries, with backoff, only the records a request failed
// (ProvisionedThroughputExceededException, InternalFailure: PutRecords has
// no per-record permanent code). A request Kinesis refuses for the caller's
// fault (access, a KMS key, a missing stream, validation) is permanent
// (sink.IsPermanent).
//
// Aggregation (on by default): the sink is a batch.Packer. A session's
// messages queued together go in one Kinesis record in the KPL aggregated
// record format (sink/kpl; amazon-kinesis-producer's aggregation-format.md),
// up to AggregateMaxBytes per record (default 51,200 bytes, the KPL's
// AggregationMaxSize default; 0: off, one record per message). Each user
// record inside is the same JSON envelope (seq, lease_epoch in it), under
// the record's partition key, the connection_id. The KCL, the Lambda
// deaggregation modules (aws-kinesis-agg) and Firehose read such records as
// they are; a record of one message is sent plain. Kinesis bills a record
// per started 25 KB (provisioned) or 1 KB (on-demand), so a record of many
// small messages costs what one did. Aggregation adds no waiting: a
// record holds what the session had queued when its request went
// (sink/batch, Packing).
package kinesissink

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/internal/awserr"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/kpl"
)

// API is the part of the Kinesis client the sink calls.
type API interface {
	PutRecords(ctx context.Context, in *kinesis.PutRecordsInput, opts ...func(*kinesis.Options)) (*kinesis.PutRecordsOutput, error)
}

// PutRecords limits. The SDK (aws-sdk-go-v2/service/kinesis v1.56.13,
// PutRecords) documents "up to 500 records" per request, and records "as
// large as 10 MiB, up to a limit of 10 MiB for the entire request,
// including partition keys"; a stream's maximum record size is 1 MiB
// unless it is raised, and kinesalite 3.3.3 refuses data over 1 MiB. The
// sink keeps to 1 MiB per record (data + partition key) and 5 MiB per
// request.
const (
	MaxRecords      = 500
	MaxRecordBytes  = 1 << 20
	MaxRequestBytes = 5 << 20
)

// DefaultAggregateMaxBytes is the default bound of an aggregated record: the
// KPL's AggregationMaxSize default (amazon-kinesis-producer,
// KinesisProducerConfiguration: aggregationMaxSize = 51200).
const DefaultAggregateMaxBytes = 51_200

// ValidateAggregateMaxBytes reports what is wrong with n as the bound of an
// aggregated record: 0 (off) up to a record's limit.
func ValidateAggregateMaxBytes(n int) error {
	if n < 0 || n > MaxRecordBytes {
		return fmt.Errorf("kinesis aggregated record bound %d bytes: want 0 (off) up to %d (a record's limit)", n, MaxRecordBytes)
	}
	return nil
}

// ErrThroughputExceeded: the stream (or a shard) refused the request for
// throughput; its records are retried with backoff.
var ErrThroughputExceeded = errors.New("kinesis: provisioned throughput exceeded")

// Sink puts records on one stream.
type Sink struct {
	api    API
	name   string // stream name, or
	arn    string // stream ARN
	target string
	// aggregate bounds an aggregated record (0: one record per message).
	aggregate int
}

// New returns a sink on stream, a stream name or ARN, aggregating up to
// DefaultAggregateMaxBytes per record.
func New(api API, stream string) *Sink {
	s := &Sink{api: api, target: stream, aggregate: DefaultAggregateMaxBytes}
	if strings.HasPrefix(stream, "arn:") {
		s.arn = stream
	} else {
		s.name = stream
	}
	return s
}

// Encode builds m's record (batch.Sender).
func (s *Sink) Encode(m sink.Message) (batch.Record, error) {
	data := sink.AppendJSON(make([]byte, 0, len(m.Data)+160), m)
	r := batch.Record{ConnectionID: m.ConnectionID, Seq: m.Seq, Sub: m.Sub, Epoch: m.LeaseEpoch, Body: data}
	if n := s.Size(r); n > MaxRecordBytes {
		return batch.Record{}, sink.Permanent(fmt.Errorf("kinesis sink: %s seq %d: record of %d bytes exceeds %d", m.ConnectionID, m.Seq, n, MaxRecordBytes))
	}
	return r, nil
}

// SetAggregateMaxBytes bounds an aggregated record (0: off); it must pass
// ValidateAggregateMaxBytes. It returns s.
func (s *Sink) SetAggregateMaxBytes(n int) *Sink {
	s.aggregate = n
	return s
}

// PackLimit is the bound of an aggregated record (batch.Packer).
func (s *Sink) PackLimit() int { return s.aggregate }

// PackGrow is the Size of an aggregated record of size bytes once r is in
// it (batch.Packer): the record's data (kpl.EmptySize, then
// kpl.RecordSize per user record) plus its partition key.
func (s *Sink) PackGrow(size int, r batch.Record) int {
	if size == 0 {
		size = kpl.EmptySize(r.ConnectionID) + len(r.ConnectionID)
	}
	return size + kpl.RecordSize(len(r.Body))
}

// PackGroup is r's session: a pack holds one session's messages
// (batch.Packer).
func (s *Sink) PackGroup(r batch.Record) string { return r.ConnectionID }

// Pack is one aggregated record of recs, under their connection_id; a
// pack of one is the message's own record (batch.Packer).
func (s *Sink) Pack(recs []batch.Record) (batch.Record, error) {
	if len(recs) == 1 {
		return recs[0], nil
	}
	data := make([][]byte, len(recs))
	for i, r := range recs {
		if r.ConnectionID != recs[0].ConnectionID || r.Epoch != recs[0].Epoch {
			return batch.Record{}, fmt.Errorf("kinesis sink: aggregate %s epoch %d with %s epoch %d", recs[0].ConnectionID, recs[0].Epoch, r.ConnectionID, r.Epoch)
		}
		data[i] = r.Body
	}
	first := recs[0]
	return batch.Record{ConnectionID: first.ConnectionID, Seq: first.Seq, Sub: first.Sub, Epoch: first.Epoch, Body: kpl.Aggregate(first.ConnectionID, data)}, nil
}

// Limits are PutRecords' (batch.Sender).
func (s *Sink) Limits() batch.Limits {
	return batch.Limits{MaxCount: MaxRecords, MaxBytes: MaxRequestBytes, MaxRecordBytes: MaxRecordBytes}
}

// Ordered: one request per session in flight (batch.Sender).
func (s *Sink) Ordered() bool { return true }

// Size is the data plus the partition key, what Kinesis counts.
func (s *Sink) Size(r batch.Record) int { return len(r.Body) + len(r.ConnectionID) }

// EntryError is a record PutRecords refused.
type EntryError struct{ Code, Message string }

func (e *EntryError) Error() string {
	return "kinesis refused the record: " + e.Code + ": " + e.Message
}

// ErrorCode is Kinesis' code for the record (what makes two failures the
// same).
func (e *EntryError) ErrorCode() string { return e.Code }

// Throttled: the shard refused the record for throughput (sink.IsThrottled).
func (e *EntryError) Throttled() bool { return e.Code == "ProvisionedThroughputExceededException" }

// Unwrap makes a throughput refusal ErrThroughputExceeded.
func (e *EntryError) Unwrap() error {
	if e.Code == "ProvisionedThroughputExceededException" {
		return ErrThroughputExceeded
	}
	return nil
}

// Send puts recs in one PutRecords request (batch.Sender).
func (s *Sink) Send(ctx context.Context, recs []batch.Record) ([]error, error) {
	entries := make([]types.PutRecordsRequestEntry, len(recs))
	for i, r := range recs {
		entries[i] = types.PutRecordsRequestEntry{Data: r.Body, PartitionKey: aws.String(r.ConnectionID)}
	}
	in := &kinesis.PutRecordsInput{Records: entries}
	if s.arn != "" {
		in.StreamARN = aws.String(s.arn)
	} else {
		in.StreamName = aws.String(s.name)
	}
	out, err := s.api.PutRecords(ctx, in)
	if err != nil {
		var pte *types.ProvisionedThroughputExceededException
		if errors.As(err, &pte) {
			err = sink.Throttled(fmt.Errorf("%w: %w", ErrThroughputExceeded, err))
		}
		return nil, fmt.Errorf("kinesis sink: put %d records on %s: %w", len(recs), s.target, awserr.Classify(err))
	}
	if aws.ToInt32(out.FailedRecordCount) == 0 {
		return nil, nil
	}
	if len(out.Records) != len(recs) {
		return nil, fmt.Errorf("kinesis sink: %d results for %d records", len(out.Records), len(recs))
	}
	failed := make([]error, len(recs))
	for i, r := range out.Records {
		if r.ErrorCode != nil {
			failed[i] = &EntryError{Code: aws.ToString(r.ErrorCode), Message: aws.ToString(r.ErrorMessage)}
		}
	}
	return failed, nil
}

var (
	_ batch.Sender = (*Sink)(nil)
	_ batch.Packer = (*Sink)(nil)
)
