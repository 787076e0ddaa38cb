// Package kinesissink is the worker's Kinesis Data Streams sink: every
// message becomes one record whose data is the sink's JSON envelope
// (sink.AppendJSON, which carries seq and lease_epoch) and whose partition
// key is the connection_id; with hash buckets (the default) every record
// also carries its session's bucket's explicit hash key, so a session's
// records go to one shard in order. It is a batch.Sender: the worker sends
// PutRecords requests of up to 500 records through sink/batch, one request
// per session in flight, and retries, with backoff, only the records a
// request failed (ProvisionedThroughputExceededException, InternalFailure:
// PutRecords has no per-record permanent code). A request Kinesis refuses
// for the caller's fault (access, a KMS key, a missing stream, validation)
// is permanent (sink.IsPermanent).
//
// Aggregation (on by default): the sink is a batch.Packer. Messages queued
// together go in one Kinesis record in the KPL aggregated record format
// (sink/kpl; amazon-kinesis-producer's aggregation-format.md), up to
// Config.AggregateBytes per record (default 51,200 bytes, the KPL's
// AggregationMaxSize default; 0: off, one record per message). Each user
// record inside is the same JSON envelope (seq, lease_epoch in it). The
// KCL, the Lambda deaggregation modules (aws-kinesis-agg) and Firehose read
// such records as they are; a record of one message is sent plain. Kinesis
// bills a record per started 25 KB (provisioned) or 1 KB (on-demand), so a
// record of many small messages costs what one did. Aggregation adds no
// waiting: a record holds what was queued when its request went
// (sink/batch, Packing).
//
// Hash buckets (Config.HashBuckets, default 16; buckets.go): a Kinesis
// record goes to one shard, so a record that aggregates several sessions
// must hold only sessions that belong on one shard, on every worker and
// whatever the stream's shards are. The sink cuts the hash key space into
// N equal ranges; a session's bucket is the range of its connection_id's
// MD5 (Kinesis' own hash of the partition key), and the sessions of a
// bucket share aggregated records (PackGroup). Every record, plain or
// aggregated, carries the bucket's key (the midpoint of its range) as its
// explicit hash key, and so does every user record inside (the KCL's
// deaggregation drops a user record whose hash key is outside its shard's
// range); each user record keeps its own connection_id as partition key,
// and an aggregated record's partition key is its first user record's. A
// session's records thus always go to the shard holding its bucket's key,
// stable across workers and across a reshard (the key falls in one open
// shard). Set N at least to the stream's open shard count (a power of two
// spreads evenly over uniformly split shards; with fewer buckets than
// shards some shards get nothing); N = 0 restores per-session aggregation
// (records keyed by the partition key alone, one session per record).
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
	"github.com/wsfleet/wsfleet/workers/streamer/sink/internal/packorder"
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

// DefaultHashBuckets is the default count of hash buckets (buckets.go);
// MaxHashBuckets the most a sink takes.
const (
	DefaultHashBuckets = 16
	MaxHashBuckets     = 1024
)

// Config are the kinesis sink's settings.
type Config struct {
	// AggregateBytes bounds an aggregated record (0: one record per
	// message).
	AggregateBytes int
	// HashBuckets is the count of hash buckets whose sessions share
	// aggregated records (0: a record aggregates one session's messages,
	// and records carry no explicit hash key).
	HashBuckets int
}

// DefaultConfig aggregates up to DefaultAggregateMaxBytes per record over
// DefaultHashBuckets buckets.
func DefaultConfig() Config {
	return Config{AggregateBytes: DefaultAggregateMaxBytes, HashBuckets: DefaultHashBuckets}
}

// Validate reports every problem of c.
func (c Config) Validate() error {
	return errors.Join(ValidateAggregateBytes(c.AggregateBytes), ValidateHashBuckets(c.HashBuckets))
}

// ValidateAggregateBytes reports what is wrong with n as Config.AggregateBytes:
// 0 (off) up to a record's limit.
func ValidateAggregateBytes(n int) error {
	if n < 0 || n > MaxRecordBytes {
		return fmt.Errorf("kinesis aggregated record bound %d bytes: want 0 (off) up to %d (a record's limit)", n, MaxRecordBytes)
	}
	return nil
}

