// Package sqssink is the worker's SQS sink: every message becomes the
// sink's JSON envelope (sink.AppendEnvelope with sink.SQSChars: a text
// payload SQS would refuse or alter, invalid UTF-8 or U+FFFE/U+FFFF, is
// carried in data_b64, never raw). The worker sends them in
// SendMessageBatch requests through sink/batch (Sink is a batch.Sender and
// a batch.Packer): an SQS message carries a pack, envelopes as JSON lines
// (pack.go; the format is consume's, named by a content-type message
// attribute), up to Config.PackBytes: on a FIFO queue consecutive messages
// of one session and one tenure (version 1), on a standard queue messages of
// any sessions (version 2 when it holds several; version 1 otherwise). Handle is the unbatched path (one
// SendMessage per message, one envelope, no attribute,
// WSFLEET_SINK_BATCHING=false), kept for comparison. On a FIFO queue (URL
// ending in ".fifo") the group id is the connection_id (per-session order)
// and the deduplication id is connection_id:seq.sub.epoch for one message,
// connection_id:seq.sub.epoch~seq.sub naming a pack's first and last
// (DedupIDRange), so a request the same tenure sends again (a retried entry
// SQS had already taken) is dropped by SQS within its 5-minute
// deduplication window. The id
// names the epoch: another tenure's copy of a seq is never taken for a
// duplicate, because the consumer drops the copy of the lower epoch when it
// arrives after a record of a higher one (an older tenure's request that SQS
// applied late), and the newer tenure's copy is then the only one left. A
// replay across tenures reaches the consumer, which dedupes it by
// (connection_id, seq). A message without its own seq (on_missing_seq
// deliver) is numbered by its tenure (seq.sub, sub ≥ 1); a sequenced one has
// sub 0.
//
// Refusals: an entry SQS fails with SenderFault (other than throttling) and
// a request SQS refuses for the caller's fault are permanent
// (sink.IsPermanent); throttling, SQS's own faults and timeouts are
// transient. The sink checks the MD5 SQS returns for each entry itself
// (the SDK's check is off: it fails a whole request that SQS applied): an
// entry applied with another body than the one sent is a final refusal of
// that entry alone (ChecksumError), never sent again: for a pack, of every
// message in it.
package sqssink

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/batch"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/internal/awserr"
)

// API is the part of the SQS client the sink calls.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// SQS's SendMessageBatch limits, as the SDK documents them
// (aws-sdk-go-v2/service/sqs v1.53.0, SendMessageBatch): "up to 10
// messages", and "the maximum allowed individual message size and the
// maximum total payload size (the sum of the individual lengths of all of
// the batched messages) are both 1 MiB 1,048,576 bytes".
const (
	MaxBatchEntries = 10
	MaxBatchBytes   = 1 << 20
	MaxMessageBytes = 1 << 20
)

// Sink sends each message to one queue, synchronously: Handle returns once
// SQS has accepted the message.
type Sink struct {
	api       API
	url       string
	fifo      bool
	packBytes int // Config.PackBytes
}

// New returns a sink on queueURL with DefaultConfig.
func New(api API, queueURL string) *Sink { return NewConfig(api, queueURL, DefaultConfig()) }

// NewConfig returns a sink on queueURL with c (Config.Validate).
func NewConfig(api API, queueURL string, c Config) *Sink {
	return &Sink{api: api, url: queueURL, fifo: strings.HasSuffix(queueURL, ".fifo"), packBytes: c.PackBytes}
}

// FIFO reports whether the queue is a FIFO queue.
func (s *Sink) FIFO() bool { return s.fifo }

// Handle sends m.
func (s *Sink) Handle(ctx context.Context, m sink.Message) error {
	body := string(sink.AppendEnvelope(make([]byte, 0, len(m.Data)+160), m, sink.SQSChars))
	in := &sqs.SendMessageInput{QueueUrl: &s.url, MessageBody: &body}
	if s.fifo {
		group, dedup := m.ConnectionID, DedupIDOf(m)
		in.MessageGroupId, in.MessageDeduplicationId = &group, &dedup
	}
	out, err := s.api.SendMessage(ctx, in, ownChecksum)
	if err != nil {
		return fmt.Errorf("sqs sink: send %s seq %d: %w", m.ConnectionID, m.Seq, awserr.Classify(err))
	}
	if err := checkMD5(body, out.MD5OfMessageBody, out.MessageId); err != nil {
		return fmt.Errorf("sqs sink: send %s seq %d: %w", m.ConnectionID, m.Seq, err)
	}
	return nil
}

