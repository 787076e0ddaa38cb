// Package simddb owns the simulated DynamoDB of the fleet simulator: a
// lease.Store that keeps the memory store's semantics (shared/lease/memstore
// decides every transition by the lease rules; simddb re-implements none of
// them) and adds, call by call, what DynamoDB would do to the requests
// dynamostore sends for that call:
//
//   - billing: the write, index write and read units of each request, by
//     testkit/ddbrules (the one definition testkit/dynamodel bills with; item
//     sizes are dynamostore.ItemSize of the items encoded with the schema's
//     encoders), including a failed condition and the consistent read that
//     classifies it, a release's STARTED variant tried on
//     a stopped session, Query pages and BatchGetItem keys (ops.go);
//   - throttling: the token buckets per partition key value and per index
//     key value and the table's on-demand allowance (warm throughput, ramp,
//     quota) of ddbrules.Throttler; a throttled call is undone whole and
//     answered with a ThrottleError, which is lease.ErrThrottled (as
//     dynamostore maps DynamoDB's ThrottlingException) and a smithy.APIError
//     with DynamoDB's code; an index key that cannot take its entry refuses
//     the base write (back-pressure);
//   - latency: each request's drawn from Config.Latency (ddbrules'
//     AWS defaults), half of the first request's before the call is applied
//     and the rest after, slept on Config.Clock: clock.Real, whose timers are
//     virtual inside a testing/synctest bubble, or a clock.Fake the driver
//     advances;
//   - index lag: each global secondary index (by_state, by_owner,
//     by_unowned, by_worker_list) has a view of its own that a write's
//     entries reach after a lag drawn for that index (views.go); an index
//     whose writes were throttled lags ThrottledLag more; OwnedBy,
//     Unowned and ListWorkers read those views; Get, GetWorker and
//     GetWorkers read the table;
//   - meters (meter.go): units per lease.Store operation, per partition key
//     value, per index key value, per index and for the table, each a total
//     and its busiest second, and throttled calls by reason (Meter).
//
// Determinism: a Config.Seed fixes every draw, each from a stream of its
// own (per operation and key for latency, per index and item for lag), so
// the draws on one key do not depend on how calls on other keys
// interleave. What a seed cannot fix, and a simulator must report as such:
// the order in which concurrent calls on the same key (or on the shared
// table allowance near its limit, or Unowned's rotating first shard) reach
// the store is the scheduler's; inside a synctest bubble time is virtual
// but goroutines runnable at the same instant still run in an order Go does
// not fix. Meter.Contended counts the calls on an item that met another
// call on it in flight, one of them a write: a lower bound of what the seed
// did not fix (calls on different keys at the same instant can still meet
// at the table's allowance near its limit, at an index key's read bucket,
// at Unowned's rotating first shard, or at an index whose lag is 0).
//
// Retries: Config.Retry makes a throttled call try again as the worker's
// SDK clients do (WorkerRetry: attempts and jittered backoff); the SDK's
// client-side retry budget is not modelled.
//
// Not modelled: ambiguous outcomes (500 after a write, a lost reply: see
// dynamodel's faults; a context that ends during a call's latency after it
// applied is the one ambiguous answer here), stale eventually consistent
// reads of the base table (GetWorkers answers from the table), a call's
// requests landing at different times (they are applied together),
// attributes DynamoDB keeps at a zero value that the encoders omit (a few
// bytes of item size), provisioned tables, transactions, TTL expiry (see
// ExpireWorker). It is a test harness: no shipped binary imports it
// (shared/archtest).
package simddb
