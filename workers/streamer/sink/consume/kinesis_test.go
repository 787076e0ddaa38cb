package consume

import (
	"testing"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/kpl"
)

// An aggregated record gives back every envelope in it, in order, and a
// plain one (aggregation off, or a worker from before it) its one
// envelope; a record whose MD5 does not match is an error, never
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

	bad := append([]byte(nil), agg...)
	bad[len(bad)-1] ^= 1
	if envs, err := FromKinesis(bad); err == nil {
		t.Fatalf("a record with a bad MD5 gave %d envelopes, want an error", len(envs))
	}
}
