package sqsnotify

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/wsfleet/wsfleet/shared/notify"
)

// failingAPI answers batch calls with the failures it is given (by entry
// id), or with err for the whole request.
type failingAPI struct {
	API
	failIDs map[string]bool
	err     error
	calls   int
}

func (f *failingAPI) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if f.failIDs[aws.ToString(e.Id)] {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("try again")})
		} else {
			out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
		}
	}
	return out, nil
}

func (f *failingAPI) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		if f.failIDs[aws.ToString(e.Id)] {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("bad")})
		} else {
			out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
		}
	}
	return out, nil
}

func TestBatchFailuresAreAttributedToTheirEntries(t *testing.T) {
	ctx := context.Background()
	api := &failingAPI{failIDs: map[string]bool{"1": true}}
	q := New(api, "q", 0)
	errs := q.PublishBatch(ctx, []notify.Notification{
		{Type: "start", ConnectionID: "a"}, {Type: "start", ConnectionID: "b"}, {Type: "start", ConnectionID: "c"},
	})
	if errs[0] != nil || errs[2] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "InternalError") {
		t.Fatalf("publish outcomes %v, want only b failed", errs)
	}

	ms := make([]notify.Message, 12)
	for i := range ms {
		ms[i] = notify.Message{MessageID: "m" + string(rune('a'+i)), Receipt: "r"}
	}
	api.calls = 0
	err := q.Delete(ctx, ms...)
	if api.calls != 2 {
		t.Fatalf("%d DeleteMessageBatch calls for 12 messages, want 2", api.calls)
	}
	// Entry id 1 of each chunk fails: messages 1 and 11.
	if err == nil || !strings.Contains(err.Error(), "delete message mb ") || !strings.Contains(err.Error(), "delete message ml ") || strings.Contains(err.Error(), "message ma ") {
		t.Fatalf("delete error %v, want mb and ml named, ma not", err)
	}

	down := errors.New("unreachable")
	api.err = down
	errs = q.PublishBatch(ctx, []notify.Notification{{Type: "start", ConnectionID: "a"}, {Type: "start", ConnectionID: "b"}})
	if !errors.Is(errs[0], down) || !errors.Is(errs[1], down) {
		t.Fatalf("request failure not on every entry: %v", errs)
	}
	if err := q.Delete(ctx, ms[:2]...); !errors.Is(err, down) {
		t.Fatalf("delete request failure: %v", err)
	}
}
