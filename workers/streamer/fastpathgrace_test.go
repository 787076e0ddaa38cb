package streamer

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/notify"
	"github.com/wsfleet/wsfleet/workers/streamer/internal/claim"
	"github.com/wsfleet/wsfleet/workers/streamer/sink"
)

// idleQueue is a work queue that is never received from (New only).
type idleQueue struct{}

func (idleQueue) Receive(context.Context, int) ([]notify.Message, error)       { return nil, nil }
func (idleQueue) Delete(context.Context, ...notify.Message) error              { return nil }
func (idleQueue) Requeue(context.Context, notify.Message, time.Duration) error { return nil }
func (idleQueue) Publish(context.Context, notify.Notification) error           { return nil }

// Issue 37: a worker that consumes the work queue leaves a session its
// reconcile listings show unowned to the start notification for
// claim.FastPathGrace (half a reconcile interval); one without a queue
// claims by reconciliation alone and tries it on first sight.
func TestFreshOrphansLeftToTheFastPathOnlyWithAWorkQueue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue WorkQueue
		want  func(Config) string
	}{
		{"with a work queue", idleQueue{}, func(c Config) string { return claim.FastPathGrace(c.ReconcileEvery).String() }},
		{"without", nil, func(Config) string { return "0s" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.WorkerID = "w-grace"
			log := zerolog.Nop()
			w, err := New(cfg, Deps{Store: memstore.New(), Queue: tc.queue, Handler: sink.Discard, Logger: &log, Metrics: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := w.keeper.Config().UnownedGrace.String(), tc.want(cfg); got != want {
				t.Fatalf("UnownedGrace %s, want %s", got, want)
			}
		})
	}
}
