// The DynamoDB price model: units by kind and category, per session-hour,
// per tenure, the monthly cost and the table ceiling.

package bench

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/wsfleet/wsfleet/shared/lease/dynamostore"
)

// DynamoDB prices and limits the cost figures use (on-demand, us-east-1; each
// with its source in docs/references.md, "DynamoDB").
const (
	PriceWriteMillion = 0.625 // $ per million write request units
	PriceReadMillion  = 0.125 // $ per million read request units
	PartitionWCU      = 1000  // write units per second one partition (one key value) takes
	PartitionRCU      = 3000  // read units per second one partition takes
	// TableWRULimit is an on-demand table's default write quota (write
	// request units per second, adjustable on request).
	TableWRULimit = 40000
	HoursPerMonth = 730
)

// The figures issue 13 replaced (docs/BENCHMARKS.md before it: one
// conditional renewal per session every 3.33 s, 1 base and 2 index write
// units each).
const (
	PreviousWRUPerSH   = 3217
	PreviousMonthly    = 1468.63 // $ per 1,000 sessions per month ("$1,469")
	PreviousTableLimit = 26656   // sessions per table (16 index shards × 1,666)
)

// DefaultSessionsPerWorker is the worker's default MaxSessions: the cost
// goals are stated at it.
const DefaultSessionsPerWorker = 1000

// Usage is what a store's requests of one kind cost (dynamostore's meter).
type Usage = dynamostore.Usage

// Category order of the cost split.
var costCategories = []string{dynamostore.CatLiveness, dynamostore.CatOwnership, dynamostore.CatCheckpoint, dynamostore.CatReads}

// perWorkerKinds are the request kinds whose rate is set by the number of
// workers, not of sessions: a worker's own record (register, heartbeat,
// leave), the records it watches and lists, the unowned shards its
// reconciler reads every pass. Every other kind (acquire, release,
// checkpoint, the by_owner audit whose pages grow with the sessions held,
// the reads of single sessions) scales with the sessions.
var perWorkerKinds = map[string]bool{
	dynamostore.OpRegister: true, dynamostore.OpHeartbeat: true, dynamostore.OpDeclareDead: true,
	dynamostore.OpLeave: true, dynamostore.OpMarkDone: true,
	dynamostore.OpGetWorker: true, dynamostore.OpListWorkers: true, dynamostore.OpUnowned: true,
}

// PerWorker says whether kind's rate is set by the workers (true) or by the
// sessions.
func PerWorker(kind string) bool { return perWorkerKinds[kind] }

// KindCost is one request kind's usage over a window and its rates.
type KindCost struct {
	Kind      string `json:"kind"`
	Category  string `json:"category"`
	PerWorker bool   `json:"per_worker"`
	Usage     Usage  `json:"usage"` // in the window
	// Per session-hour as measured (at this run's sessions per worker).
	WRUPerSH      float64 `json:"wru_per_session_hour"` // base + index
	IndexWRUPerSH float64 `json:"index_wru_per_session_hour"`
	RRUPerSH      float64 `json:"rru_per_session_hour"`
	// Per worker-hour.
	WRUPerWH float64 `json:"wru_per_worker_hour"`
	RRUPerWH float64 `json:"rru_per_worker_hour"`
	// At DefaultSessionsPerWorker: a per-worker kind's worker-hour figure
	// divided by 1,000, a per-session kind's measured figure.
	NormWRUPerSH float64 `json:"wru_per_session_hour_at_1000_per_worker"`
	NormRRUPerSH float64 `json:"rru_per_session_hour_at_1000_per_worker"`
}

// CatCost is one category's (or the total's) rates.
type CatCost struct {
	Category      string  `json:"category"`
	WRUPerSH      float64 `json:"wru_per_session_hour"`
	IndexWRUPerSH float64 `json:"index_wru_per_session_hour"`
	RRUPerSH      float64 `json:"rru_per_session_hour"`
	WRUPerWH      float64 `json:"wru_per_worker_hour"`
	RRUPerWH      float64 `json:"rru_per_worker_hour"`
	NormWRUPerSH  float64 `json:"wru_per_session_hour_at_1000_per_worker"`
	NormRRUPerSH  float64 `json:"rru_per_session_hour_at_1000_per_worker"`
}

func (c *CatCost) add(k KindCost) {
	c.WRUPerSH += k.WRUPerSH
	c.IndexWRUPerSH += k.IndexWRUPerSH
	c.RRUPerSH += k.RRUPerSH
	c.WRUPerWH += k.WRUPerWH
	c.RRUPerWH += k.RRUPerWH
	c.NormWRUPerSH += k.NormWRUPerSH
	c.NormRRUPerSH += k.NormRRUPerSH
}

// CostSplit is a window's usage by kind, by category and in all.
type CostSplit struct {
	Kinds      []KindCost `json:"kinds"`
	Categories []CatCost  `json:"categories"` // liveness, ownership, checkpoints, reads
	Total      CatCost    `json:"total"`
}

// Category returns the named category's rates (zero when absent).
func (s CostSplit) Category(name string) CatCost {
	for _, c := range s.Categories {
		if c.Category == name {
			return c
		}
	}
	return CatCost{Category: name}
}

