package consume_test

import (
	"fmt"
	"strings"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
	"github.com/wsfleet/wsfleet/workers/streamer/sink/consume"
)

// A consumer of the output queue: each received message (its body and its
// content-type attribute) gives its envelopes; the Filter drops a replay
// (here a message received twice) and a late write of an older tenure.
func ExampleFromSQS() {
	envelope := func(seq, epoch int64, data string) string {
		return string(sink.AppendEnvelope(nil, sink.Message{ConnectionID: "c", Seq: seq, LeaseEpoch: epoch, WorkerID: "w", Data: []byte(data)}, sink.SQSChars))
	}
	received := []struct{ body, contentType string }{
		{strings.Join([]string{envelope(1, 2, `{"p":1}`), envelope(2, 2, "two")}, "\n"), consume.PackV1},
		{strings.Join([]string{envelope(1, 2, `{"p":1}`), envelope(2, 2, "two")}, "\n"), consume.PackV1}, // received again
		{envelope(3, 1, "late"), ""},  // an older tenure's write, applied late (a plain message)
		{envelope(3, 2, "three"), ""}, // a worker from before packing
	}
	var seen consume.Filter
	for _, m := range received {
		envs, err := consume.FromSQS(m.body, m.contentType)
		if err != nil {
			fmt.Println(err)
			continue
		}
		for _, e := range envs {
			if !seen.Wanted(e) {
				continue
			}
			fmt.Printf("%s seq %d epoch %d: %s\n", e.ConnectionID, e.Seq, e.LeaseEpoch, e.Data) // store it, then:
			seen.Took(e)
		}
	}
	// Output:
	// c seq 1 epoch 2: {"p":1}
	// c seq 2 epoch 2: two
	// c seq 3 epoch 2: three
}
