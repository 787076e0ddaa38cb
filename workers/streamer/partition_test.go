package streamer

import (
	"errors"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
	"github.com/wsfleet/wsfleet/testkit/testwait"
)

// TestPartitionFromTheTable: a worker that still reaches its sources but no
// longer reaches DynamoDB stops delivering on every session at its trust
// deadline (last successful heartbeat + TTL − margin); a watcher declares it
// dead only after its heartbeat counter stood still for a TTL and takes the
// sessions over; at no instant are two connections of a session open at the
// source (checked for every session when the test ends); when the partition
// heals, the dead worker's next heartbeat fails and it exits.
func TestPartitionFromTheTable(t *testing.T) {
	e := newEnv(t)
	proxy := e.tableProxy()
	a := e.worker(nil)
	e.workerDB = nil
	ids := e.streamOn(a, 3, 5)
	b := e.worker(nil)
	testwait.Eventually(t, 5*time.Second, "b watches a", func() bool {
		for _, w := range b.Status().Watching {
			if w == a.ID() {
				return true
			}
		}
		return false
	})
	cfg := testConfig("x")
	partitioned := time.Now()
	proxy.Freeze()
	// a's last successful heartbeat was sent before the partition: it
	// trusts its sessions until at most partitioned + TTL − margin.
	fence := partitioned.Add(cfg.LeaseTTL - cfg.SafetyMargin)
	testwait.Eventually(t, cfg.LeaseTTL+slack, "b delivers all 3", func() bool {
		for _, id := range ids {
			if len(byWorker(e.sink.get(id), b.ID())) < 5 {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		ds := e.sink.get(id)
		fromA, fromB := byWorker(ds, a.ID()), byWorker(ds, b.ID())
		if last := fromA[len(fromA)-1].at; last.After(fence) {
			t.Errorf("%s: a delivered at %s, %s after its trust deadline", id, last.Format("15:04:05.000"), last.Sub(fence))
		}
		if took := fromB[0].at.Sub(partitioned); took < cfg.LeaseTTL-cfg.SafetyMargin {
			t.Errorf("%s: b delivered %s after the partition, before a could have fenced", id, took)
		}
		if fromB[0].epoch != fromA[0].epoch+1 {
			t.Errorf("%s: b's epoch %d after a's %d", id, fromB[0].epoch, fromA[0].epoch)
		}
		t.Logf("%s: a's last delivery %s before its deadline, b's first %s after the partition",
			id, fence.Sub(fromA[len(fromA)-1].at).Round(time.Millisecond), fromB[0].at.Sub(partitioned).Round(time.Millisecond))
	}
	proxy.Thaw()
	select {
	case err := <-a.done:
		a.stopped = true
		if !errors.Is(err, lease.ErrWorkerDead) {
			t.Fatalf("a's Run returned %v after the partition healed, want ErrWorkerDead", err)
		}
	case <-time.After(cfg.HeartbeatEvery + 2*testRPC + slack):
		t.Fatal("a still running after the partition healed")
	}
}