// Split turns the usage of a window (summed over the workers' stores) into
// rates per session-hour and per worker-hour, and at the defaults' 1,000
// sessions per worker. Kinds with no request are left out.
func Split(units map[string]Usage, sessionHours, workerHours float64) CostSplit {
	var out CostSplit
	cats := map[string]*CatCost{}
	for _, c := range costCategories {
		cats[c] = &CatCost{Category: c}
	}
	for kind, u := range units {
		if u.Requests() == 0 && u.TotalWriteUnits() == 0 && u.ReadUnits == 0 {
			continue
		}
		k := KindCost{Kind: kind, Category: dynamostore.Category(kind), PerWorker: PerWorker(kind), Usage: u}
		wru, rru := float64(u.TotalWriteUnits()), u.ReadUnits
		if sessionHours > 0 {
			k.WRUPerSH, k.IndexWRUPerSH, k.RRUPerSH = wru/sessionHours, float64(u.IndexWriteUnits)/sessionHours, rru/sessionHours
		}
		if workerHours > 0 {
			k.WRUPerWH, k.RRUPerWH = wru/workerHours, rru/workerHours
		}
		if k.PerWorker {
			k.NormWRUPerSH, k.NormRRUPerSH = k.WRUPerWH/DefaultSessionsPerWorker, k.RRUPerWH/DefaultSessionsPerWorker
		} else {
			k.NormWRUPerSH, k.NormRRUPerSH = k.WRUPerSH, k.RRUPerSH
		}
		out.Kinds = append(out.Kinds, k)
		c := cats[k.Category]
		if c == nil {
			c = &CatCost{Category: k.Category}
			cats[k.Category] = c
		}
		c.add(k)
		out.Total.add(k)
	}
	sort.Slice(out.Kinds, func(i, j int) bool {
		a, b := out.Kinds[i], out.Kinds[j]
		if a.Category != b.Category {
			return catRank(a.Category) < catRank(b.Category)
		}
		return a.Kind < b.Kind
	})
	for _, c := range costCategories {
		out.Categories = append(out.Categories, *cats[c])
	}
	out.Total.Category = "total"
	return out
}

func catRank(c string) int {
	for i, x := range costCategories {
		if x == c {
			return i
		}
	}
	return len(costCategories)
}

// IndexWriteUnits is every index write unit in units.
func IndexWriteUnits(units map[string]Usage) int64 {
	var n int64
	for _, u := range units {
		n += u.IndexWriteUnits
	}
	return n
}

// MonthlyPer1000 is the on-demand cost of 1,000 sessions for a month at the
// given request units per session-hour.
func MonthlyPer1000(wruPerSH, rruPerSH float64) float64 {
	return 1000 * HoursPerMonth * (wruPerSH*PriceWriteMillion + rruPerSH*PriceReadMillion) / 1e6
}

// TableCeiling is how many sessions one on-demand table holds at its
// default write quota when each costs wruPerSH write units per hour:
// TableWRULimit ÷ (write units per session-second).
func TableCeiling(wruPerSH float64) int {
	if wruPerSH <= 0 {
		return 0
	}
	return int(TableWRULimit * 3600 / wruPerSH)
}

// diffUnits is b − a per kind.
func diffUnits(b, a map[string]Usage) map[string]Usage {
	out := map[string]Usage{}
	for k, x := range b {
		y := a[k]
		out[k] = Usage{
			Writes: x.Writes - y.Writes, Reads: x.Reads - y.Reads, ConditionFailed: x.ConditionFailed - y.ConditionFailed,
			WriteUnits: x.WriteUnits - y.WriteUnits, IndexWriteUnits: x.IndexWriteUnits - y.IndexWriteUnits, ReadUnits: x.ReadUnits - y.ReadUnits,
		}
	}
	return out
}

// addUnits adds b into a.
func addUnits(a, b map[string]Usage) {
	for k, x := range b {
		y := a[k]
		a[k] = Usage{
			Writes: x.Writes + y.Writes, Reads: x.Reads + y.Reads, ConditionFailed: x.ConditionFailed + y.ConditionFailed,
			WriteUnits: x.WriteUnits + y.WriteUnits, IndexWriteUnits: x.IndexWriteUnits + y.IndexWriteUnits, ReadUnits: x.ReadUnits + y.ReadUnits,
		}
	}
}

// storeUnits decodes a /stats document's store_units.
func storeUnits(st workerStats) (map[string]Usage, error) {
	out := map[string]Usage{}
	if st.StoreUnits == nil {
		return nil, fmt.Errorf("worker %s: /stats has no store_units (not a metered store?)", st.WorkerID)
	}
	b, err := json.Marshal(st.StoreUnits)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("worker %s: store_units: %w", st.WorkerID, err)
	}
	return out, nil
}

// TenureCost is what one request kind costs per session tenure.
type TenureCost struct {
	Kind     string  `json:"kind"`
	Requests float64 `json:"requests"`
	WRU      float64 `json:"wru"` // base + index
	IndexWRU float64 `json:"index_wru"`
	RRU      float64 `json:"rru"`
}

// PerTenure divides the usage of kinds by n tenures.
func PerTenure(units map[string]Usage, n int, kinds ...string) []TenureCost {
	var out []TenureCost
	if n <= 0 {
		return out
	}
	f := float64(n)
	for _, k := range kinds {
		u := units[k]
		out = append(out, TenureCost{Kind: k, Requests: float64(u.Requests()) / f, WRU: float64(u.TotalWriteUnits()) / f, IndexWRU: float64(u.IndexWriteUnits) / f, RRU: u.ReadUnits / f})
	}
	return out
}
