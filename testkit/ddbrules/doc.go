// Package ddbrules owns the rules by which DynamoDB throttles and bills, as
// one definition that the DynamoDB model (testkit/dynamodel, an HTTP proxy
// in front of dynalite) and the simulated DynamoDB (testkit/simddb, a
// lease.Store in memory) both apply: token buckets per partition key value
// and per index key value, a table's on-demand allowance (warm throughput,
// ramp, quota) and the throttling reasons (throttle.go); the write and read
// unit arithmetic and the index entry rule (billing.go, on the store's
// dynamostore.ItemSize / WriteUnits / ConsistentReadUnits); index entries
// of SDK items (table.go); the latency and lag distributions (dist.go) and
// the documented defaults (defaults.go). It is pure: no I/O, no clock (every
// time is passed in), no randomness of its own (Dist.Draw takes the caller's
// seeded *rand.Rand).
//
// The rules, their defaults and their sources (the full table, with the
// quoted sentences and links, is docs/references.md, section "DynamoDB as
// the model (testkit/dynamodel) behaves"; each rule below names its AWS
// page):
//
//   - Partition key bucket: 1,000 write units/s (PartitionWCU), 3,000 read
//     units/s (PartitionRCU), one per key value, on-demand too; adaptive
//     capacity does not lift it for one key. Source: AWS re:Post Knowledge
//     Center "Why is my on-demand DynamoDB table being throttled?"
//     (on-demand-table-throttling-dynamodb). Burst 1 s: assumption.
//   - Index key bucket: the same 1,000 / 3,000 per key value of each global
//     secondary index (IndexWCU, IndexRCU); a write whose index entry does
//     not fit is refused (back-pressure on the base table). Source:
//     Developer Guide, "GSI write throttling and back pressure"
//     (gsi-throttling); API reference, ThrottlingReason.
//   - On-demand table allowance: a new table serves 4,000 write / 12,000
//     read units/s (WarmWCU, WarmRCU), then twice its previous peak second
//     once that peak is 30 minutes old (PeakWindow: "may throttle above
//     twice its previous peak within 30 minutes"), never above the default
//     table quota of 40,000 / 40,000 (QuotaWCU, QuotaRCU). Sources: re:Post
//     (above); Developer Guide, warm throughput and "pre-warming" pages;
//     quota: Developer Guide, service quotas.
//   - Reasons: TableWriteKeyRangeThroughputExceeded (a key, or the table's
//     current capacity), IndexWriteKeyRangeThroughputExceeded,
//     TableWriteAccountLimitExceeded and the Read forms. Source: DynamoDB API
//     reference, ThrottlingReason.
//   - Billing: a write costs ceil(max(size before, size after) / 1 KB) write
//     units, at least 1, a failed condition the existing item's size (at
//     least 1); an index entry put or deleted its projected size, a key
//     change a delete and a put; a read ceil(size / 4 KB) read units, half
//     when eventually consistent. Source: Developer Guide, "Capacity unit
//     consumption" and "DynamoDB item sizes and formats"
//     (CapacityUnitCalculations); the item size is dynamostore.ItemSize.
//   - Latency: reads median 3 ms / p99 12 ms, writes 5 ms / 20 ms
//     (lognormal: an assumption within AWS's "single-digit millisecond"),
//     0.01 % of requests 5–10 s more (the server's internal 5 s timeout and
//     retry: re:Post dynamodb-maximum-latency; the share is an assumption).
//   - Index lag: median 100 ms, p99 800 ms, 0.1 % 2–15 s (Developer Guide
//     GSI page "within a fraction of a second"; re:Post
//     dynamodb-missing-table-items-gsi "within 1 second"; guardian/grid
//     #3641, #3642: 15 s; the shape and share are assumptions).
//
// It is a test harness: no shipped binary imports it (shared/archtest).
package ddbrules
