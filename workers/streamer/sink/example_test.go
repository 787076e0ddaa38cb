package sink_test

import (
	"context"
	"fmt"
	"os"

	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// A Handler is all a user writes to receive the sessions' messages. This one
// prints each message; a real one would write to a database or a stream.
// Run it with the worker:
//
//	w, err := streamer.New(cfg, streamer.Deps{Store: store, Queue: queue, Handler: h})
func ExampleHandlerFunc() {
	h := sink.HandlerFunc(func(ctx context.Context, m sink.Message) error {
		// m.Data is only valid during the call: copy it to keep it.
		fmt.Printf("%s #%d (epoch %d): %s\n", m.ConnectionID, m.Seq, m.LeaseEpoch, m.Data)
		return nil // accepted: the worker may checkpoint past m.Seq
	})

	// What the worker does for every message, in order per session:
	_ = h.Handle(context.Background(), sink.Message{ConnectionID: "meeting-42", Seq: 7, LeaseEpoch: 3, Data: []byte(`{"seq":7,"text":"hello"}`)})
	// Output: meeting-42 #7 (epoch 3): {"seq":7,"text":"hello"}
}

// The default sink writes one JSON line per message.
func ExampleNewWriter() {
	w := sink.NewWriter(os.Stdout)
	_ = w.Handle(context.Background(), sink.Message{
		ConnectionID: "meeting-42", Seq: 7, LeaseEpoch: 3, WorkerID: "worker-a", ReceivedAtMs: 1700000000000,
		Data: []byte(`{"seq":7,"text":"hello"}`),
	})
	// Output: {"connection_id":"meeting-42","seq":7,"lease_epoch":3,"worker_id":"worker-a","received_at_ms":1700000000000,"data":{"seq":7,"text":"hello"}}
}

// A binary frame (audio, CBOR, …) is carried base64-encoded.
func ExampleAppendJSON_binary() {
	line := sink.AppendJSON(nil, sink.Message{
		ConnectionID: "meeting-42", Seq: 8, LeaseEpoch: 3, WorkerID: "worker-a", ReceivedAtMs: 1700000000000,
		Data: []byte{0x00, 0xff, 0x10}, Binary: true,
	})
	fmt.Println(string(line))
	// Output: {"connection_id":"meeting-42","seq":8,"lease_epoch":3,"worker_id":"worker-a","received_at_ms":1700000000000,"frame":"binary","data_b64":"AP8Q"}
}

// A message without its own seq (on_missing_seq deliver) carries the seq
// before it and its place after it.
func ExampleAppendJSON_withoutSeq() {
	line := sink.AppendJSON(nil, sink.Message{
		ConnectionID: "book-1", Seq: 41, Sub: 2, LeaseEpoch: 3, WorkerID: "worker-a", ReceivedAtMs: 1700000000000,
		Data: []byte(`{"type":"heartbeat"}`),
	})
	fmt.Println(string(line))
	// Output: {"connection_id":"book-1","seq":41,"lease_epoch":3,"worker_id":"worker-a","sub":2,"received_at_ms":1700000000000,"data":{"type":"heartbeat"}}
}
