package streamer_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/coder/websocket"
	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/netguard"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/shared/spec"
	"github.com/wsfleet/wsfleet/workers/streamer"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// A worker on the memory store with a Go handler as its sink: it claims the
// one session in the table, streams its messages to the handler in order,
// and on cancel hands the session back (closed, checkpointed, released).
// Production wires the DynamoDB store and the SQS work queue instead
// (cmd/streamer).
func Example() {
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for seq := 1; seq <= 3; seq++ {
			_ = c.Write(r.Context(), websocket.MessageText, fmt.Appendf(nil, `{"seq":%d,"text":"hello %d"}`, seq, seq))
		}
		_, _, _ = c.Read(r.Context()) // until the worker closes it
	}))
	defer src.Close()

	store := memstore.New()
	stored, err := spec.Spec{WSURL: "ws" + strings.TrimPrefix(src.URL, "http") + "/feed"}.Stored()
	if err != nil {
		panic(err)
	}
	store.Put(lease.Item{ConnectionID: "meeting-42", DesiredState: schema.StateStarted, Spec: stored, Generation: 1, LastSeq: lease.NoSeq})

	ctx, stop := context.WithCancel(context.Background())
	handler := sink.HandlerFunc(func(_ context.Context, m sink.Message) error {
		fmt.Printf("%s #%d: %s\n", m.ConnectionID, m.Seq, m.Data)
		if m.Seq == 3 {
			stop() // enough: shut the worker down
		}
		return nil
	})

	cfg := streamer.DefaultConfig()
	cfg.WorkerID = "worker-a"
	cfg.AdminAddr = ""                      // no admin server
	cfg.AllowPrivateIPs = netguard.Loopback // the source is on 127.0.0.1
	log := zerolog.Nop()
	w, err := streamer.New(cfg, streamer.Deps{Store: store, Handler: handler, Logger: &log, Metrics: io.Discard})
	if err != nil {
		panic(err)
	}
	if err := w.Run(ctx); err != nil { // returns after the graceful shutdown
		panic(err)
	}

	it, _ := store.Get(context.Background(), "meeting-42")
	fmt.Printf("released: owner %q, checkpoint %d\n", it.Owner, it.LastSeq)
	// Output:
	// meeting-42 #1: {"seq":1,"text":"hello 1"}
	// meeting-42 #2: {"seq":2,"text":"hello 2"}
	// meeting-42 #3: {"seq":3,"text":"hello 3"}
	// released: owner "", checkpoint 3
}
