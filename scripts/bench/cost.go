package bench

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/wsfleet/wsfleet/shared/schema"
)

// DynamoDB prices and limits the cost figures use (on-demand, us-east-1; each
// with its source in docs/references.md, "DynamoDB").
const (
	PriceWriteMillion = 0.625 // $ per million write request units
	PriceReadMillion  = 0.125 // $ per million read request units
	PartitionWCU      = 1000  // write units per second one partition (one key value) takes
	HoursPerMonth     = 730
	// IndexEntryBytes is the size assumed for one KEYS_ONLY index entry
	// (Pk, index_shard, lease_expires_at_ms and DynamoDB's overhead).
	IndexEntryBytes = 100
)

// Units are the request units one request of a kind costs: writes to the
// base table, writes to the by_shard_expiry index, reads. Items are below
// 1 KB (one write unit) and the index is KEYS_ONLY.
type Units struct {
	Base  float64 `json:"base_wru"`
	Index float64 `json:"index_wru"`
	Read  float64 `json:"rru"`
}

// RequestUnits per dynamostore request kind (its Stats names). A write that
// moves lease_expires_at_ms (the index sort key) deletes and puts the index
// entry: 2 index units. A failed conditional write still costs a base unit.
// Consistent GetItem ≤ 4 KB: 1 read unit. A query page is eventually
// consistent: 0.5 read unit per 4 KB, at least one per page (computed from
// pages and items in ReadUnits, not here).
var RequestUnits = map[string]Units{
	"acquire":           {Base: 1, Index: 2},
	"acquire_failed":    {Base: 1},
	"renew":             {Base: 1, Index: 2},
	"renew_failed":      {Base: 1},
	"checkpoint":        {Base: 1}, // last_seq is not in the KEYS_ONLY index
	"release":           {Base: 1, Index: 2},
	"classify_read":     {Read: 1},
	"get":               {Read: 1},
	"orphan_query_page": {},
	"orphan_items_read": {},
}

// QueryReadUnits are the read units of pages query pages returning items
// index entries in all.
func QueryReadUnits(pages, items int64) float64 {
	byBytes := math.Ceil(float64(items) * IndexEntryBytes / 4096)
	return 0.5 * math.Max(float64(pages), byBytes)
}

// KindCost is one request kind's measured rate and cost.
type KindCost struct {
	Kind           string  `json:"kind"`
	Count          int64   `json:"count"`
	PerSessionHour float64 `json:"per_session_hour"`
	WRUPerSH       float64 `json:"wru_per_session_hour"` // base + index
	IndexWRUPerSH  float64 `json:"index_wru_per_session_hour"`
	RRUPerSH       float64 `json:"rru_per_session_hour"`
}

// CostRows turns request counts over sessionHours into per-session-hour
// rates and request units, sorted by kind.
func CostRows(counts map[string]int64, sessionHours float64) []KindCost {
	var out []KindCost
	if sessionHours <= 0 {
		return out
	}
	for kind, n := range counts {
		u := RequestUnits[kind]
		r := KindCost{Kind: kind, Count: n, PerSessionHour: float64(n) / sessionHours}
		r.WRUPerSH = r.PerSessionHour * (u.Base + u.Index)
		r.IndexWRUPerSH = r.PerSessionHour * u.Index
		r.RRUPerSH = r.PerSessionHour * u.Read
		if kind == "orphan_query_page" {
			r.RRUPerSH = QueryReadUnits(n, counts["orphan_items_read"]) / sessionHours
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// MonthlyPer1000 is the on-demand cost of 1,000 sessions for a month at the
// given request units per session-hour.
func MonthlyPer1000(wruPerSH, rruPerSH float64) float64 {
	return 1000 * HoursPerMonth * (wruPerSH*PriceWriteMillion + rruPerSH*PriceReadMillion) / 1e6
}

// GSIMaxSessions is the largest session count one index key value (one
// index_shard, e.g. STARTED#07) holds before it takes PartitionWCU write
// units per second: every session renews once per renewEvery (the jitter is
// symmetric) and each renewal writes 2 index units, so
//
//	N_max = PartitionWCU × renewEvery / 2.
func GSIMaxSessions(renewEvery time.Duration) int {
	return int(PartitionWCU * renewEvery.Seconds() / 2)
}

// GSIMaxSessionsMeasured is the same bound from a measured rate of index
// write units per session-hour.
func GSIMaxSessionsMeasured(indexWRUPerSH float64) int {
	if indexWRUPerSH <= 0 {
		return 0
	}
	return int(PartitionWCU * 3600 / indexWRUPerSH)
}

// ShardSpread is how unevenly ids fall on the index's shards: the fullest
// shard's count over the mean (1 = perfectly even).
func ShardSpread(ids []string) float64 {
	if len(ids) == 0 {
		return 0
	}
	counts := make([]int, schema.IndexShards)
	for _, id := range ids {
		counts[schema.IndexShardOf(id)]++
	}
	return float64(slices.Max(counts)) / (float64(len(ids)) / schema.IndexShards)
}
