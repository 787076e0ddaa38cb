package apiclient

import (
	"errors"
	"fmt"
	"net"
)

// UnreachableError is a request that could not connect to the API at all
// (nothing listens on its port, or its host does not resolve): most often
// the local stack is not running, or --api names another address.
type UnreachableError struct {
	API string
	Err error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the API at %s: is the stack running? (start it with make dev, or pass --api URL) (%v)", e.API, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// isDialError reports whether err happened while connecting (before any
// byte of the request was sent).
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
