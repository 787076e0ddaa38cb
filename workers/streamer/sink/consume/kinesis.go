package consume

import (
	"fmt"

	"github.com/wsfleet/wsfleet/workers/streamer/sink/kpl"
)

// This file reads the kinesis sink's records.

// FromKinesis returns the envelopes of a Kinesis record's data: the user
// records of a KPL-aggregated record (kinesissink aggregates the queued
// messages of a session, or of the sessions of a hash bucket, each user
// record under its own partition key; sink/kpl), each one envelope, or the one envelope of a
// plain record. A consumer reading through the KCL or a Lambda
// deaggregation module gets the user records already taken apart: Parse
// each.
func FromKinesis(data []byte) ([]Envelope, error) {
	users, err := kpl.Deaggregate(data)
	if err != nil {
		return nil, fmt.Errorf("kinesis record: %w", err)
	}
	envs := make([]Envelope, 0, len(users))
	for i, u := range users {
		e, err := Parse(u)
		if err != nil {
			return nil, fmt.Errorf("kinesis record, user record %d: %w", i, err)
		}
		envs = append(envs, e)
	}
	return envs, nil
}
