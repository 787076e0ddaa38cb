//go:build fleetsim

package fleetsim

import (
	"context"
	"net"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// An outage of the table (the ddb-down scenario): every call of a worker
// whose memberStore is down meets an unreachable endpoint. Such a request
// does not fail at once: its connect hangs until the call's context ends
// (every worker call has a deadline: lease.Config.RPCTimeout) or the SDK's
// connect timeout (awshttp.DefaultDialConnectTimeout, 30 s) passes, and it
// fails with the error the SDK gives then: a smithy.OperationError wrapping
// a CanceledError of the context's error, or a RequestSendError wrapping a
// dial timeout. dynamostore maps neither to a typed error (only throttling
// is lease.ErrThrottled, shared/lease/dynamostore/errors.go): the worker
// sees an untyped store error, as it would in production. The SDK's retries
// of a send error are not modelled: they happen within the same deadline.

// errDialTimeout is the dial's i/o timeout (a net.Error whose Timeout is
// true).
type errDialTimeout struct{}

func (errDialTimeout) Error() string   { return "i/o timeout" }
func (errDialTimeout) Timeout() bool   { return true }
func (errDialTimeout) Temporary() bool { return true }

// SetDown makes the table unreachable for m until end (the zero time: back
// now).
func (m *memberStore) SetDown(end time.Time) {
	if end.IsZero() {
		m.down.Store(0)
		return
	}
	m.down.Store(end.UnixNano())
}

// unreachable is nil when the table is reachable; else it waits as a
// request to an unreachable endpoint does and returns the SDK's error. A
// call that began in the outage fails even if the outage ends while it
// waits (its connection attempt was lost).
func (m *memberStore) unreachable(ctx context.Context, write bool) error {
	end := m.down.Load()
	if end == 0 || !time.Now().Before(time.Unix(0, end)) {
		return nil
	}
	op := "Query"
	if write {
		op = "UpdateItem"
	}
	t := time.NewTimer(awshttp.DefaultDialConnectTimeout)
	defer t.Stop()
	var err error
	select {
	case <-ctx.Done():
		err = &smithy.CanceledError{Err: ctx.Err()}
	case <-t.C:
		err = &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: errDialTimeout{}}}
	}
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: err}
}