// ValidateHashBuckets reports what is wrong with n as Config.HashBuckets:
// 0 (per-session aggregation) up to MaxHashBuckets.
func ValidateHashBuckets(n int) error {
	if n < 0 || n > MaxHashBuckets {
		return fmt.Errorf("kinesis hash buckets %d: want 0 (per-session aggregation) up to %d", n, MaxHashBuckets)
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
	// buckets are the hash buckets (nil: per-session aggregation, no
	// explicit hash keys).
	buckets *buckets
}

// New returns a sink on stream, a stream name or ARN, with DefaultConfig.
func New(api API, stream string) *Sink { return NewConfig(api, stream, DefaultConfig()) }

// NewConfig returns a sink on stream, a stream name or ARN, with c
// (Config.Validate).
func NewConfig(api API, stream string, c Config) *Sink {
	s := &Sink{api: api, target: stream, aggregate: c.AggregateBytes, buckets: newBuckets(c.HashBuckets)}
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

// PackLimit is the bound of an aggregated record (batch.Packer).
func (s *Sink) PackLimit() int { return s.aggregate }

// PackGroup is r's hash bucket, or with no buckets its connection_id: the
// records that may share an aggregated record (batch.Packer).
func (s *Sink) PackGroup(r batch.Record) string {
	if s.buckets == nil {
		return r.ConnectionID
	}
	return s.buckets.names[s.buckets.of(r.ConnectionID)]
}

// PackGrow is the Size of an aggregated record of size bytes once r is in
// it (batch.Packer): the record's data plus its partition key (the first
// user record's connection_id). Without buckets it is exact (kpl.EmptySize,
// then kpl.RecordSize per user record). With buckets it is a bound
// (kpl.GroupEmptySize, then kpl.GroupRecordMaxSize per user record): each
// user record counted with its own entry in the partition key table,
// though a session's key is written once, and a partition key index below
// the count of records a record of size bytes can hold.
func (s *Sink) PackGrow(size int, r batch.Record) int {
	if s.buckets == nil {
		if size == 0 {
			size = kpl.EmptySize(r.ConnectionID) + len(r.ConnectionID)
		}
		return size + kpl.RecordSize(len(r.Body))
	}
	if size == 0 {
		size = kpl.GroupEmptySize(s.buckets.key(s.buckets.of(r.ConnectionID))) + len(r.ConnectionID)
	}
	return size + kpl.GroupRecordMaxSize(r.ConnectionID, len(r.Body), size/minUserRecordBytes+1)
}

// minUserRecordBytes is the least a user record adds to an aggregated
// record of AggregateUsers: its Record's tag and length, its two indexes
// with their tags, the data's tag and length (8), and its key's entry in the
// table when new. A record of size bytes holds fewer than
// size/minUserRecordBytes+1 user records, so fewer partition keys.
const minUserRecordBytes = 8

// Pack is one Kinesis record of recs (batch.Packer): a pack of one is the
// message's own record; without buckets an aggregated record of one
// session's messages of one tenure under its connection_id; with buckets an
// aggregated record of recs of one bucket, each user record under its own
// connection_id and the bucket's explicit hash key, each session's in
// (seq, sub) order within a tenure. The record is named by the first
// (its partition key is the first's connection_id).
func (s *Sink) Pack(recs []batch.Record) (batch.Record, error) {
	if len(recs) == 0 {
		return batch.Record{}, errors.New("kinesis sink: an empty aggregate")
	}
	first := recs[0]
	if len(recs) == 1 {
		return first, nil
	}
	if err := packorder.Check(recs); err != nil {
		return batch.Record{}, fmt.Errorf("kinesis sink: an aggregate out of order: %w", err)
	}
	group := s.PackGroup(first)
	var key string // the bucket's explicit hash key, every user record's
	if s.buckets != nil {
		key = s.buckets.key(s.buckets.of(first.ConnectionID))
	}
	users := make([]kpl.User, len(recs))
	for i, r := range recs {
		if g := s.PackGroup(r); g != group {
			return batch.Record{}, fmt.Errorf("kinesis sink: aggregate %s (group %s) with %s (group %s)", first.ConnectionID, group, r.ConnectionID, g)
		}
		if s.buckets == nil && r.Epoch != first.Epoch {
			return batch.Record{}, fmt.Errorf("kinesis sink: aggregate %s epoch %d with epoch %d", first.ConnectionID, first.Epoch, r.Epoch)
		}
		users[i] = kpl.User{PartitionKey: r.ConnectionID, ExplicitHashKey: key, Data: r.Body}
	}
	return batch.Record{ConnectionID: first.ConnectionID, Seq: first.Seq, Sub: first.Sub, Epoch: first.Epoch, Body: kpl.AggregateUsers(users)}, nil
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
		if s.buckets != nil {
			entries[i].ExplicitHashKey = aws.String(s.buckets.key(s.buckets.of(r.ConnectionID)))
		}
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
