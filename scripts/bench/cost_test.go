package bench

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

func TestGSIMaxSessions(t *testing.T) {
	// Default timings: renew every TTL/3 = 3.333 s, 2 index units each:
	// 1,000 WCU/s × 3.333 s / 2 = 1,666 sessions.
	if got := GSIMaxSessions(10 * time.Second / 3); got != 1666 {
		t.Fatalf("at 3.33 s: %d, want 1666", got)
	}
	if got := GSIMaxSessions(5 * time.Second); got != 2500 {
		t.Fatalf("at 5 s: %d, want 2500", got)
	}
	// 1,080 renewals per session-hour × 2 index units = 2,160 index WRU/h.
	if got := GSIMaxSessionsMeasured(2160); got != 1666 {
		t.Fatalf("measured: %d, want 1666", got)
	}
	if GSIMaxSessionsMeasured(0) != 0 {
		t.Fatal("no writes: want 0")
	}
}

func TestCostRowsAndMonthly(t *testing.T) {
	rows := CostRows(map[string]int64{"renew": 1080, "checkpoint": 0, "orphan_query_page": 720, "orphan_items_read": 0}, 1)
	byKind := map[string]KindCost{}
	for _, r := range rows {
		byKind[r.Kind] = r
	}
	if r := byKind["renew"]; r.PerSessionHour != 1080 || r.WRUPerSH != 3240 || r.IndexWRUPerSH != 2160 {
		t.Fatalf("renew: %+v", r)
	}
	if r := byKind["orphan_query_page"]; r.RRUPerSH != 360 {
		t.Fatalf("queries: %+v (want 0.5 RRU per page)", r)
	}
	// 3,240 WRU per session-hour: 1,000 × 730 × 3,240 × $0.625 / 1e6 = $1,478.25.
	if got := MonthlyPer1000(3240, 0); math.Abs(got-1478.25) > 0.01 {
		t.Fatalf("monthly: %v", got)
	}
	if QueryReadUnits(1, 100) != 1.5 {
		t.Fatalf("a page of 100 entries (~10 KB): %v RRU, want 1.5", QueryReadUnits(1, 100))
	}
	if len(CostRows(map[string]int64{"renew": 1}, 0)) != 0 {
		t.Fatal("no session-hours: want no rows")
	}
}

func TestShardSpread(t *testing.T) {
	if ShardSpread(nil) != 0 {
		t.Fatal("no ids")
	}
	// Ids that all hash to one shard: the fullest holds IndexShards × the mean.
	var same []string
	for i := 0; len(same) < 32; i++ {
		id := fmt.Sprintf("x-%d", i)
		if schema.IndexShardOf(id) == 3 {
			same = append(same, id)
		}
	}
	if got := ShardSpread(same); got != schema.IndexShards {
		t.Fatalf("all on one shard: %.2f, want %d", got, schema.IndexShards)
	}
	var many []string
	for i := 0; i < 16000; i++ {
		many = append(many, fmt.Sprintf("cost-%05d", i))
	}
	if got := ShardSpread(many); got < 1 || got > 1.15 {
		t.Fatalf("16,000 ids: spread %.2f", got)
	}
}
