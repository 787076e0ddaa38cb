package devstack

// The stack's loopback ports: checking the fixed ones are free and picking
// free ones for those left 0.

import (
	"fmt"
	"net"
	"strconv"

	"github.com/wsfleet/wsfleet/testkit/enginetest"
)

// Ports are the loopback ports of the stack; 0 picks a free one.
type Ports struct {
	Dynamo    int
	SQS       int
	API       int // the ingest local front
	Feed      int
	AdminBase int // worker n's admin server listens on AdminBase+n
	// SecretsManager is the Secrets Manager stand-in's (with
	// Config.SecretsManager).
	SecretsManager int
}

func pickPort(p *int, what string) error {
	if *p == 0 {
		free, err := enginetest.FreePort()
		if err != nil {
			return err
		}
		*p = free
		return nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*p))
	if err != nil {
		return fmt.Errorf("%s port %d is taken (another stack running? a second stack needs its own --dir and other ports, or 0 for free ones): %w", what, *p, err)
	}
	return l.Close()
}

// namedPort is a port of the stack with the name its errors give it.
type namedPort struct {
	p    *int
	what string
}

// fixed are the ports Start checks (or picks, when 0) before it starts
// anything.
func (p *Ports) fixed() []namedPort {
	return []namedPort{{&p.Dynamo, "dynamo"}, {&p.SQS, "sqs"}, {&p.API, "ingest api"}, {&p.Feed, "feed"}}
}

// CheckTaken is Start's "port is taken" error for the first of p's ports
// (those not 0) that something listens on, found without starting or
// touching anything: make dev checks before --fresh deletes.
func (p Ports) CheckTaken() error {
	for _, np := range p.fixed() {
		if *np.p != 0 {
			if err := pickPort(np.p, np.what); err != nil {
				return err
			}
		}
	}
	return nil
}