// packAttributes name a pack's format by its content type (consume.PackV1,
// consume.PackV2); the SDK only reads them.
var packAttributes = map[string]map[string]types.MessageAttributeValue{
	consume.PackV1: {consume.ContentTypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(consume.PackV1)}},
	consume.PackV2: {consume.ContentTypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(consume.PackV2)}},
}

// ownChecksum turns off the SDK's check of the MD5s SQS returns: on a
// mismatch it fails the whole SendMessageBatch, though SQS applied every
// entry (a retry then duplicates all of them) and it names none by its
// entry id. The sink checks each entry itself instead (checkMD5).
func ownChecksum(o *sqs.Options) { o.DisableMessageChecksumValidation = true }

// ChecksumError: SQS accepted an entry, but the MD5 of the body it holds
// is not the MD5 of the body sent (SQS, or something on the way, altered
// it). The message is in the queue, altered: sending it again would only
// add copies, so it is a final refusal (sink.Final), which the session's
// on_sink_refusal decides on.
type ChecksumError struct {
	MessageID, Sent, Got string // the message SQS made; the MD5s of the body sent and of the one SQS holds
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("sqs applied message %s with body MD5 %s, not the %s sent: it holds an altered body (not sent again)", e.MessageID, e.Got, e.Sent)
}

// checkMD5 is a final ChecksumError when SQS returned the MD5 of another
// body than body (nil when it returned none).
func checkMD5(body string, got, messageID *string) error {
	if got == nil {
		return nil
	}
	sum := md5.Sum([]byte(body))
	if sent := hex.EncodeToString(sum[:]); !strings.EqualFold(sent, *got) {
		return sink.Final(&ChecksumError{MessageID: aws.ToString(messageID), Sent: sent, Got: *got})
	}
	return nil
}

// maxDedupID is SQS's limit on MessageDeduplicationId.
const maxDedupID = 128

// DedupID is a message's id, "connection_id:seq.sub.epoch" (DedupIDRange of
// one message).
func DedupID(connectionID string, seq, sub, epoch int64) string {
	return DedupIDRange(connectionID, seq, sub, seq, sub, epoch)
}

