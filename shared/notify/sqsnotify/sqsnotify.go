// Package sqsnotify implements notify.Publisher and notify.Consumer on Amazon
// SQS. It maps SDK errors at its edge; callers see wrapped errors only.
package sqsnotify

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wsfleet/wsfleet/shared/notify"
)

// API is the part of the SQS client this package calls.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
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

// Delete acknowledges m.
func (q *Queue) Delete(ctx context.Context, m notify.Message) error {
	if _, err := q.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q.url, ReceiptHandle: &m.Receipt}); err != nil {
		return fmt.Errorf("delete message %s: %w", m.MessageID, err)
	}
	return nil
}

// Requeue makes m visible again at once.
func (q *Queue) Requeue(ctx context.Context, m notify.Message) error {
	if _, err := q.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &q.url, ReceiptHandle: &m.Receipt, VisibilityTimeout: 0}); err != nil {
		return fmt.Errorf("requeue message %s: %w", m.MessageID, err)
	}
	return nil
}

var (
	_ notify.Publisher = (*Queue)(nil)
	_ notify.Consumer  = (*Queue)(nil)
)
