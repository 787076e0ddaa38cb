package consume

import (
	"testing"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/kpl"
)

// An aggregated record gives back every envelope in it, in order (one
// session's, or several sessions' of a hash bucket, each under its own
// partition key), and a plain one (aggregation off, or a worker from before
// it) its one envelope; a record whose MD5 does not match is an error, never
// envelopes.
func TestFromKinesis(t *testing.T) {
	datas := make([][]byte, len(messages))
	for i, m := range messages {
		datas[i] = sink.AppendJSON(nil, m)
	}
	agg := kpl.Aggregate("c", datas)
	envs, err := FromKinesis(agg)
	if err != nil {
		t.Fatal(err)
	}
	check(t, envs, messages)

	envs, err = FromKinesis(datas[0])
	if err != nil {
		t.Fatal(err)
	}
	check(t, envs, messages[:1])

	// hash buckets: user records of several sessions and tenures under
	// their own partition keys and one explicit hash key
	var users []kpl.User
	var mixed []sink.Message
	for i, m := range messages {
		other := m
		other.ConnectionID, other.LeaseEpoch = "other", int64(i%2+1)
		mixed = append(mixed, m, other)
		for _, x := range []sink.Message{m, other} {
			users = append(users, kpl.User{PartitionKey: x.ConnectionID, ExplicitHashKey: "170141183460469231731687303715884105728", Data: sink.AppendJSON(nil, x)})
		}
	}
	envs, err = FromKinesis(kpl.AggregateUsers(users))
	if err != nil {
		t.Fatal(err)
	}
	check(t, envs, mixed)

	bad := append([]byte(nil), agg...)
	bad[len(bad)-1] ^= 1
	if envs, err := FromKinesis(bad); err == nil {
		t.Fatalf("a record with a bad MD5 gave %d envelopes, want an error", len(envs))
	}
}