// DedupIDRange is the id of a pack of one tenure's messages from seq.sub to
// lastSeq.lastSub: "connection_id:seq.sub.epoch~lastSeq.lastSub", or
// "connection_id:seq.sub.epoch" for one message (as before packing), or,
// when that exceeds SQS's 128-character limit (connection ids may be 128
// characters long), the hex SHA-256 of it. The part after the last colon is
// digits, dots, minus signs and a tilde only, so no two sessions share an
// id; the epoch keeps the copies of one seq sent by two tenures apart (see
// the package doc), sub (0 for a sequenced message) the messages after one
// seq that have none of their own, and the last position a pack from a
// longer one that starts at the same message (a retry carries the same
// messages, so the same id).
func DedupIDRange(connectionID string, seq, sub, lastSeq, lastSub, epoch int64) string {
	id := connectionID + ":" + strconv.FormatInt(seq, 10) + "." + strconv.FormatInt(sub, 10) + "." + strconv.FormatInt(epoch, 10)
	if lastSeq != seq || lastSub != sub {
		id += "~" + strconv.FormatInt(lastSeq, 10) + "." + strconv.FormatInt(lastSub, 10)
	}
	if len(id) <= maxDedupID {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// dedupIDOf is r's id: a pack's (a body of several lines) names its last
// envelope's position too.
func dedupIDOf(r batch.Record) (string, error) {
	if bytes.IndexByte(r.Body, '\n') < 0 {
		return DedupID(r.ConnectionID, r.Seq, r.Sub, r.Epoch), nil
	}
	seq, sub, err := lastPosition(r.Body)
	if err != nil {
		return "", err
	}
	return DedupIDRange(r.ConnectionID, r.Seq, r.Sub, seq, sub, r.Epoch), nil
}

// DedupIDOf is m's deduplication id (DedupID).
func DedupIDOf(m sink.Message) string { return DedupID(m.ConnectionID, m.Seq, m.Sub, m.LeaseEpoch) }

// Encode builds m's message body (batch.Sender).
func (s *Sink) Encode(m sink.Message) (batch.Record, error) {
	body := sink.AppendEnvelope(make([]byte, 0, len(m.Data)+160), m, sink.SQSChars)
	r := batch.Record{ConnectionID: m.ConnectionID, Seq: m.Seq, Sub: m.Sub, Epoch: m.LeaseEpoch, Body: body}
	if size := s.Size(r); size > MaxMessageBytes {
		return batch.Record{}, sink.Permanent(fmt.Errorf("sqs sink: %s seq %d: message of %d bytes exceeds SQS's %d", m.ConnectionID, m.Seq, size, MaxMessageBytes))
	}
	return r, nil
}

// Limits are SendMessageBatch's (batch.Sender).
func (s *Sink) Limits() batch.Limits {
	return batch.Limits{MaxCount: MaxBatchEntries, MaxBytes: MaxBatchBytes, MaxRecordBytes: MaxMessageBytes}
}

// Ordered: on a FIFO queue a session (message group) has one request in
// flight at a time, so its batches are enqueued in order (batch.Sender).
func (s *Sink) Ordered() bool { return s.fifo }

// Size is what SQS counts against the message and batch limits: the
// body's length, and with packing on the content-type attribute's (every
// message then carries it: a plain envelope is a pack of one).
func (s *Sink) Size(r batch.Record) int {
	if s.packBytes > 0 {
		return attrBytes + len(r.Body)
	}
	return len(r.Body)
}

// EntryError is an entry SendMessageBatch refused.
type EntryError struct {
	Code, Message string
	SenderFault   bool
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("sqs refused the entry: %s: %s (sender fault %v)", e.Code, e.Message, e.SenderFault)
}

// Permanent: the sender's fault (an invalid or oversize message, access, a
// KMS key), unless SQS names throttling (sink.IsPermanent).
func (e *EntryError) Permanent() bool { return e.SenderFault && !awserr.Throttling(e.Code) }

// ErrorCode is SQS's code for the entry (what makes two failures the same).
func (e *EntryError) ErrorCode() string { return e.Code }

// Throttled: SQS names throttling (sink.IsThrottled).
func (e *EntryError) Throttled() bool { return awserr.Throttling(e.Code) }

// Send sends recs in one SendMessageBatch (batch.Sender); failed maps the
// response's Failed entries back to recs.
func (s *Sink) Send(ctx context.Context, recs []batch.Record) ([]error, error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(recs))
	for i, r := range recs {
		e := types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(r.Body))}
		if s.packBytes > 0 {
			version := consume.PackV1
			if !s.fifo {
				version = packVersion(r.Body)
			}
			e.MessageAttributes = packAttributes[version]
		}
		if s.fifo {
			dedup, err := dedupIDOf(r)
			if err != nil {
				return nil, sink.Permanent(fmt.Errorf("sqs sink: batch of %d: %s seq %d: %w", len(recs), r.ConnectionID, r.Seq, err))
			}
			e.MessageGroupId, e.MessageDeduplicationId = aws.String(r.ConnectionID), aws.String(dedup)
		}
		entries[i] = e
	}
	out, err := s.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &s.url, Entries: entries}, ownChecksum)
	if err != nil {
		return nil, fmt.Errorf("sqs sink: send batch of %d: %w", len(recs), awserr.Classify(err))
	}
	var failed []error
	fail := func(i int, err error) {
		if failed == nil {
			failed = make([]error, len(recs))
		}
		failed[i] = err
	}
	for _, ok := range out.Successful {
		i, err := strconv.Atoi(aws.ToString(ok.Id))
		if err != nil || i < 0 || i >= len(recs) {
			return nil, fmt.Errorf("sqs sink: batch result names unknown entry %q", aws.ToString(ok.Id))
		}
		if err := checkMD5(*entries[i].MessageBody, ok.MD5OfMessageBody, ok.MessageId); err != nil {
			fail(i, err) // applied, altered: only this entry, and never again
		}
	}
	for _, f := range out.Failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(recs) {
			return nil, fmt.Errorf("sqs sink: batch result names unknown entry %q", aws.ToString(f.Id))
		}
		fail(i, &EntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault})
	}
	return failed, nil
}

var (
	_ sink.Handler = (*Sink)(nil)
	_ batch.Sender = (*Sink)(nil)
)
