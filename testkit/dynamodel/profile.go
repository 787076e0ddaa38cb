package dynamodel

import (
	"fmt"

	"github.com/wsfleet/wsfleet/testkit/ddbrules"
)

// Dist is a distribution of durations (testkit/ddbrules, the one
// definition the model and testkit/simddb share).
type Dist = ddbrules.Dist

// Throughput is the throttling model (testkit/ddbrules).
type Throughput = ddbrules.Throughput

// Faults are the shares of writes (PutItem, UpdateItem, DeleteItem,
// BatchWriteItem) answered ambiguously: Before, 500 InternalServerError
// without applying the write; After, 500 after applying it; Drop, the
// connection closed without a reply after applying it.
type Faults struct {
	Before float64 `json:"before"`
	After  float64 `json:"after"`
	Drop   float64 `json:"drop"`
}

// Profile is every behaviour the model adds to dynalite, each with its
// setting. AWS and Dynalite are the two defaults; a test copies one and
// changes what it needs.
type Profile struct {
	Name string `json:"name"`
	// Latency is the service latency per operation (the X-Amz-Target
	// operation name, e.g. "GetItem"); operations not listed get none.
	Latency map[string]Dist `json:"latency"`
	// Lag is how long after a write its item image reaches the state that
	// index queries and eventually consistent reads answer from, drawn per
	// write. The zero Dist: no lagging state (every read is answered by
	// the primary, as dynalite does).
	Lag        Dist       `json:"lag"`
	Throughput Throughput `json:"throughput"`
	Faults     Faults     `json:"faults"`
	// Meter turns on billing (Model.Meter). It costs one consistent read of
	// the item before every write (the lagging state and throttling read
	// it too).
	Meter bool `json:"meter"`
}

func (p Profile) check() error {
	for op, d := range p.Latency {
		if err := d.Check("dynamodel: latency of " + op); err != nil {
			return err
		}
	}
	if err := p.Lag.Check("dynamodel: lag"); err != nil {
		return err
	}
	for _, s := range []float64{p.Faults.Before, p.Faults.After, p.Faults.Drop} {
		if s < 0 || s > 1 {
			return fmt.Errorf("dynamodel: fault shares must be in [0, 1]: %+v", p.Faults)
		}
	}
	return nil
}

// AWS is the default profile: DynamoDB as AWS documents it (each number's
// source is in docs/references.md, section "DynamoDB as the model
// (testkit/dynamodel) behaves"). Where AWS publishes no number (the shape of
// the latency distribution, the rate of ambiguous errors) the value is the
// model's assumption and says so there.
func AWS() Profile {
	return Profile{
		Name:       "aws",
		Latency:    ddbrules.AWSLatency(),
		Lag:        ddbrules.AWSLag(),
		Throughput: ddbrules.AWSThroughput(),
		Faults:     Faults{Before: 0.001, After: 0.001, Drop: 0.001},
		Meter:      true,
	}
}

// Dynalite is the profile that adds nothing: every request is forwarded to
// dynalite and its reply returned unchanged (no latency, no lag, no
// throttling, no faults, no metering).
func Dynalite() Profile { return Profile{Name: "dynalite"} }

// ProfileByName is AWS() for "aws" and Dynalite() for "dynalite".
func ProfileByName(name string) (Profile, error) {
	switch name {
	case "aws":
		return AWS(), nil
	case "dynalite":
		return Dynalite(), nil
	}
	return Profile{}, fmt.Errorf("dynamodel: unknown profile %q (aws or dynalite)", name)
}
