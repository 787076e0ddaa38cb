package streamer

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/shared/lease/memstore"
	"github.com/wsfleet/wsfleet/shared/logging"
	"github.com/wsfleet/wsfleet/shared/schema"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// A registration that was applied but answered with a timeout is retried by
// the worker and counts as its own (its boot id is on the record): the
// worker starts and takes its sessions instead of exiting on "worker record
// exists".
func TestRegisterRetriedAfterItAppliedStartsTheWorker(t *testing.T) {
	st := memstore.New()
	var registers atomic.Int64
	st.SetFail(func(op string) (error, bool) {
		if op == "register" && registers.Add(1) == 1 {
			return context.DeadlineExceeded, true // applied, the answer lost
		}
		return nil, false
	})
	m := startMemOn(t, st, 2, nil, nil)
	testwait.Eventually(t, 10*time.Second, "the worker owns its sessions", func() bool { return m.Status().Owned == 2 })
	if n := registers.Load(); n < 2 {
		t.Fatalf("%d register attempts, want the retry", n)
	}
	if rec, err := st.GetWorker(context.Background(), m.ID()); err != nil || !rec.Alive() || rec.BootID == "" {
		t.Fatalf("worker record %+v %v", rec, err)
	}
}

// A second process with a worker id already registered (another boot id)
// does not start: Run returns an error that says the id is taken and must
// be unique, and the first worker's record is untouched.
func TestAReusedWorkerIDIsAStartupError(t *testing.T) {
	m := startMem(t, 1, nil, nil)
	testwait.Eventually(t, 5*time.Second, "the first worker owns its session", func() bool { return m.Status().Owned == 1 })
	before, _ := m.store.GetWorker(context.Background(), m.ID())
	cfg := testConfig(m.ID())
	log := logging.New(&syncBuffer{}, schema.ServiceStreamer, "info")
	w, err := New(cfg, Deps{Store: m.store, Handler: m.sink, Logger: &log, Metrics: &syncBuffer{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = w.Run(ctx)
	if !errors.Is(err, lease.ErrWorkerExists) || !strings.Contains(err.Error(), "already registered by another process") ||
		!strings.Contains(err.Error(), schema.EnvWorkerID) {
		t.Fatalf("second process with id %s: %v", m.ID(), err)
	}
	after, _ := m.store.GetWorker(context.Background(), m.ID())
	if after.BootID != before.BootID || !after.Alive() || after.Epoch != before.Epoch {
		t.Fatalf("the first worker's record changed: %+v → %+v", before, after)
	}
}
