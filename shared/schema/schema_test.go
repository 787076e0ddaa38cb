package schema

import (
	"fmt"
	"hash/fnv"
	"testing"
)

func TestIndexShards(t *testing.T) {
	if IndexShards > 100 {
		t.Fatalf("IndexShardKey formats two digits; IndexShards = %d", IndexShards)
	}
	if got := IndexShardKey(StateStarted, 7); got != "STARTED#07" {
		t.Fatalf("IndexShardKey = %q", got)
	}
	if got := IndexShardKey(StateStopped, 15); got != "STOPPED#15" {
		t.Fatalf("IndexShardKey = %q", got)
	}
	counts := make([]int, IndexShards)
	for i := 0; i < 16000; i++ {
		id := fmt.Sprintf("meeting-%d", i)
		k := IndexShardOf(id)
		h := fnv.New32a()
		h.Write([]byte(id))
		if want := int(h.Sum32() % IndexShards); k != want {
			t.Fatalf("IndexShardOf(%q) = %d, want FNV-1a %d", id, k, want)
		}
		counts[k]++
	}
	// 1,000 expected per shard: every shard within ±15 %.
	for k, n := range counts {
		if n < 850 || n > 1150 {
			t.Fatalf("shard %d holds %d of 16,000 ids: %v", k, n, counts)
		}
	}
	if IndexShardFor(StateStarted, "meeting-1") != IndexShardKey(StateStarted, IndexShardOf("meeting-1")) {
		t.Fatal("IndexShardFor disagrees with IndexShardKey")
	}
}
