// Package sqssink is the worker's SQS sink: every message becomes one SQS
// message whose body is the sink's JSON envelope (sink.AppendJSON). On a FIFO
// queue (URL ending in ".fifo") the group id is the connection_id (per-session
// order) and the deduplication id is connection_id:seq, so a message replayed
// after a crash failover (at-least-once across a crash) is dropped by SQS
// within its 5-minute deduplication window.
package sqssink

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// API is the part of the SQS client the sink calls.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Sink sends each message to one queue, synchronously: Handle returns once
// SQS has accepted the message.
type Sink struct {
	api  API
	url  string
	fifo bool
}

// New returns a sink on queueURL.
func New(api API, queueURL string) *Sink {
	return &Sink{api: api, url: queueURL, fifo: strings.HasSuffix(queueURL, ".fifo")}
}

// FIFO reports whether the queue is a FIFO queue.
func (s *Sink) FIFO() bool { return s.fifo }

// Handle sends m.
func (s *Sink) Handle(ctx context.Context, m sink.Message) error {
	body := string(sink.AppendJSON(make([]byte, 0, len(m.Data)+160), m))
	in := &sqs.SendMessageInput{QueueUrl: &s.url, MessageBody: &body}
	if s.fifo {
		group, dedup := m.ConnectionID, DedupIDOf(m)
		in.MessageGroupId, in.MessageDeduplicationId = &group, &dedup
	}
	if _, err := s.api.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("sqs sink: send %s seq %d: %w", m.ConnectionID, m.Seq, err)
	}
	return nil
}

// maxDedupID is SQS's limit on MessageDeduplicationId.
const maxDedupID = 128

// DedupID is "connection_id:seq", or, when that exceeds SQS's 128-character
// limit (connection ids may be 128 characters long), the hex SHA-256 of it.
func DedupID(connectionID string, seq int64) string {
	return fitDedupID(connectionID + ":" + strconv.FormatInt(seq, 10))
}

// fitDedupID is id, or its hex SHA-256 when it exceeds SQS's limit.
func fitDedupID(id string) string {
	if len(id) <= maxDedupID {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// DedupIDOf is m's deduplication id: DedupID, and for a message without
// its own seq (m.Sub > 0) "connection_id:seq.sub", so that the messages
// after one seq are not taken for its duplicates (the part after the last
// colon is digits, a dot and a minus only: no two sessions share an id).
func DedupIDOf(m sink.Message) string {
	if m.Sub == 0 {
		return DedupID(m.ConnectionID, m.Seq)
	}
	return fitDedupID(m.ConnectionID + ":" + strconv.FormatInt(m.Seq, 10) + "." + strconv.FormatInt(m.Sub, 10))
}

var _ sink.Handler = (*Sink)(nil)
