package lease

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/clock"
)

// The sightings of a claim wave's orphans let go of their memory once
// forgotten: a Go map keeps the room of its largest size, which after a
// wave was that of every session claimed (148 B each in the capacity
// bench), for the life of the process.
func TestSightingsLetGoOfAWavesMemory(t *testing.T) {
	k, err := NewKeeper(nil, clock.NewFake(time.Unix(1_700_000_000, 0)), DefaultConfig("w"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 20000)
	for i := range ids {
		ids[i] = fmt.Sprintf("s-%05d", i)
	}
	_ = k.sightings(ids)
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	during := heap()
	for range 2 * unownedKeep { // no orphan listed any more: all forgotten
		_ = k.sightings(nil)
	}
	after := heap()
	runtime.KeepAlive(ids)
	if len(k.unownedSeen) != 0 {
		t.Fatalf("%d sightings remembered, want none", len(k.unownedSeen))
	}
	if freed := during - after; freed < 1<<20 {
		t.Fatalf("forgetting %d sightings freed %d B, want their map's room (over 1 MiB)", len(ids), freed)
	}
}
