package sqsnotify

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// QueueAdmin is the part of the SQS client CreateQueues calls.
type QueueAdmin interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, opts ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// Queues are the URLs of a work queue and its dead-letter queue.
type Queues struct {
	WorkURL string
	DLQURL  string
}

// CreateQueues creates (or finds) the work queue name and its DLQ name+"-dlq"
// with a redrive after maxReceives, as the infra app does in AWS. It is for the
// local stack and tests.
func CreateQueues(ctx context.Context, api QueueAdmin, name string, visibilitySecs, maxReceives int) (Queues, error) {
	dlq, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		return Queues{}, fmt.Errorf("create queue %s-dlq: %w", name, err)
	}
	attrs, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dlq.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return Queues{}, fmt.Errorf("get queue arn %s-dlq: %w", name, err)
	}
	redrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, attrs.Attributes["QueueArn"], maxReceives)
	work, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String(name),
		Attributes: map[string]string{
			"VisibilityTimeout": strconv.Itoa(visibilitySecs),
			"RedrivePolicy":     redrive,
		},
	})
	if err != nil {
		return Queues{}, fmt.Errorf("create queue %s: %w", name, err)
	}
	return Queues{WorkURL: aws.ToString(work.QueueUrl), DLQURL: aws.ToString(dlq.QueueUrl)}, nil
}
