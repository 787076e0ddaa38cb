package lease_test

import (
	"strings"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/lease"
)

// Config.Periodic decides per session whether its tenures write periodic
// checkpoints: one it refuses writes none however far it delivers, only the
// final one with its release; one it accepts writes its first at once and
// then one an interval; a new generation it accepts turns them on within an
// interval, and one it refuses turns them off. Here the test's Periodic
// reads a marker in the spec, as the worker reads whether the source can
// resume.
func TestPeriodicCheckpointsOnlyWhereConfigPeriodicSaysSo(t *testing.T) {
	on, off, later := started("on"), started("off"), started("later")
	on.Spec = `{"ws_url":"wss://x.invalid/on","resume":{"query_param":"from"}}`
	r := newRig(t, on, off, later)
	cfg := lease.DefaultConfig("w1")
	var asked int
	cfg.Periodic = func(it lease.Item) bool {
		asked++
		return strings.Contains(it.Spec, `"resume"`)
	}
	k, err := lease.NewKeeper(r.store, r.clk, cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Register(r.ctx); err != nil {
		t.Fatal(err)
	}
	hOn, hOff, hLater := r.acquire(k, "on"), r.acquire(k, "off"), r.acquire(k, "later")
	if asked != 3 || !hOn.Periodic() || hOff.Periodic() || hLater.Periodic() {
		t.Fatalf("Periodic asked %d times (want 3, one per acquire); periodic on %v off %v later %v", asked, hOn.Periodic(), hOff.Periodic(), hLater.Periodic())
	}
	writes := map[string]int{}
	var seq int64
	run := func(d time.Duration) {
		for end := r.clk.Now().Add(d); r.clk.Now().Before(end); {
			seq++
			for _, h := range []*lease.Held{hOn, hOff, hLater} {
				if h.Err() == nil {
					h.Observe(seq)
				}
			}
			before := map[string]int64{}
			for _, id := range []string{"on", "off", "later"} {
				it, _ := r.store.Get(r.ctx, id)
				before[id] = it.LastSeq
			}
			r.step(cfg.HeartbeatEvery, []*lease.Keeper{k}, nil)
			for id, was := range before {
				if it, _ := r.store.Get(r.ctx, id); it.LastSeq != was {
					writes[id]++
				}
			}
		}
	}
	run(10 * cfg.CheckpointEvery) // 10 minutes at 1 msg/s
	if writes["off"] != 0 || writes["later"] != 0 {
		t.Fatalf("sessions without periodic checkpoints wrote %d and %d in 10 busy minutes, want 0", writes["off"], writes["later"])
	}
	if n := writes["on"]; n < 10 || n > 12 {
		t.Fatalf("the periodic session wrote %d checkpoints in 10 busy minutes, want its first and then one a minute (10–12)", n)
	}
	if it, _ := r.store.Get(r.ctx, "on"); it.LastSeq < seq-int64(cfg.CheckpointEvery/cfg.HeartbeatEvery) {
		t.Fatalf("the periodic session's checkpoint %d lags the delivered %d by more than an interval", it.LastSeq, seq)
	}
	// The release writes the final checkpoint of a session without periodic ones.
	if err := k.Release(r.ctx, hOff); err != nil {
		t.Fatal(err)
	}
	if it, _ := r.store.Get(r.ctx, "off"); it.LastSeq != seq || it.Owner != "" {
		t.Fatalf("released: owner %q, last_seq %d, want the delivered %d", it.Owner, it.LastSeq, seq)
	}
	// A new generation that can resume turns them on within an interval.
	next := hLater.Item()
	next.Generation++
	next.Spec = `{"ws_url":"wss://x.invalid/later","resume":{"query_param":"from"}}`
	hLater.SetItem(next)
	if !hLater.Periodic() {
		t.Fatal("a new generation Periodic accepts did not turn periodic checkpoints on")
	}
	// And one it refuses turns them off.
	gone := hOn.Item()
	gone.Generation++
	gone.Spec = `{"ws_url":"wss://x.invalid/on"}`
	hOn.SetItem(gone)
	onBefore := writes["on"]
	run(cfg.CheckpointEvery + 2*cfg.HeartbeatEvery)
	if writes["later"] == 0 || hLater.Checkpointed() == lease.NoSeq {
		t.Fatalf("no periodic checkpoint within an interval of the new generation (checkpointed %d)", hLater.Checkpointed())
	}
	if hOn.Periodic() || writes["on"] != onBefore {
		t.Fatalf("a new generation Periodic refuses: periodic %v, %d more checkpoints", hOn.Periodic(), writes["on"]-onBefore)
	}
	for _, h := range []*lease.Held{hOn, hLater} {
		if err := k.Release(r.ctx, h); err != nil {
			t.Fatal(err)
		}
	}
}
