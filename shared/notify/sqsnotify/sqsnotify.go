// Package sqsnotify implements notify.Publisher and notify.Consumer on Amazon
// SQS. It maps SDK errors at its edge; callers see wrapped errors only.
package sqsnotify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wsfleet/wsfleet/shared/notify"
)

// API is the part of the SQS client this package calls.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Queue publishes to and consumes from one SQS queue.
type Queue struct {
	api      API
	url      string
	waitSecs int32
}

// New returns a Queue on url. waitSecs is the long-poll wait (0..20).
func New(api API, url string, waitSecs int32) *Queue {
	if waitSecs < 0 {
		waitSecs = 0
	}
	if waitSecs > 20 {
		waitSecs = 20
	}
	return &Queue{api: api, url: url, waitSecs: waitSecs}
}

// Publish sends n.
func (q *Queue) Publish(ctx context.Context, n notify.Notification) error {
	body, err := notify.Encode(n)
	if err != nil {
		return err
	}
	if _, err := q.api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q.url, MessageBody: &body}); err != nil {
		return fmt.Errorf("send %s %s: %w", n.Type, n.ConnectionID, err)
	}
	return nil
}

// MaxBatch is SQS's limit on the entries of one batch request.
const MaxBatch = notify.MaxBatch

// PublishBatch sends ns (at most MaxBatch) in one SendMessageBatch request;
// errs[i] is ns[i]'s outcome (nil: sent).
func (q *Queue) PublishBatch(ctx context.Context, ns []notify.Notification) (errs []error) {
	errs = make([]error, len(ns))
	if len(ns) > MaxBatch {
		for i := range errs {
			errs[i] = fmt.Errorf("send batch of %d: more than %d entries", len(ns), MaxBatch)
		}
		return errs
	}
	entries := make([]types.SendMessageBatchRequestEntry, 0, len(ns))
	for i, n := range ns {
		body, err := notify.Encode(n)
		if err != nil {
			errs[i] = err
			continue
		}
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body)})
	}
	if len(entries) == 0 {
		return errs
	}
	fail := func(i int, format string, args ...any) {
		errs[i] = fmt.Errorf("send %s %s (batch): "+format, append([]any{ns[i].Type, ns[i].ConnectionID}, args...)...)
	}
	out, err := q.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &q.url, Entries: entries})
	if err != nil {
		for _, e := range entries {
			i, _ := entryIndex(e.Id, len(ns))
			fail(i, "%w", err)
		}
		return errs
	}
	answered := make([]bool, len(ns))
	for _, e := range out.Successful {
		if i, ok := entryIndex(e.Id, len(ns)); ok {
			answered[i] = true
		}
	}
	for _, e := range out.Failed {
		if i, ok := entryIndex(e.Id, len(ns)); ok {
			answered[i] = true
			fail(i, "%s: %s", aws.ToString(e.Code), aws.ToString(e.Message))
		}
	}
	for _, e := range entries {
		if i, _ := entryIndex(e.Id, len(ns)); !answered[i] {
			fail(i, "no result for the entry")
		}
	}
	return errs
}

// entryIndex is the position a batch entry id (its index, in decimal) names
// in a batch of n.
func entryIndex(id *string, n int) (int, bool) {
	i, err := strconv.Atoi(aws.ToString(id))
	return i, err == nil && i >= 0 && i < n
}

// Receive long-polls for up to max (1..10) messages.
func (q *Queue) Receive(ctx context.Context, max int) ([]notify.Message, error) {
	if max < 1 {
		max = 1
	}
	if max > 10 {
		max = 10
	}
	out, err := q.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    &q.url,
		MaxNumberOfMessages:         int32(max),
		WaitTimeSeconds:             q.waitSecs,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", q.url, err)
	}
	msgs := make([]notify.Message, 0, len(out.Messages))
	for _, m := range out.Messages {
		msg := notify.Message{
			Receipt:   aws.ToString(m.ReceiptHandle),
			MessageID: aws.ToString(m.MessageId),
			Body:      aws.ToString(m.Body),
		}
		if c, ok := m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]; ok {
			msg.ReceiveCount, _ = strconv.Atoi(c)
		}
		msg.Notification, msg.Err = notify.Decode(msg.Body)
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// Delete acknowledges ms: one DeleteMessage for one message, batches of
// MaxBatch otherwise. The error names every message not deleted.
func (q *Queue) Delete(ctx context.Context, ms ...notify.Message) error {
	if len(ms) == 1 {
		if _, err := q.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q.url, ReceiptHandle: &ms[0].Receipt}); err != nil {
			return fmt.Errorf("delete message %s: %w", ms[0].MessageID, err)
		}
		return nil
	}
	var errs []error
	for len(ms) > 0 {
		chunk := ms[:min(len(ms), MaxBatch)]
		ms = ms[len(chunk):]
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.Receipt)}
		}
		out, err := q.api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &q.url, Entries: entries})
		if err != nil {
			for _, m := range chunk {
				errs = append(errs, fmt.Errorf("delete message %s (batch): %w", m.MessageID, err))
			}
			continue
		}
		for _, f := range out.Failed {
			i, ok := entryIndex(f.Id, len(chunk))
			if !ok {
				errs = append(errs, fmt.Errorf("delete batch: a failure for unknown entry %q", aws.ToString(f.Id)))
				continue
			}
			errs = append(errs, fmt.Errorf("delete message %s (batch): %s: %s", chunk[i].MessageID, aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	return errors.Join(errs...)
}

// Requeue makes m visible again after after (whole seconds, rounded up:
// SQS's visibility timeout; at most its 12 hours).
func (q *Queue) Requeue(ctx context.Context, m notify.Message, after time.Duration) error {
	if _, err := q.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q.url, ReceiptHandle: &m.Receipt, VisibilityTimeout: visibilitySeconds(after)}); err != nil {
		return fmt.Errorf("requeue message %s: %w", m.MessageID, err)
	}
	return nil
}

// visibilitySeconds is after as SQS's visibility timeout: whole seconds,
// rounded up (never visible before after), from 0 to SQS's 12 hours.
func visibilitySeconds(after time.Duration) int32 {
	return int32(min(max((after+time.Second-1)/time.Second, 0), 12*time.Hour/time.Second))
}

var (
	_ notify.Publisher      = (*Queue)(nil)
	_ notify.BatchPublisher = (*Queue)(nil)
	_ notify.Consumer       = (*Queue)(nil)
)
